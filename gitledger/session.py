"""The composition root: the one place that wires concrete adapters together.

A :class:`Session` holds what a command, the fast skip, the Python API, the audit or a hook works on —
the repository, its ledger store and its configuration — and binds check specs and the GitHub client
to them on demand. Nothing else in gitledger constructs a :class:`~gitledger.git.store.GitStore`, a
check from a spec string, or a GitHub client; features receive a session and ask it.

Heavy adapters load lazily: a step that is already done never imports PyGithub, and nothing here
imports typer.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gitledger import config as config_mod
from gitledger.core.checks import Check, LedgerCheck, validate_spec
from gitledger.core.errors import UsageError
from gitledger.core.keys import StepKey
from gitledger.core.policy import StepPolicy, merge_policy
from gitledger.core.store import Store

if TYPE_CHECKING:
    from gitledger.git.repo import GitRepo
    from gitledger.git.store import GitStore
    from gitledger.github.client import GitHubContext


@dataclass
class Session:
    """A repository (or none, for a store of the caller's own), its store, configuration and clients."""

    store: Store
    config: config_mod.Config = field(default_factory=config_mod.Config)
    repo: GitRepo | None = None
    cwd: Path = field(default_factory=Path.cwd)
    github_repo: str | None = None  # an override such as --github-repo
    env: Mapping[str, str] | None = None  # where the GitHub token and API URL come from (default: os.environ)
    _github: GitHubContext | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, github_repo: str | None = None) -> Session:
        """The session of the git repository containing ``path`` (default: the current directory)."""
        from gitledger.git.repo import GitRepo

        return cls._of(GitRepo.discover(path), path, github_repo)

    @classmethod
    def _of(cls, repo: GitRepo, path: str | os.PathLike[str] | None, github_repo: str | None) -> Session:
        from gitledger.git.store import GitStore

        try:
            cwd = Path(path or ".").resolve()
            cfg = config_mod.load(repo.worktree)
            return cls(GitStore(repo, cfg.durability), cfg, repo, cwd, github_repo)
        except BaseException:
            repo.close()
            raise

    @classmethod
    def discover(
        cls,
        path: str | os.PathLike[str] | None = None,
        github_repo: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Session:
        """Like :meth:`open`, but outside a git repository (and with no ``path``) a session with no
        repository, the default configuration and an empty in-memory ledger: for commands that can
        work without one (audit on GitHub alone, key). A repository's bad .gitledger.yml is an error."""
        from gitledger.core.store import MemoryStore
        from gitledger.git.repo import GitRepo

        try:
            repo = GitRepo.discover(path)
        except (UsageError, OSError):
            if path is not None:
                raise
            return cls(MemoryStore(), github_repo=github_repo, env=env)
        session = cls._of(repo, path, github_repo)
        session.env = env
        return session

    def close(self) -> None:
        """Stop the GitHub client, the store and the git reader processes (idempotent)."""
        self.close_github()
        self.store.close()
        if self.repo is not None:
            self.repo.close()

    def close_github(self) -> None:
        """Stop the GitHub client, if one was made; the next :meth:`github` makes a new one."""
        with self._lock:
            github, self._github = self._github, None
        if github is not None:
            github.close()

    def git(self) -> tuple[GitRepo, GitStore]:
        """The repository and its git store, for what only git can do (sync, remote claims)."""
        from gitledger.git.store import GitStore

        if self.repo is None or not isinstance(self.store, GitStore):
            raise UsageError(
                "this needs the ledger of a git repository; run it inside one (or pass its path)"
            )
        return self.repo, self.store

    # -- GitHub ------------------------------------------------------------------------------------

    def github(self) -> GitHubContext:
        """The GitHub client for this repository, made on first use (PyGithub is imported only then).

        The repository is ``github_repo`` (an override such as --github-repo), else ``github.repo`` of
        .gitledger.yml, else the origin remote; ``github.api_url`` when set; the token from the
        environment.
        """
        with self._lock:
            if self._github is None:
                from gitledger.github.client import GitHubContext

                self._github = GitHubContext.from_settings(
                    repo=self.github_repo or self.config.github_repo,
                    api_url=self.config.github_api_url,
                    git_repo=self.repo,
                    env=self.env,
                )
            return self._github

    # -- checks and policies -----------------------------------------------------------------------

    def check(self, spec: str) -> Check:
        """Bind a check spec (``branch:origin``, ``file:PATH``, ``github-pr``, ...) to this session."""
        reason = validate_spec(spec)
        if reason is not None:
            raise UsageError(reason)
        name, _, arg = spec.partition(":")
        if name == "ledger":
            return LedgerCheck()
        base = self.repo.worktree or self.cwd if self.repo is not None else self.cwd
        if name in ("file", "cmd"):
            # imported here: a ledger-only step (the default, and every fast skip of one) never needs them
            from gitledger.local.checks import CommandCheck, FileCheck

            return FileCheck(arg, base) if name == "file" else CommandCheck(arg, base)
        if self.repo is None:
            raise UsageError(f"check {spec!r} needs a git repository; run it inside one (or pass its path)")
        if name == "branch":
            from gitledger.git.checks import BranchCheck

            return BranchCheck(self.repo, arg or None)
        if name == "trailer":
            from gitledger.git.checks import TrailerCheck

            return TrailerCheck(self.repo)
        return LazyCheck(spec, lambda: self._github_check(name, arg))

    def checks(self, specs: Sequence[str]) -> list[Check]:
        """Bind check specs; no spec means the ``ledger`` check."""
        return [self.check(spec) for spec in specs] or [LedgerCheck()]

    def _github_check(self, name: str, arg: str) -> Check:
        from gitledger.github.checks import BranchCheck, CommentCheck, PullRequestCheck

        client = self.github()
        if name == "github-pr":
            return PullRequestCheck(client)
        if name == "github-branch":
            return BranchCheck(client)
        return CommentCheck(client, int(arg))

    def policy(
        self,
        step: str,
        on_unconfirmed: str | None = None,
        lease: float | None = None,
        settle: float | None = None,
    ) -> StepPolicy:
        """The step's policy: the given values, else the step's settings, else the repository's."""
        step_cfg = self.config.step(step)
        return merge_policy(
            on_unconfirmed,
            lease,
            (step_cfg.on_unconfirmed, step_cfg.lease),
            (self.config.on_unconfirmed, self.config.lease),
            (settle, step_cfg.settle, self.config.settle),
        )


@contextmanager
def open_session(
    path: str | os.PathLike[str] | None = None, github_repo: str | None = None
) -> Iterator[Session]:
    """:meth:`Session.open` as a context manager that closes the session."""
    session = Session.open(path, github_repo)
    try:
        yield session
    finally:
        session.close()


@dataclass
class LazyCheck:
    """A check built on first use, so a step that is already done never imports PyGithub."""

    spec: str
    build: Callable[[], Check]
    queries_reality: bool = True
    _check: Check | None = None

    def find(self, step: StepKey) -> str | None:
        if self._check is None:
            self._check = self.build()
        return self._check.find(step)


__all__ = ["LazyCheck", "Session", "open_session"]
