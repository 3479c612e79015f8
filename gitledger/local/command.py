"""Runs the user's command as a step's action."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gitledger.core import crashpoints as faults
from gitledger.core.errors import UsageError
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult

MAX_REF = 65536


def step_env(step: StepKey) -> dict[str, str]:
    """The GITLEDGER_* variables describing a step, for commands and check commands."""
    return {
        "GITLEDGER_KEY": step.key,
        "GITLEDGER_TASK": step.task,
        "GITLEDGER_STEP": step.step,
        "GITLEDGER_DIGEST": step.digest,
        "GITLEDGER_BRANCH": step.branch,
        "GITLEDGER_LABEL": step.label,
        "GITLEDGER_TRAILER": step.trailer,
        "GITLEDGER_MARKER": step.marker,
    }


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the command is killed when gitledger dies, so a dead owner never leaves it running."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _on_path(program: str) -> bool:
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return True
    return False


def check_command(argv: Sequence[str], cwd: Path) -> None:
    """Refuse a command that cannot start, before anything is claimed."""
    if not argv:
        raise UsageError("no command given; put it after '--', e.g. gitledger run-step ... -- git push")
    program = argv[0]
    if "/" in program:
        if not (cwd / program).exists():
            raise UsageError(f"command {program!r} not found; check the path")
    elif not _on_path(program):
        raise UsageError(f"command {program!r} not found on PATH; check the spelling or give its full path")


def run_command(
    argv: Sequence[str],
    step: StepKey,
    cwd: Path,
    stdout_to_stderr: bool = False,
    extra_env: dict[str, str] | None = None,
) -> ActionResult:
    """Run ``argv`` with the step's GITLEDGER_* variables; what it writes to $GITLEDGER_RESULT is the ref."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gitledger-") as tmp:
        result_file = Path(tmp) / "result"
        result_file.touch()
        env = dict(os.environ)
        env.update(step_env(step))
        env.update(extra_env or {})
        env["GITLEDGER_RESULT"] = str(result_file)
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdout=sys.stderr if stdout_to_stderr else None,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        except OSError as exc:
            raise UsageError(f"cannot start {argv[0]!r}: {exc.strerror}") from exc
        faults.point("during-effect")
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            code = proc.wait()
        ref = result_file.read_bytes()[:MAX_REF].decode("utf-8", "replace").strip() or None
    if code < 0:
        code = 128 - code
    if code == 0:
        return ActionResult(ok=True, ref=ref)
    return ActionResult(ok=False, exit_code=code, message=f"{argv[0]} exited with code {code}")
