"""Standalone mode: ``python -m testing.fakegithub --repo acme/widgets --token T``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import sys
import threading

from testing.fakegithub.server import FakeGitHub

# --------------------------------------------------------------------------------------------------------
# Standalone mode
# --------------------------------------------------------------------------------------------------------


def _stdin_is_pipe() -> bool:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _wait_for_stdin_eof(done: threading.Event) -> None:
    try:
        while os.read(sys.stdin.fileno(), 65536):
            pass
    except (OSError, ValueError):
        pass
    done.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testing.fakegithub",
        description="Serve a fake GitHub REST API until SIGTERM/SIGINT (or stdin EOF on a pipe).",
    )
    parser.add_argument("--repo", action="append", default=[], help="owner/name to create (repeatable)")
    parser.add_argument("--default-branch", default="main")
    parser.add_argument(
        "--token", action="append", default=[], help="accepted token (repeatable; none = no auth)"
    )
    parser.add_argument("--login", default="gitledger-bot", help="login of the authenticated user")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--root", help="directory for the bare repositories (default: a temporary directory)")
    parser.add_argument(
        "--stdin-eof",
        choices=("auto", "exit", "ignore"),
        default="auto",
        help="exit when stdin reaches EOF: auto = only when stdin is a pipe",
    )
    args = parser.parse_args(argv)
    server = FakeGitHub(tokens=args.token, login=args.login, host=args.host, port=args.port, root=args.root)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    try:
        repos = {name: str(server.add_repo(name, args.default_branch)) for name in args.repo}
        server.start()
        print(
            json.dumps({"url": server.url, "repos": repos, "tokens": args.token, "pid": os.getpid()}),
            flush=True,
        )
        if args.stdin_eof == "exit" or (args.stdin_eof == "auto" and _stdin_is_pipe()):
            threading.Thread(target=_wait_for_stdin_eof, args=(done,), daemon=True).start()
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
