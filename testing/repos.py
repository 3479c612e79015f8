"""Shared helpers for tests: real git, real processes, no mocks of git."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def git(*args: str, cwd: Path | str, check: bool = True, input: str | None = None) -> str:
    """Run the real git binary; return stdout stripped."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout.strip()


def gitledger_argv(*args: str) -> list[str]:
    """argv that runs this checkout's gitledger in a fresh interpreter."""
    return [sys.executable, "-m", "gitledger", *args]


def run_gitledger(
    *args: str,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        gitledger_argv(*args),
        cwd=cwd,
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        timeout=timeout,
        check=False,
    )


def run_json(*args: str, cwd: Path | str, env: Mapping[str, str] | None = None) -> Any:
    argv = list(args)
    argv.insert(argv.index("--") if "--" in argv else len(argv), "--json")
    proc = run_gitledger(*argv, cwd=cwd, env=env)
    assert proc.stdout.strip(), f"no JSON on stdout; rc={proc.returncode} stderr={proc.stderr}"
    return json.loads(proc.stdout)


def init_repo(path: Path, *, commit: bool = True, bare: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", *(["--bare"] if bare else []), "-b", "main", str(path), cwd=path)
    if commit and not bare:
        (path / "README").write_text("hello\n")
        git("add", "README", cwd=path)
        git("commit", "-q", "-m", "initial", cwd=path)
    return path


@contextlib.contextmanager
def ledger_lock_held(repo: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the ledger lock (and with it every key's lock) of ``repo`` meanwhile."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from gitledger.git.repo import GitRepo\n"
            "with GitRepo.discover(sys.argv[1]).lock():\n    print('held', flush=True); time.sleep(60)",
            str(repo),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def tmpfs_works(where: Path) -> bool:
    """Whether a small tmpfs can be mounted at ``where`` in a mount namespace of its own (``unshare -m``:
    root, or a user namespace that allows it): the way a test fills a disk for real."""
    import shlex
    import shutil

    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    probe = ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(str(where))}"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0
