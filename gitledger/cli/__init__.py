"""The ``gitledger`` command line: thin commands that parse, call the core and print.

Every command module registers itself on :data:`app`. A plain ``run-step`` runs without typer
(:mod:`gitledger.cli.fastpath`); heavy modules (PyGithub, the benchmarks) are imported inside the
commands that need them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from gitledger.core.errors import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_USAGE,
    GitledgerError,
    Interrupted,
    disk_full,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code. Errors become one line on stderr, bugs included."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "mcp-proxy":  # long-lived and lean: no typer on its path
        from gitledger.cli.mcp_proxy import main as mcp_proxy

        return mcp_proxy(args[1:])
    if args and args[0] == "agent-hook":  # typer-free, and it never raises (fails closed)
        from gitledger.cli.agent_hook import run

        code = run(args[1:])
        if argv is None:
            # This process is the hook, started for one tool call of the agent: everything it writes is
            # written by now (ledger records are write() calls on closed files, the session is closed,
            # run() flushed its answer), so it leaves without the interpreter's teardown of every loaded
            # module (~6 ms, paid on every guarded tool call).
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
        return code
    restore = _catch_signals()
    stdout = sys.stdout
    if stdout is not None:
        sys.stdout = _Stdout(stdout)
    try:
        return _dispatch(args)
    except StdoutError as exc:
        return _stdout_failed(exc.error)
    except (Interrupted, KeyboardInterrupt) as exc:
        import signal

        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        print(f"gitledger: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
    except Exception as exc:
        full = disk_full(exc)
        if full:
            print(
                f"gitledger: the disk is full ({full}); the ledger keeps what it recorded before: free "
                "space, then run the command again",
                file=sys.stderr,
            )
            return EXIT_ERROR
        if os.environ.get("GITLEDGER_DEBUG"):
            raise
        print(
            f"gitledger: internal error (a bug in gitledger): {type(exc).__name__}: {exc}; nothing more "
            "was done. Rerun with GITLEDGER_DEBUG=1 to see where, and please report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        sys.stdout = stdout
        restore()


class StdoutError(Exception):
    """Writing to standard output failed (``error``): a full disk, a closed pipe, not a bug."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _Stdout:
    """Standard output as the commands see it: the same stream, whose write errors are told apart from
    every other OSError (one line on stderr then, not an "internal error")."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise StdoutError(exc) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise StdoutError(exc) from exc

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _stdout_failed(error: OSError) -> int:
    """What is left to do once standard output cannot be written: send what is still buffered nowhere
    (the interpreter would fail again on it at exit), and say so in one line, unless the reader closed
    the pipe on purpose (``| head``: quiet, as click and the shell's tools do)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    if not isinstance(error, BrokenPipeError):
        print(
            f"gitledger: cannot write to standard output: {error.strerror or error}; what the command did "
            "stands, only its output is lost (free space or send the output elsewhere)",
            file=sys.stderr,
        )
    return EXIT_ERROR


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def _catch_signals() -> Callable[[], None]:
    """SIGINT, SIGTERM and SIGHUP end the CLI with one line and 128 + the signal, never silently.

    While a guarded command runs, :mod:`gitledger.local.command` takes these signals itself (and
    forwards them); anywhere else, the exception stops gitledger at that point, which every write
    tolerates (the same as a crash, without losing the message).
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # only the main thread may set handlers (main() called from a thread)
    before = {}
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handler = signal.getsignal(signum)
        if handler in (signal.SIG_DFL, signal.default_int_handler):  # an ignored signal stays ignored
            before[signum] = handler
            signal.signal(signum, _raise_interrupted)

    def restore() -> None:  # for callers of main() inside a longer-lived process
        for signum, handler in before.items():
            signal.signal(signum, handler)

    return restore


def _report(exc: GitledgerError) -> int:
    from gitledger.cli.render import printable

    print(f"gitledger: {printable(exc.message)}", file=sys.stderr)
    return exc.exit_code


def _dispatch(args: list[str]) -> int:
    """A plain ``run-step`` without typer (:mod:`gitledger.cli.fastpath`), else the typer application."""
    from gitledger.cli.fastpath import try_run
    from gitledger.git.repo import lock_timeout

    try:
        lock_timeout(None)  # a bad GITLEDGER_LOCK_TIMEOUT is refused now, not at a lock taken mid-step
        code = try_run(args)
    except GitledgerError as exc:
        return _report(exc)
    if code is not None:
        return code

    import typer.main

    # importing the command modules registers their commands on the app
    from gitledger.cli import agent, audit, github, hooks, inspect, keys, mcp_help, meta, steps, sync  # noqa: F401
    from gitledger.cli.app import Invocation, app

    command = meta.readable(typer.main.get_command(app))
    if os.environ.get(meta.COMPLETE_VAR):
        meta.enable_completion()
    # like gh and git: bare 'gitledger' (or a bare group such as 'gitledger hooks') is help, exit 0
    group, rest = command, args
    while rest and rest[0] in meta.subcommands(group):
        group, rest = meta.subcommands(group)[rest[0]], rest[1:]
    if not rest and (group is command or meta.subcommands(group)):
        args = [*args, "--help"]
    try:
        result = command.main(
            args=args,
            prog_name="gitledger",
            complete_var=meta.COMPLETE_VAR,
            standalone_mode=False,
            obj=Invocation(tuple(args)),
        )
    except GitledgerError as exc:
        return _report(exc)
    except Exception as exc:
        # click's usage errors (vendored by typer) carry format_message() and exit_code.
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            hint = ""
            ctx = getattr(exc, "ctx", None)
            if ctx is not None:
                hint = f" (see '{ctx.command_path} --help')"
            print(f"gitledger: {exc.format_message()}{hint}", file=sys.stderr)
            return int(exc.exit_code) if exc.exit_code else EXIT_USAGE
        if type(exc).__name__ == "Abort":
            print("gitledger: aborted", file=sys.stderr)
            return EXIT_ERROR
        raise
    return result if isinstance(result, int) else 0
