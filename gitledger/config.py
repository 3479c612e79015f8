"""``.gitledger.yml``: repository defaults, loaded in one place into frozen, typed settings.

Example::

    remote: origin            # the remote 'sync' and remote claims use
    claims: local             # or 'remote': push each claim to the remote before acting
    durability: fsync         # or 'none': do not wait for the disk (survives a killed process, not a power cut)
    lease: 900                # seconds a claim holds against owners on other hosts
    on_unconfirmed: fail      # fail | retry | skip
    prefixes:
      branch: gitledger/
      label: "gitledger:"
    github:
      repo: acme/widgets
    steps:
      open-pr:
        checks: [github-pr]
        lease: 600
      notify:
        checks: [ledger]
        on_unconfirmed: skip

A bad file raises :class:`~gitledger.errors.ConfigError` naming the file, the line and the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitledger.errors import ConfigError, UsageError
from gitledger.keys import Names

FILENAME = ".gitledger.yml"
_SAFE_API_URL = re.compile(r"^(https://[^\s/]+|http://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?)(/\S*)?$")
_OWNER_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class StepConfig:
    checks: tuple[str, ...] | None = None
    on_unconfirmed: str | None = None
    lease: float | None = None


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    remote: str | None = None
    claims: str = "local"
    durability: str = "fsync"
    lease: float | None = None
    on_unconfirmed: str | None = None
    names: Names = field(default_factory=Names)
    github_repo: str | None = None
    github_api_url: str | None = None
    steps: dict[str, StepConfig] = field(default_factory=dict)

    def step(self, name: str) -> StepConfig:
        return self.steps.get(name, StepConfig())


class _Reader:
    """Validates a composed YAML node tree and reports errors with file and line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, node: Any, message: str) -> ConfigError:
        line = node.start_mark.line + 1 if node is not None else 1
        return ConfigError(f"{self.path} line {line}: {message}")

    def mapping(self, node: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        import yaml

        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{where} must be a mapping of options")
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if not isinstance(key_node, yaml.ScalarNode) or not isinstance(key, str):
                raise self.fail(key_node, f"{where} has a key that is not a name")
            if allowed and key not in allowed:
                raise self.fail(
                    key_node, f"unknown option {key!r} in {where}; expected one of: {', '.join(allowed)}"
                )
            if key in out:
                raise self.fail(key_node, f"option {key!r} appears twice in {where}; keep one")
            out[key] = value_node
        return out

    def scalar(self, node: Any, where: str) -> Any:
        import yaml

        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{where} must be a single value")
        return yaml.safe_load(yaml.serialize(node))

    def string(self, node: Any, where: str, choices: tuple[str, ...] = ()) -> str:
        value = self.scalar(node, where)
        if not isinstance(value, str) or not value:
            raise self.fail(node, f"{where} must be a non-empty string")
        if choices and value not in choices:
            raise self.fail(node, f"{where} is {value!r}; use one of: {', '.join(choices)}")
        return value

    def seconds(self, node: Any, where: str) -> float:
        from gitledger.protocol import MAX_LEASE

        value = self.scalar(node, where)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_LEASE:
            raise self.fail(
                node, f"{where} must be a positive number of seconds up to {MAX_LEASE:.0f}, e.g. 900"
            )
        return float(value)

    def checks(self, node: Any, where: str) -> tuple[str, ...]:
        import yaml

        from gitledger.checks.specs import validate_spec

        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        specs = []
        for item in items:
            spec = self.string(item, where)
            reason = validate_spec(spec)
            if reason:
                raise self.fail(item, reason)
            specs.append(spec)
        return tuple(specs)


def parse(text: str, path: Path) -> Config:
    import yaml

    from gitledger.protocol import ON_UNCONFIRMED

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{line}: invalid YAML ({problem}); fix the syntax") from exc
    if root is None:
        return Config(path=path)
    r = _Reader(path)
    top = r.mapping(
        root,
        "the file",
        (
            "version",
            "remote",
            "claims",
            "durability",
            "lease",
            "on_unconfirmed",
            "prefixes",
            "github",
            "steps",
        ),
    )
    settings: dict[str, Any] = {"path": path}
    if "version" in top and r.scalar(top["version"], "version") != 1:
        raise r.fail(top["version"], "version must be 1")
    if "remote" in top:
        settings["remote"] = r.string(top["remote"], "remote")
    if "claims" in top:
        settings["claims"] = r.string(top["claims"], "claims", ("local", "remote"))
    if "durability" in top:
        settings["durability"] = r.string(top["durability"], "durability", ("fsync", "none"))
    if "lease" in top:
        settings["lease"] = r.seconds(top["lease"], "lease")
    if "on_unconfirmed" in top:
        settings["on_unconfirmed"] = r.string(top["on_unconfirmed"], "on_unconfirmed", ON_UNCONFIRMED)
    if "prefixes" in top:
        prefixes = r.mapping(top["prefixes"], "prefixes", ("branch", "label"))
        values = {k: r.string(v, f"prefixes.{k}") for k, v in prefixes.items()}
        try:
            settings["names"] = Names(
                branch_prefix=values.get("branch", Names.branch_prefix),
                label_prefix=values.get("label", Names.label_prefix),
            )
        except UsageError as exc:  # Names validates the prefixes
            raise r.fail(top["prefixes"], str(exc)) from exc
    if "github" in top:
        gh = r.mapping(top["github"], "github", ("repo", "api_url"))
        if "repo" in gh:
            repo = r.string(gh["repo"], "github.repo")
            if not _OWNER_REPO.match(repo):
                raise r.fail(gh["repo"], f"github.repo {repo!r} must look like OWNER/NAME")
            settings["github_repo"] = repo
        if "api_url" in gh:
            url = r.string(gh["api_url"], "github.api_url")
            if not _SAFE_API_URL.match(url):
                # the token is sent there: a committed file must not send it in clear text elsewhere
                raise r.fail(
                    gh["api_url"],
                    f"github.api_url {url!r} must be an https:// URL (http:// only to localhost/127.0.0.1); "
                    "use GITHUB_API_URL for anything else",
                )
            settings["github_api_url"] = url
    if "steps" in top:
        steps: dict[str, StepConfig] = {}
        for name, node in r.mapping(top["steps"], "steps", ()).items():
            where = f"steps.{name}"
            opts = r.mapping(node, where, ("checks", "on_unconfirmed", "lease"))
            steps[name] = StepConfig(
                checks=r.checks(opts["checks"], f"{where}.checks") if "checks" in opts else None,
                on_unconfirmed=(
                    r.string(opts["on_unconfirmed"], f"{where}.on_unconfirmed", ON_UNCONFIRMED)
                    if "on_unconfirmed" in opts
                    else None
                ),
                lease=r.seconds(opts["lease"], f"{where}.lease") if "lease" in opts else None,
            )
        settings["steps"] = steps
    return Config(**settings)


def load(directory: Path | None) -> Config:
    """The config of the repository whose top is ``directory``; defaults when there is no file."""
    if directory is None:
        return Config()
    path = directory / FILENAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc}); fix its permissions or encoding") from exc
    return parse(text, path)
