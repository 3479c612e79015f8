"""Sharing the ledger through a git remote: sync, and setting a remote up for it."""

from __future__ import annotations

from collections.abc import Callable

from gitledger.git.sync import SyncReport
from gitledger.session import Session


def sync(
    session: Session, remote: str | None, progress: Callable[[str], None] | None = None
) -> tuple[str, SyncReport]:
    """Fetch, merge and push the ledger; returns the remote's name and what happened. ``progress`` is
    told each phase as it starts."""
    from gitledger.git.sync import LedgerSync, default_remote

    repo, store = session.git()
    name = default_remote(repo, remote or session.config.remote)
    return name, LedgerSync(store, name).sync(progress=progress)


def flush(session: Session) -> int:
    """Fold the ledger's journal into the notes now; returns the number of events folded."""
    _, store = session.git()
    return store.flush()


def init(session: Session, remote: str | None, *, undo: bool, dry_run: bool) -> tuple[str, list[str]]:
    """Configure (or with ``undo`` unconfigure) a remote for the ledger; returns its name and the changes."""
    from gitledger.git.sync import default_remote, init_remote

    repo, _ = session.git()
    name = default_remote(repo, remote or session.config.remote)
    return name, init_remote(repo, name, undo=undo, dry_run=dry_run)


__all__ = ["flush", "init", "sync"]
