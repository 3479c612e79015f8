"""``gitledger agent install``: merge the guard's hook entries into an agent's settings file.

Idempotent and polite: entries are recognised by their command (``gitledger agent-hook AGENT``);
installing again replaces only them, ``--uninstall`` removes only them, everything else in the file
(other hooks, other settings) is kept as it was. Each PreToolUse entry for a shell tool carries an
``if`` filter (Claude Code) or a matcher, so the hook starts only for calls it may guard.

Where the settings live:

======  ====================================  =====================================
agent   --project (default)                   --user
======  ====================================  =====================================
claude  .claude/settings.json                 ~/.claude/settings.json
codex   .codex/hooks.json                     ~/.codex/hooks.json
gemini  .gemini/settings.json                 ~/.gemini/settings.json
======  ====================================  =====================================
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitledger.core.errors import UsageError

MARK = "gitledger agent-hook"
CLAUDE_IFS = (
    "Bash(gh pr create *)",
    "Bash(gh pr comment *)",
    "Bash(gh issue comment *)",
    "Bash(gh issue create *)",
    "Bash(gh api *)",
    "Bash(git push *)",
)
MCP_MATCHER = "mcp__github__.*|mcp__plugin_.*_github__.*"
ON_FAILURE_SINCE = (2, 1, 295)
"""The first Claude Code version with a hook handler's ``onFailure: "block"``: a hook that crashes or
times out then refuses the call instead of letting it through (docs/agents.md, "Failure behaviour")."""
PATHS = {
    "claude": (".claude/settings.json", "~/.claude/settings.json"),
    "codex": (".codex/hooks.json", "~/.codex/hooks.json"),
    "gemini": (".gemini/settings.json", "~/.gemini/settings.json"),
}


def supports_on_failure(version: tuple[int, ...] | None) -> bool:
    """Whether a Claude Code of ``version`` honours ``onFailure: "block"`` (None: unknown, so no)."""
    return version is not None and version >= ON_FAILURE_SINCE


def parse_version(text: str) -> tuple[int, ...] | None:
    """``(2, 1, 295)`` from ``claude --version`` output such as ``2.1.295 (Claude Code)``."""
    for word in text.split():
        parts = word.split(".")
        if len(parts) >= 2 and all(part.isdigit() for part in parts):
            return tuple(int(part) for part in parts)
    return None


def hook_entries(
    agent: str, command: str = "gitledger", *, fail_closed: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """The hook entries of ``agent``, by event. ``fail_closed`` (Claude Code only) adds
    ``onFailure: "block"`` to the handlers that guard tool calls."""
    run = f"{command} agent-hook {agent}"
    if agent == "claude":
        block = {"onFailure": "block"} if fail_closed else {}

        def handlers(event: str) -> list[dict[str, Any]]:
            return [
                {
                    "matcher": "Bash",
                    "hooks": [
                        {"type": "command", "if": rule, "command": f"{run} {event}", "timeout": 60, **block}
                        for rule in CLAUDE_IFS
                    ],
                },
                {
                    "matcher": MCP_MATCHER,
                    "hooks": [{"type": "command", "command": f"{run} {event}", "timeout": 60, **block}],
                },
            ]

        return {
            "SessionStart": [
                {
                    "matcher": "startup|resume|compact",
                    "hooks": [{"type": "command", "command": f"{run} session-start", "timeout": 30}],
                }
            ],
            "PreToolUse": handlers("pre"),
            "PostToolUse": handlers("post"),
            "PostToolUseFailure": handlers("post-failure"),
            "Stop": [{"hooks": [{"type": "command", "command": f"{run} stop", "timeout": 60}]}],
        }
    if agent == "codex":
        one = [{"matcher": "Bash", "hooks": [{"type": "command", "command": run, "timeout": 60}]}]
        return {
            "SessionStart": [{"matcher": "startup|resume", "hooks": [{"type": "command", "command": run}]}],
            "PreToolUse": one,
            "PostToolUse": one,
            "Stop": [{"hooks": [{"type": "command", "command": run}]}],
        }
    if agent == "gemini":
        tools = f"run_shell_command|{MCP_MATCHER}"
        entry = [{"matcher": tools, "hooks": [{"type": "command", "command": run, "timeout": 60000}]}]
        return {
            "SessionStart": [{"hooks": [{"type": "command", "command": run, "timeout": 30000}]}],
            "BeforeTool": entry,
            "AfterTool": entry,
            "AfterAgent": [{"hooks": [{"type": "command", "command": run, "timeout": 60000}]}],
        }
    raise UsageError(f"unknown agent {agent!r}; use one of: {', '.join(PATHS)}")


def _ours(handler: Any) -> bool:
    return isinstance(handler, dict) and MARK in str(handler.get("command", ""))


def strip(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` without gitledger's hook entries (groups left empty are dropped)."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept[event] = groups
            continue
        new_groups = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = [h for h in group["hooks"] if not _ours(h)]
                if handlers:
                    new_groups.append({**group, "hooks": handlers})
                elif not group["hooks"]:
                    new_groups.append(group)
            else:
                new_groups.append(group)
        if new_groups:
            kept[event] = new_groups
    result = dict(settings)
    if kept:
        result["hooks"] = kept
    else:
        result.pop("hooks", None)
    return result


def merge(
    settings: dict[str, Any], agent: str, command: str = "gitledger", *, fail_closed: bool = False
) -> dict[str, Any]:
    """``settings`` with gitledger's entries (re)installed, everything else untouched."""
    result = strip(settings)
    hooks = dict(result.get("hooks") or {})
    for event, groups in hook_entries(agent, command, fail_closed=fail_closed).items():
        hooks[event] = [*(hooks.get(event) or []), *groups]
    result["hooks"] = hooks
    return result


@dataclass(frozen=True)
class InstallPlan:
    path: Path
    before: str | None
    after: str
    settings_flag: str  # for headless runs (claude -p --bare --settings ...)

    @property
    def changed(self) -> bool:
        return self.before != self.after


def plan_install(
    agent: str, path: Path, uninstall: bool = False, command: str = "gitledger", *, fail_closed: bool = False
) -> InstallPlan:
    try:
        before = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = None
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc}); fix its permissions") from exc
    try:
        current = json.loads(before) if before and before.strip() else {}
    except ValueError as exc:
        raise UsageError(
            f"{path} is not valid JSON ({exc}); fix it first, gitledger does not overwrite it"
        ) from exc
    if not isinstance(current, dict):
        raise UsageError(f"{path} does not hold a JSON object; fix it first")
    new = strip(current) if uninstall else merge(current, agent, command, fail_closed=fail_closed)
    after = json.dumps(new, indent=2, ensure_ascii=False) + "\n"
    flag = json.dumps({"hooks": hook_entries(agent, command, fail_closed=fail_closed)}, separators=(",", ":"))
    return InstallPlan(path, before, after, flag)


def apply(plan: InstallPlan) -> None:
    if not plan.changed:
        return
    plan.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = plan.path.with_name(plan.path.name + ".gitledger-tmp")
    tmp.write_text(plan.after, encoding="utf-8")
    tmp.replace(plan.path)


__all__ = [
    "ON_FAILURE_SINCE",
    "PATHS",
    "InstallPlan",
    "apply",
    "hook_entries",
    "merge",
    "parse_version",
    "plan_install",
    "strip",
    "supports_on_failure",
]
