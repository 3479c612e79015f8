"""Opening what the proxy guards with: the repository's ledger, its config, the profile and the task."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gitledger.features.proxy.guard import ProxyGuard
from gitledger.features.proxy.profiles import resolve_profile


@dataclass(frozen=True)
class ProxyRequest:
    command: tuple[str, ...]  # the upstream MCP server and its arguments
    profile: str | None = None
    task: str | None = None  # --task; else GITLEDGER_TASK, git config gitledger.task, the branch
    repo: str | None = None  # the repository whose ledger records the calls (default: the cwd)


@contextmanager
def open_guard(request: ProxyRequest, builtin_dir: Path) -> Iterator[ProxyGuard]:
    """A :class:`ProxyGuard` on the repository's own ledger (``gitledger list/show/log`` see it)."""
    from gitledger.features.agent.task import resolve_task
    from gitledger.session import Session

    session = Session.open(request.repo)
    try:
        profile = resolve_profile(request.profile, builtin_dir, session.config)
        choice = resolve_task(session.cwd, request.task, repo=session.repo)
        yield ProxyGuard(session.store, profile, task=choice.task if choice else None, config=session.config)
    finally:
        session.close()
