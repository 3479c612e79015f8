"""Ref updates that git cannot fool: a fresh ``git update-ref --stdin`` per batch, verified.

A long-lived ``update-ref --stdin`` caches ``packed-refs`` and revalidates it by stat data; after two
``git pack-refs`` rewrites (same size, same second, a recycled inode) it accepted a compare-and-swap
against a stale old value (issue 16, 8a). So every batch starts a new process, and each ref is read
back after its transaction. Refs move one transaction each, in the given order (the intents ref
before the notes ref: a note is never reachable without its intent).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable

from gitledger.core import crashpoints as faults
from gitledger.core.errors import GitError, git_message
from gitledger.git.repo import GitRepo, git_env

STALE_REF_LOCK = 5.0  # seconds: an update-ref lock of a ledger ref older than this, under our lock, is stale


def update_refs_fresh(
    repo: GitRepo,
    updates: list[tuple[str, str, str | None]],
    read_ref: Callable[[str], str | None],
    fsync: str | None,
    fault: str,
    notice: Callable[[str], None],
) -> bool:
    """Move each ref in its own transaction, in order, through one *fresh* ``git update-ref --stdin``
    (it reads packed-refs anew), each verified by ``read_ref``. False when a ref was not at its
    expected old value (or did not end where it should). ``fsync``: a ``core.fsync`` value to run
    git with. Call with the ledger lock held: a ledger ref's ``.lock`` older than
    :data:`STALE_REF_LOCK` seconds is then left by a dead git process, and is removed (``notice``)."""
    args = ["git", f"--git-dir={repo.git_dir}"]
    if fsync:
        args += ["-c", f"core.fsync={fsync}"]
    # a reflog for each ledger ref, whatever core.logAllRefUpdates says (git keeps none for refs/gitledger/*
    # by default): a damaged ref is put back from it (the store's repair hint names its last good value)
    args += ["update-ref", "--create-reflog", "-m", "gitledger", "--stdin"]
    remaining = list(updates)
    for _ in range(4):
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=git_env(),
            start_new_session=True,  # a Ctrl-C of the terminal is not sent to it
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        moved_wrong = False
        try:
            while remaining:
                ref, new, old = remaining[0]
                # no-deref: a ledger ref made symbolic by hand is replaced, never written through to
                # the ref it names (a branch); its old value is still checked
                line = f"start\noption no-deref\nupdate {ref} {new} {old or repo.zero_oid}\nprepare\ncommit\n"
                proc.stdin.write(line.encode())
                proc.stdin.flush()
                answers = [proc.stdout.readline() for _ in range(3)]
                if answers != [b"start: ok\n", b"prepare: ok\n", b"commit: ok\n"]:
                    break
                if read_ref(ref) != new:  # accepted, yet not there: never trust it
                    moved_wrong = True
                    break
                remaining.pop(0)
                if remaining and fault:
                    faults.point(f"{fault}-intents")
        except (BrokenPipeError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            err_bytes = proc.stderr.read()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        if not remaining:
            return True
        if moved_wrong:
            return False  # the caller reads again and retries
        err = err_bytes.decode(errors="replace")
        lock = repo.common_dir / f"{remaining[0][0]}.lock"
        if "File exists" in err and lock.exists():
            try:
                age = time.time() - lock.stat().st_mtime
            except FileNotFoundError:
                continue
            if age > STALE_REF_LOCK:  # all gitledger writers hold our lock: left by a dead one
                notice(f"gitledger: removed {lock}, left by a git process that died {age:.0f} s ago")
                lock.unlink(missing_ok=True)
            else:
                time.sleep(0.05)
            continue
        if "but expected" in err or "reference already exists" in err or "cannot lock ref" in err:
            return False
        raise GitError(f"git update-ref {remaining[0][0]} failed: {git_message(err_bytes)}")
    return False
