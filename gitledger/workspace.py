"""Opens what a command works on: the repository, its ledger store and its configuration."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitledger import config as config_mod
from gitledger.checks import Check
from gitledger.checks.specs import CheckEnv, parse_checks
from gitledger.git import GitRepo
from gitledger.gitstore import GitStore


@dataclass
class Workspace:
    repo: GitRepo
    store: GitStore
    config: config_mod.Config
    cwd: Path
    github_repo: str | None = None  # --github-repo override
    _github: Any = None

    def github(self) -> Any:
        """The GitHub context (PyGithub client + repository), created on first use."""
        if self._github is None:
            from gitledger.github import GitHubContext

            self._github = GitHubContext.for_config(self.config, self.github_repo, self.repo)
        return self._github

    def checks(self, specs: list[str] | tuple[str, ...]) -> list[Check]:
        return parse_checks(list(specs), CheckEnv(self.repo, self.cwd, self.github))


@contextmanager
def open_workspace(path: str | Path | None = None, github_repo: str | None = None) -> Iterator[Workspace]:
    cwd = Path(path or ".").resolve()
    repo = GitRepo.discover(cwd)
    try:
        cfg = config_mod.load(repo.worktree)
        yield Workspace(repo, GitStore(repo, cfg.durability), cfg, cwd, github_repo)
    finally:
        repo.close()
