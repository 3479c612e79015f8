"""Which profile the proxy uses: a packaged YAML file, extended (tool by tool) from .gitledger.yml."""

from __future__ import annotations

from pathlib import Path

from gitledger.config import Config, McpProfile, load_mcp_profile
from gitledger.core.errors import UsageError


def builtin_names(builtin_dir: Path) -> list[str]:
    return sorted(p.stem for p in builtin_dir.glob("*.yaml"))


def resolve_profile(name: str | None, builtin_dir: Path, config: Config) -> McpProfile:
    """The profile ``name``: the packaged ``builtin_dir/NAME.yaml`` if there is one, with the tools of
    ``mcp.profiles.NAME`` in .gitledger.yml replacing or adding rules. Without a name: no rules, the
    tools' annotations decide (plus ``mcp.profiles.default`` from .gitledger.yml, if any)."""
    lookup = name or "default"
    path = builtin_dir / f"{lookup}.yaml"
    base = load_mcp_profile(path, lookup) if path.is_file() else None
    local = config.mcp_profiles.get(lookup)
    if base is None and local is None:
        if name is None:
            return McpProfile("default")
        known = ", ".join(builtin_names(builtin_dir)) or "none"
        raise UsageError(
            f"unknown MCP profile {name!r}; built in: {known}; "
            f"or define mcp.profiles.{name} in .gitledger.yml"
        )
    tools = dict(base.tools) if base is not None else {}
    if local is not None:
        tools.update(local.tools)
    description = (local.description if local is not None and local.description else None) or (
        base.description if base is not None else ""
    )
    return McpProfile(lookup, description, tools)
