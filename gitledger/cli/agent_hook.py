"""``gitledger agent-hook claude|codex|gemini``: one agent hook event on stdin, the answer on stdout.

Dispatched by :func:`gitledger.cli.main` before typer is imported. A call the guard does not
recognise (``ls``, ``pytest``, ``git status``) is answered after parsing the JSON and the command
line: no typer, no PyGithub, no git, no ledger read, no network.

It fails closed: anything that goes wrong — malformed input, no token, GitHub down or refusing, a
corrupt ledger entry, a bug — ends in exit 2 with one line on stderr (for a PreToolUse event this
refuses the call in every agent). The output path of that refusal needs nothing but the standard
library. ``ask`` is never answered.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

USAGE = """usage: gitledger agent-hook claude|codex|gemini [EVENT] [--task TASK]

Reads one hook event of the agent as JSON on stdin (the event is its hook_event_name; EVENT, e.g.
'pre', is accepted for readability and ignored) and answers in that agent's format: a refusal names
the existing artifact and the safe way forward; anything it cannot verify exits 2. Install the hooks
with 'gitledger agent install claude|codex|gemini'. See docs/agents.md.
"""
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "env", "timeout", "nice", "nohup", "sudo"})
_MAX_INPUT = 16 * 1024 * 1024


def agent_pid(env: Mapping[str, str]) -> int:
    """The agent's process: ``GITLEDGER_AGENT_PID``, else the hook's nearest ancestor that is no shell."""
    given = env.get("GITLEDGER_AGENT_PID", "").strip()
    if given.isdigit():
        return int(given)
    pid = os.getppid()
    for _ in range(8):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return pid
        if comm not in _SHELLS:
            return pid
        parent = int(stat[stat.rfind(b")") + 2 :].split()[1])
        if parent <= 1:
            return pid
        pid = parent
    return pid


def run(
    argv: Sequence[str],
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Answer one hook event; the exit code for the agent. Never raises (fails closed)."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    agent = argv[0] if argv else ""
    # No cyclic garbage collection during one short answer: the imports it makes would otherwise set
    # off a full collection over every module loaded (~4 ms, a twentieth of a guarded call).
    collecting = gc.isenabled()
    gc.disable()
    try:
        code, text, line = _run(
            list(argv), sys.stdin if stdin is None else stdin, os.environ if env is None else env
        )
    except BaseException as exc:  # a crash must still refuse: exit 2, whatever happened
        if isinstance(exc, SystemExit) and exc.code == 0:
            return 0
        detail = f"{type(exc).__name__}: {exc}"[:500]
        code, text = 2, ""
        line = (
            f"gitledger: internal error in the {agent or 'agent'} hook ({detail}); could not verify the "
            "call, not acting. Report it, or disable the gitledger hook to proceed without the guard."
        )
    finally:
        if collecting:
            gc.enable()
    try:
        if text:
            out.write(text)
            out.flush()
        if line:
            err.write(" ".join(line.split()) + "\n")
            err.flush()
    except BaseException:
        return 2
    return code


def _run(argv: list[str], stdin: IO[str] | None, env: Mapping[str, str]) -> tuple[int, str, str]:
    from gitledger.features.agent import agents
    from gitledger.features.agent.model import FAIL_CLOSED, FAILURE, OTHER, POST, PRE, Decision

    if not argv or argv[0] in ("-h", "--help"):
        return (0 if argv else 2), USAGE if argv else "", "" if argv else USAGE.splitlines()[0]
    agent = argv[0]
    if agent not in agents.AGENTS:
        return 2, "", f"gitledger: unknown agent {agent!r}; use one of: {', '.join(agents.AGENTS)}"
    task = None
    rest = argv[1:]
    if "--task" in rest:
        i = rest.index("--task")
        task = rest[i + 1] if i + 1 < len(rest) else None
    try:
        data = _read(stdin)
        if len(data) > _MAX_INPUT:
            raise agents.HookInputError("the hook input is larger than 16 MiB")
        try:
            raw = json.loads(data)
        except ValueError as exc:
            raise agents.HookInputError(f"the hook input is not JSON ({exc})") from exc
        except RecursionError as exc:  # [[[[…]]]] some thousands deep
            raise agents.HookInputError("the hook input is JSON nested too deeply to read") from exc
        event = agents.parse(agent, raw)
    except agents.HookInputError as exc:
        decision = Decision(FAIL_CLOSED, f"gitledger: {exc}; could not verify the call, not acting")
        return agents.render(agent, None, decision)[2], "", decision.reason or ""
    if event.kind == OTHER:
        return 0, "", ""
    cwd = event.cwd or os.getcwd()
    if event.kind in (PRE, POST, FAILURE):
        from gitledger.core.errors import ConfigError
        from gitledger.features.agent.recognise import recognise

        try:
            rules = _rules(cwd)
        except ConfigError:  # any call may be one of its rules: _decide fails closed, naming the file
            rules = None
        if rules is not None and not recognise(event.tool_name, event.tool_input, cwd, rules):
            return 0, "", ""  # the fast answer: nothing GitHub-related, nothing read
    decision = _decide(event, cwd, task, env)
    stdout, stderr, code = agents.render(agent, event, decision)
    if decision.verdict == FAIL_CLOSED and event.kind != PRE:
        code = 1  # after the fact nothing can be refused: a non-blocking error
    return code, stdout, stderr.rstrip("\n")


def _read(stdin: IO[str] | None) -> str:
    """The hook input: at most one character more than the limit, so that a larger one is seen."""
    from gitledger.features.agent.agents import HookInputError

    if stdin is None:  # started with stdin closed (<&-): Python has no sys.stdin then
        raise HookInputError("no hook input: stdin is closed (the agent passes the event as JSON on stdin)")
    try:
        return stdin.read(_MAX_INPUT + 1)
    except (OSError, ValueError) as exc:  # ValueError: not text in the locale's encoding
        raise HookInputError(f"cannot read the hook input on stdin ({exc})") from exc


def _rules(cwd: str) -> Any:
    """The agent rules of .gitledger.yml, reading YAML only when the file has an ``agent:`` section."""
    here = Path(cwd)
    for directory in (here, *here.parents):
        candidate = directory / ".gitledger.yml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return ()  # the full path below reports the file properly
            if "rules:" not in text:
                return ()
            from gitledger import config as config_mod

            return config_mod.parse(text, candidate).agent.rules
        if (directory / ".git").exists():
            return ()
    return ()


def _decide(event: Any, cwd: str, task: str | None, env: Mapping[str, str]) -> Any:
    from gitledger.core.errors import GitledgerError, disk_full
    from gitledger.core.owner import Owner, boot_id, machine_id, pid_namespace, process_start
    from gitledger.features.agent.guard import AgentGuard
    from gitledger.features.agent.model import FAIL_CLOSED, FAILURE, POST, PRE, SESSION_START, Decision
    from gitledger.features.agent.task import resolve_task
    from gitledger.session import open_session

    try:
        with open_session(cwd) as ws:
            choice = resolve_task(cwd, task, env=env, repo=ws.repo, pattern=ws.config.agent.task_branch)
            pid = agent_pid(env)
            owner = Owner(
                os.uname().nodename,
                boot_id(),
                pid,
                process_start(pid),
                f"agent:{event.session_id}:{pid}",
                machine_id(),
                pid_namespace(),
            )
            guard = AgentGuard(ws, owner, choice.task if choice else None, event)
            try:
                if event.kind == PRE:
                    return guard.pre()
                if event.kind in (POST, FAILURE):
                    return guard.post(failed=event.kind == FAILURE)
                from gitledger.features.agent.briefing import briefing, stop_gate

                if event.kind == SESSION_START:
                    return briefing(guard)
                return stop_gate(guard, event.stop_hook_active)
            finally:
                guard.close()
    except OSError as exc:
        full = disk_full(exc)
        if full is None:
            raise
        return Decision(
            FAIL_CLOSED,
            f"gitledger: the disk is full ({full}); could not record this call, not acting. Free space, "
            "then retry the call",
        )
    except GitledgerError as exc:
        message = exc.message if exc.message.startswith("gitledger:") else f"gitledger: {exc.message}"
        if event.kind == PRE and "not acting" not in message:
            message += (
                " — could not tell whether this call would repeat an earlier one; not acting. Fix that and "
                "retry the call."
            )
        return Decision(FAIL_CLOSED, message)


__all__ = ["USAGE", "agent_pid", "run"]
