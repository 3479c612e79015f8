"""Runs the user's command as a step's action.

Interrupts: gitledger waits for the command with SIGINT, SIGTERM and SIGHUP blocked and taken with
``sigtimedwait``, forwards them, waits for the command to end, and returns the signal with the result
(:attr:`ActionResult.interrupted`): the protocol closes the claim as interrupted and the CLI exits
128 + the signal (130, 143, 129). Where the command runs decides what "forward" means:

- **gitledger owns the terminal** (it is the foreground process group of its controlling terminal):
  the command stays in gitledger's group, so it keeps the terminal (prompts, Ctrl-Z). Ctrl-C from the
  terminal reaches both already and is not sent again; a signal sent by a process (``kill PID``) is
  forwarded to the command.
- **otherwise** (agents, CI, scripts, background jobs): the command gets its own process group, and
  every interrupt gitledger receives is forwarded to that whole group, exactly once (a supervisor that
  signals gitledger's group, e.g. ``timeout``, no longer reaches the command twice).

gitledger's git helpers run in their own groups (:mod:`gitledger.git.repo`), so no interrupt stops them
before the outcome is written. The command dies with gitledger (``PR_SET_PDEATHSIG``, checked against
the parent's pid after it is set, so a gitledger killed while forking cannot leave it running), and it
carries its claim's id in ``GITLEDGER_CLAIM`` so a successor sees any of its processes that outlive
gitledger (:func:`gitledger.core.owner.claims_running`) and does not act while they run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gitledger.core import crashpoints as faults
from gitledger.core.errors import UsageError
from gitledger.core.keys import StepKey
from gitledger.core.owner import CLAIM_ENV
from gitledger.core.programs import find_program
from gitledger.core.protocol import ActionResult

MAX_REF = 65536  # bytes of $GITLEDGER_RESULT at most: a ref is a URL or an id, not a payload
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_SI_USER, _SI_QUEUE, _SI_TKILL = 0, -1, -6  # senders that are processes (not the kernel or a terminal)
_PR_SET_PDEATHSIG = 1
EXIT_ORPHANED = 125  # the command was not run: gitledger died before the child could bind to it


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


def _prctl() -> Any:
    """libc's prctl, loaded before forking (loading a library in the child could deadlock)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _child_setup(parent: int, mask: Iterable[int], prctl: Any) -> Callable[[], None]:
    def setup() -> None:  # pragma: no cover - runs in the child between fork and exec
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if faults.ARMED == "fork-window":
            faults.kill_parent(parent)  # gitledger dies before the death signal is set
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # The death signal only fires for a parent that dies after it is set: a parent already gone
        # (killed between fork and here) means nobody waits for this command, so it must not run.
        if os.getppid() != parent:
            os._exit(EXIT_ORPHANED)

    return setup


def check_command(argv: Sequence[str], cwd: Path) -> None:
    """Refuse a command that cannot start, before anything is claimed."""
    if not argv:
        raise UsageError("no command given; put it after '--', e.g. gitledger run-step ... -- git push")
    program = argv[0]
    if "/" in program:
        if not os.path.exists(cwd / program):  # False, not an OSError, for a name too long
            raise UsageError(f"command {program!r} not found; check the path")
    elif find_program(program) is None:
        raise UsageError(f"command {program!r} not found on PATH; check the spelling or give its full path")


def owns_terminal() -> bool:
    """Is gitledger the foreground process group of its controlling terminal (an interactive run)?"""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def _forward(proc: subprocess.Popen[bytes], info: Any, own_group: bool) -> None:
    """Pass an interrupt on to the command: its whole group when it has one; else the command alone,
    unless the terminal sent it (then the command, in our foreground group, has it already)."""
    with contextlib.suppress(OSError):
        if own_group:
            os.killpg(proc.pid, info.si_signo)
        elif info.si_code in (_SI_USER, _SI_QUEUE, _SI_TKILL):
            proc.send_signal(info.si_signo)


def _watched() -> set[signal.Signals]:
    """The signals to take while the command runs: SIGCHLD (it ended) and the interrupts that are not
    ignored (``nohup`` ignores SIGHUP, a shell's ``&`` SIGINT: those stay ignored)."""
    return {signal.SIGCHLD, *(s for s in INTERRUPTS if signal.getsignal(s) != signal.SIG_IGN)}


ECHO_WINDOW = 1.0  # seconds within which the same signal from the same sender is one interrupt


