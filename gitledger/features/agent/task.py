"""Task resolution for the agent guard: read the sources, let :mod:`gitledger.core.task` choose.

``resolve_task(cwd, explicit)``: the explicit task, else ``GITLEDGER_TASK``, else
``git config gitledger.task``, else the current branch under ``agent.task_branch`` of
``.gitledger.yml``. The agent's session id is never used. git is asked only when neither the caller
nor the environment names the task, and only through the git adapter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gitledger.core.task import ENV_VAR, GIT_CONFIG_KEY, TaskChoice, choose_task

if TYPE_CHECKING:
    from gitledger.git.repo import GitRepo


def current_branch(repo: GitRepo) -> str | None:
    """The branch HEAD points at, or None (detached HEAD, unborn repository without HEAD)."""
    proc = repo.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False, cwd=repo.worktree)
    name = proc.stdout.decode(errors="replace").strip()
    return name if proc.returncode == 0 and name else None


def resolve_task(
    cwd: str | os.PathLike[str] | None,
    explicit: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    repo: GitRepo | None = None,
    pattern: str | None = None,
) -> TaskChoice | None:
    """The task for a call made in ``cwd`` (see the module documentation), or None."""
    environ = os.environ if env is None else env
    quick = choose_task(explicit, environ.get(ENV_VAR), None, None, None)
    if quick is not None:
        return quick
    own = repo is None
    if repo is None:
        from gitledger.core.errors import GitledgerError
        from gitledger.git.repo import GitRepo

        try:
            repo = GitRepo.discover(Path(cwd or "."))
        except GitledgerError:
            return None
    try:
        proc = repo.run("config", "--get", GIT_CONFIG_KEY, check=False)
        configured = proc.stdout.decode(errors="replace").strip() if proc.returncode == 0 else None
        if pattern is None and not configured:
            from gitledger import config as config_mod

            pattern = config_mod.load(repo.worktree).agent.task_branch
        branch = current_branch(repo) if pattern and not configured else None
        return choose_task(None, None, configured, branch, pattern)
    finally:
        if own:
            repo.close()


__all__ = ["current_branch", "resolve_task"]
