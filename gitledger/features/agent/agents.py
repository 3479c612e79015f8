"""Thin adapters between each agent's hook protocol and the normalised model (docs/agents.md).

========  ===========================================  =============================================
agent     events read                                  a refusal
========  ===========================================  =============================================
claude    PreToolUse, PostToolUse, PostToolUseFailure,  stdout ``{"hookSpecificOutput": {"hookEventName":
          SessionStart, Stop, SubagentStop              "PreToolUse", "permissionDecision": "deny",
                                                        "permissionDecisionReason": …}}``, exit 0
codex     PreToolUse, PostToolUse (a non-zero exit in   the same shape, and nothing else: Codex rejects
          the response counts as a failure),            unknown fields (strict schema)
          SessionStart, Stop
gemini    BeforeTool, AfterTool (``error`` in the       stdout ``{"decision": "deny", "reason": …}``,
          response: a failure), SessionStart,           exit 0
          AfterAgent
========  ===========================================  =============================================

"Cannot tell" is exit 2 with one line on stderr for every agent (the common denominator: each blocks
on it). ``ask`` is never emitted. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gitledger.features.agent.model import (
    CONTEXT,
    DENY,
    FAIL_CLOSED,
    FAILURE,
    KEEP_WORKING,
    OTHER,
    POST,
    PRE,
    SESSION_START,
    STOP,
    Decision,
    HookEvent,
)
from gitledger.features.agent.recognise import SHELL_TOOLS

AGENTS = ("claude", "codex", "gemini")

_EVENTS: dict[str, dict[str, str]] = {
    "claude": {
        "PreToolUse": PRE,
        "PostToolUse": POST,
        "PostToolUseFailure": FAILURE,
        "SessionStart": SESSION_START,
        "Stop": STOP,
        "SubagentStop": STOP,
    },
    "codex": {"PreToolUse": PRE, "PostToolUse": POST, "SessionStart": SESSION_START, "Stop": STOP},
    "gemini": {"BeforeTool": PRE, "AfterTool": POST, "SessionStart": SESSION_START, "AfterAgent": STOP},
}


class HookInputError(ValueError):
    """The hook input is not what the agent's protocol says."""


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        parts = [value.get(k) for k in ("stdout", "output", "llmContent", "returnDisplay", "stderr")]
        texts = [p for p in parts if isinstance(p, str)]
        return "\n".join(texts) + "\n" + json.dumps(value, ensure_ascii=False, default=str)
    return json.dumps(value, ensure_ascii=False, default=str)


def _failed(agent: str, response: Any) -> bool:
    if not isinstance(response, Mapping):
        return False
    if agent == "gemini":
        return bool(response.get("error"))
    code = response.get("exit_code", response.get("exitCode"))
    return isinstance(code, int) and not isinstance(code, bool) and code != 0


def _command(tool_input: Mapping[str, Any]) -> bool:
    """Whether a shell tool's input holds its command line: a string, or (Codex) a list of words."""
    command = tool_input.get("command")
    return isinstance(command, str) or (
        isinstance(command, list) and all(isinstance(word, str) for word in command)
    )


def parse(agent: str, raw: Any) -> HookEvent:
    """The normalised event of one hook input (a JSON object)."""
    if not isinstance(raw, Mapping):
        raise HookInputError("the hook input is not a JSON object")
    name = raw.get("hook_event_name")
    if not isinstance(name, str) or not name:
        raise HookInputError("the hook input has no hook_event_name")
    kind = _EVENTS[agent].get(name, OTHER)
    tool_input = raw.get("tool_input")
    if tool_input is None:
        tool_input = {}
    if kind in (PRE, POST, FAILURE) and (
        not isinstance(raw.get("tool_name"), str) or not isinstance(tool_input, Mapping)
    ):
        raise HookInputError(f"the {name} input has no tool_name or its tool_input is not an object")
    if kind in (PRE, POST, FAILURE) and raw["tool_name"] in SHELL_TOOLS and not _command(tool_input):
        raise HookInputError(
            f"the {name} input has no command line (its tool_input.command must be a string)"
        )
    response = raw.get("tool_response")
    if kind == POST and _failed(agent, response):
        kind = FAILURE
    error = raw.get("error")
    if error is None and isinstance(response, Mapping) and agent == "gemini":
        error = response.get("error")
    cwd = raw.get("cwd")
    return HookEvent(
        agent=agent,
        kind=kind,
        name=name,
        session_id=str(raw["session_id"]) if raw.get("session_id") is not None else None,
        cwd=cwd if isinstance(cwd, str) and cwd else None,
        tool_name=raw.get("tool_name") if isinstance(raw.get("tool_name"), str) else None,
        tool_input=dict(tool_input) if isinstance(tool_input, Mapping) else {},
        tool_use_id=str(raw["tool_use_id"]) if raw.get("tool_use_id") is not None else None,
        tool_output=_text(response),
        error=_text(error),
        stop_hook_active=raw.get("stop_hook_active") is True,
        source=raw.get("source") if isinstance(raw.get("source"), str) else None,
    )


def render(agent: str, event: HookEvent | None, decision: Decision) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) that carry ``decision`` to ``agent``."""
    verdict = decision.verdict
    if verdict == FAIL_CLOSED:
        return "", _one_line(decision.reason or "gitledger: could not verify the call; not acting") + "\n", 2
    if verdict == DENY:
        reason = decision.reason or "gitledger: refused"
        if agent == "gemini":
            return json.dumps({"decision": "deny", "reason": reason}, ensure_ascii=False) + "\n", "", 0
        out = {
            "hookSpecificOutput": {
                "hookEventName": event.name if event else "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
        return json.dumps(out, ensure_ascii=False) + "\n", "", 0
    if verdict == CONTEXT and decision.context:
        name = event.name if event else "SessionStart"
        out = {"hookSpecificOutput": {"hookEventName": name, "additionalContext": decision.context}}
        return json.dumps(out, ensure_ascii=False) + "\n", "", 0
    if verdict == KEEP_WORKING:
        word = "deny" if agent == "gemini" else "block"
        return (
            json.dumps({"decision": word, "reason": decision.reason or ""}, ensure_ascii=False) + "\n",
            "",
            0,
        )
    if decision.warning:
        return "", _one_line(decision.warning) + "\n", 1
    return "", "", 0


def _one_line(text: str) -> str:
    return " ".join(text.split())[:9000]


__all__ = ["AGENTS", "HookInputError", "parse", "render"]
