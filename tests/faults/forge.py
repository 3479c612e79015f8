"""Write ledger events the way an attacker with push access to the ledger refs could: any content.

The ledger is plain git data; anyone who can push ``refs/notes/gitledger`` can write whatever lines
they like. These helpers use gitledger's own store only as a convenient writer of well-formed notes;
the tests then run the real ``gitledger`` CLI against the result.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gitledger.core.keys import StepKey
from gitledger.core.store import ANY_VERSION, Intent
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore

PAST = "2001-01-01T00:00:00.000Z"
FAR_FUTURE = "2999-01-01T00:00:00.000Z"


def foreign_owner(pid: int = 4242) -> dict[str, Any]:
    """An owner on another host: gitledger cannot see whether it runs, so only its lease counts."""
    return {"host": "attacker.invalid", "boot": "x", "pid": pid, "start": "1", "session": os.urandom(8).hex()}


def forge(repo: Path, step: StepKey, state: str, **fields: Any) -> None:
    """Append one event for ``step`` with the given state and fields, as a foreign owner."""
    event: dict[str, Any] = {
        "v": 1,
        "id": os.urandom(6).hex(),
        "at": "2020-01-01T00:00:00.000Z",
        "key": step.key,
        "task": step.task,
        "step": step.step,
        "state": state,
        "owner": foreign_owner(),
    }
    event.update(fields)
    with GitRepo.discover(repo) as git_repo:
        GitStore(git_repo).append(Intent.of(step), event, ANY_VERSION)