def _wait(proc: subprocess.Popen[bytes], watched: set[signal.Signals], own_group: bool) -> tuple[int, int]:
    """Wait for the command, taking the interrupt signals meanwhile: (exit code, first signal or 0).

    A supervisor may send one interrupt twice: ``timeout`` signals its child, then its whole process
    group, which holds gitledger too. The same signal from the same sender within :data:`ECHO_WINDOW`
    is therefore forwarded once; a later one (a deliberate second Ctrl-C) is forwarded again.
    """
    interrupted = 0
    last: tuple[int, int, float] | None = None  # (signal, sender pid, when) of the last one forwarded
    while True:
        code = proc.poll()
        if code is not None:
            break
        info = signal.sigtimedwait(watched, 1.0)
        if info is None or info.si_signo == signal.SIGCHLD:
            continue
        interrupted = interrupted or info.si_signo
        now = time.monotonic()
        if last is not None and last[:2] == (info.si_signo, info.si_pid) and now - last[2] < ECHO_WINDOW:
            continue
        last = (info.si_signo, info.si_pid, now)
        _forward(proc, info, own_group)
    # signals that arrived as the command ended: taken here, never as an exception mid-recording
    while (info := signal.sigtimedwait(watched, 0)) is not None:
        if info.si_signo != signal.SIGCHLD:
            interrupted = interrupted or info.si_signo
    return code, interrupted


@contextlib.contextmanager
def _private_dir() -> Iterator[Path]:
    """A new folder only this user can enter, removed afterwards: ``tempfile.TemporaryDirectory``
    without importing tempfile (with shutil, random, bz2 and lzma: ~3 ms of a fresh step) when
    ``$TMPDIR`` or ``/tmp`` takes it at the first try; tempfile otherwise."""
    base = os.environ.get("TMPDIR") or "/tmp"
    path = Path(base, f"gitledger-{os.urandom(6).hex()}")
    try:
        path.mkdir(mode=0o700)
    except OSError:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="gitledger-") as tmp:
            yield Path(tmp)
        return
    try:
        yield path
    finally:
        try:
            for child in path.iterdir():
                child.unlink()
            path.rmdir()
        except OSError:  # the command left folders of its own there
            import shutil

            shutil.rmtree(path, ignore_errors=True)


def read_result(path: Path) -> tuple[str | None, str | None]:
    """(the ref, a warning) of a command that succeeded, from what it wrote to ``path``
    ($GITLEDGER_RESULT): its text, stripped; no ref when it is empty or gone. Never raises (the
    command's success must be recorded whatever it left there): what is not a regular file of at most
    :data:`MAX_REF` bytes is left out, and the warning says so."""
    data, problem = _read_small_file(path)
    if problem is not None:
        return None, (
            f"the command succeeded but what it left at $GITLEDGER_RESULT {problem}; "
            "the step is recorded done without a ref"
        )
    return data.decode("utf-8", "replace").strip() or None, None


def _read_small_file(path: Path) -> tuple[bytes, str | None]:
    """(the bytes of the regular file at ``path``, None), or (b"", what is wrong with it); a missing
    file is empty. A symbolic link is not followed, nor a FIFO waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return b"", None
    except OSError as exc:
        return b"", "is a symbolic link" if os.path.islink(path) else f"cannot be read ({exc.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"", "is not a regular file"
        data = b""
        while len(data) <= MAX_REF and (chunk := os.read(fd, MAX_REF + 1 - len(data))):
            data += chunk
    except OSError as exc:
        return b"", f"cannot be read ({exc.strerror})"
    finally:
        os.close(fd)
    if len(data) > MAX_REF:
        return b"", f"is larger than {MAX_REF // 1024} KiB"
    return data, None


def run_command(
    argv: Sequence[str],
    step: StepKey,
    cwd: Path,
    stdout_to_stderr: bool = False,
    extra_env: dict[str, str] | None = None,
    claim_id: str | None = None,
    on_start: Callable[[], None] | None = None,
) -> ActionResult:
    """Run ``argv`` with the step's GITLEDGER_* variables; what it writes to $GITLEDGER_RESULT is the ref.

    ``on_start`` runs once the command has started (e.g. the claim's heartbeats: no thread may exist
    while forking). Must run on the main thread (it waits for signals).
    """
    with _private_dir() as tmp:
        result_file = tmp / "result"
        result_file.touch()
        env = dict(os.environ)
        env.update(step_env(step))
        env.update(extra_env or {})
        env["GITLEDGER_RESULT"] = str(result_file)
        if claim_id:
            env[CLAIM_ENV] = claim_id
        prctl = _prctl()
        watched = _watched()
        own_group = not owns_terminal()
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
        try:
            try:
                proc = subprocess.Popen(
                    list(argv),
                    cwd=cwd,
                    env=env,
                    stdout=sys.stderr if stdout_to_stderr else None,
                    preexec_fn=_child_setup(os.getpid(), old_mask, prctl),
                    process_group=0 if own_group else None,
                )
            except OSError as exc:
                raise UsageError(f"cannot start {argv[0]!r}: {exc.strerror}") from exc
            faults.point("during-effect")
            if on_start is not None:
                on_start()
            code, interrupted = _wait(proc, watched, own_group)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        ref, warning = read_result(result_file) if code == 0 else (None, None)
    if code < 0:
        code = 128 - code
    if code == 0:
        return ActionResult(ok=True, ref=ref, interrupted=interrupted, warnings=(warning,) if warning else ())
    message = f"{argv[0]} exited with code {code}"
    if interrupted:
        message = f"{argv[0]} exited with code {code} after {signal.Signals(interrupted).name}"
    return ActionResult(ok=False, exit_code=code, message=message, interrupted=interrupted)
