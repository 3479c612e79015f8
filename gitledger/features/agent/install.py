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

import contextlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitledger.core.errors import GitledgerError, UsageError

MARK = "gitledger agent-hook"
_KEEP = "fix it first, gitledger does not overwrite it"  # what a settings file it cannot merge needs
CLAUDE_IFS = (
    "Bash(gh pr create *)",
    "Bash(gh pr new *)",
    "Bash(gh pr comment *)",
    "Bash(gh issue comment *)",
    "Bash(gh issue create *)",
    "Bash(gh issue new *)",
    "Bash(gh pr -R*)",  # --repo before the subcommand: gh pr -R o/r create
    "Bash(gh pr --repo*)",
    "Bash(gh issue -R*)",
    "Bash(gh issue --repo*)",
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
        if len(parts) >= 2 and all(part.isdecimal() for part in parts):
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
    before = _read(path)
    try:
        current = json.loads(before, object_pairs_hook=_object) if before and before.strip() else {}
    except _TwiceError as exc:
        name = json.dumps(exc.args[0], ensure_ascii=False)
        raise UsageError(f"{path} gives the key {name} twice in one object; {_KEEP}") from exc
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); {_KEEP}") from exc
    except RecursionError as exc:
        raise UsageError(f"{path} nests JSON too deeply to be a settings file; {_KEEP}") from exc
    if not isinstance(current, dict):
        raise UsageError(f"{path} does not hold a JSON object; {_KEEP}")
    problem = None if uninstall else _shape_problem(current, hook_entries(agent))
    if problem:
        raise UsageError(f"{path}: {problem}; {_KEEP}")
    new = strip(current) if uninstall else merge(current, agent, command, fail_closed=fail_closed)
    after = json.dumps(new, indent=2, ensure_ascii=False) + "\n"
    flag = json.dumps({"hooks": hook_entries(agent, command, fail_closed=fail_closed)}, separators=(",", ":"))
    return InstallPlan(path, before, after, flag)


class _TwiceError(ValueError):
    """A key given twice in one object of a settings file (``args[0]``)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of a settings file. A key given twice is refused: JSON readers keep one of the
    values, so writing the file back would drop the other without a word."""
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise _TwiceError(name)
        found[name] = value
    return found


def _read(path: Path) -> str | None:
    """The settings file's text, or None when there is none."""
    if path.exists() and not path.is_file():  # e.g. a link to /dev/null, which the rename would replace
        raise UsageError(f"{path} is not a regular file (nor a link to one); {_KEEP}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror or exc}); fix its permissions") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text (byte {exc.start}); {_KEEP}") from exc


def _shape_problem(settings: dict[str, Any], entries: Mapping[str, object]) -> str | None:
    """What keeps gitledger's entries out of ``settings`` (None: nothing): ``hooks`` must be an object,
    and each event gitledger adds to must hold a list of matcher groups."""
    hooks = settings.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict):
        return '"hooks" is not a JSON object'
    for event in entries:
        if event in hooks and not isinstance(hooks[event], list):
            return f'"hooks"."{event}" is not a JSON array'
    return None


def apply(plan: InstallPlan) -> None:
    """Write ``plan.after`` to ``plan.path`` through a temporary file: on any failure the settings file
    is left as it was and the temporary file is removed."""
    if not plan.changed:
        return
    # a settings file that is a symbolic link (a dotfiles checkout) is written where it points: the
    # rename would otherwise put a plain file in the link's place
    target = plan.path.resolve() if plan.path.is_symlink() else plan.path
    tmp = target.with_name(target.name + ".gitledger-tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(plan.after)
            fh.flush()
            if target.exists():  # keep the file's permissions
                os.chmod(fh.fileno(), stat.S_IMODE(target.stat().st_mode))
            os.fsync(fh.fileno())
        tmp.replace(target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise GitledgerError(
            f"cannot write {plan.path} ({exc.strerror or exc}); it was left as it was. Check that the file "
            "and its directory can be written (permissions, immutable flag, free space), then install again"
        ) from exc


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
