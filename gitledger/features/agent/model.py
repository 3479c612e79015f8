"""The agent guard's normalised event model: every agent's hook input becomes a :class:`HookEvent`,
every answer is a :class:`Decision`; the agent adapters (:mod:`gitledger.features.agent.agents`)
translate both ways. Standard library only."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

PRE = "pre"  # before a tool call: may deny it
POST = "post"  # after a tool call that succeeded: record what it made
FAILURE = "failure"  # after a tool call that failed: record that it failed
SESSION_START = "session-start"  # a session starts or resumes: brief the model
STOP = "stop"  # the model wants to stop: may keep it working
OTHER = "other"  # an event the guard has nothing to do with

ALLOW = "allow"  # let the call go on (no output)
DENY = "deny"  # refuse the call, with a reason the model reads
FAIL_CLOSED = "fail-closed"  # cannot tell: refuse with exit 2 and one line on stderr
CONTEXT = "context"  # add text to the model's context
KEEP_WORKING = "keep-working"  # refuse to stop, with a reason
NOTHING = "nothing"  # no answer


class HookEvent(NamedTuple):  # NamedTuples: defined in a tenth of a dataclass's time, on every hook call
    agent: str  # claude | codex | gemini
    kind: str  # one of the constants above
    name: str  # the agent's own event name (PreToolUse, BeforeTool, ...)
    session_id: str | None = None
    cwd: str | None = None
    tool_name: str | None = None
    tool_input: Mapping[str, Any] = MappingProxyType({})
    tool_use_id: str | None = None
    tool_output: str | None = None  # the tool's output as text (stdout, MCP result), for refs
    error: str | None = None
    stop_hook_active: bool = False
    source: str | None = None  # SessionStart: startup, resume, clear, compact


class Decision(NamedTuple):
    verdict: str
    reason: str | None = None  # deny, fail-closed, keep-working
    context: str | None = None  # context, or extra context next to a deny
    warning: str | None = None  # a line for stderr that changes nothing (post: could not record)


ALLOWED = Decision(ALLOW)
SILENT = Decision(NOTHING)
