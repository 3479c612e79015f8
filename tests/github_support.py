"""Helpers for the GitHub tests: a clone whose origin is the fake's bare repository, fast settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testing.fakegithub import FakeGitHub
from testing.repos import git, init_repo

REPO = "acme/widgets"
TOKEN = "test-token"


def fast_env(server: FakeGitHub, **overrides: str) -> dict[str, str]:
    """Environment for gitledger talking to the fake: tiny back-off, short budget, no write spacing."""
    env = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": server.url,
        "GITLEDGER_GITHUB_BACKOFF": "0.01",
        "GITLEDGER_GITHUB_MAX_WAIT": "5",
        "GITLEDGER_GITHUB_WRITE_INTERVAL": "0",
        "GITLEDGER_GITHUB_TIMEOUT": "5",
    }
    env.update(overrides)
    return env


def clone(server: FakeGitHub, path: Path, *, change: str = "change") -> Path:
    """A repository with origin = the fake's bare repo, main pushed there, and one new commit on top."""
    repo = init_repo(path)
    git("remote", "add", "origin", str(server.bare_path(REPO)), cwd=repo)
    if not git("ls-remote", "--heads", "origin", "main", cwd=repo):
        git("push", "-q", "origin", "main", cwd=repo)
    else:
        git("fetch", "-q", "origin", cwd=repo)
        git("reset", "-q", "--hard", "origin/main", cwd=repo)
    (repo / f"{change}.txt").write_text(f"{change}\n")
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", change, cwd=repo)
    return repo


def context(server: FakeGitHub, repo: str = REPO, **overrides: str) -> Any:
    """A real :class:`gitledger.github.client.GitHubContext` for the fake (PyGithub over HTTP)."""
    from gitledger.github.client import GitHubContext

    return GitHubContext.from_settings(repo=repo, env=fast_env(server, **overrides))


def client(server: FakeGitHub) -> Any:
    """A plain PyGithub client for arranging state (no retries, no throttling)."""
    from github import Auth, Github

    return Github(auth=Auth.Token(TOKEN), **server.pygithub_kwargs())


def push_branch(repo: Path, branch: str) -> None:
    git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=repo)


def open_pr(
    server: FakeGitHub, repo: Path, branch: str, *, body: str = "", labels: tuple[str, ...] = ()
) -> Any:
    """Push HEAD of ``repo`` to ``branch`` and open a PR for it through the API (not through gitledger)."""
    push_branch(repo, branch)
    pr = client(server).get_repo(REPO).create_pull(base="main", head=branch, title=f"PR {branch}", body=body)
    if labels:
        pr.add_to_labels(*labels)
    return pr
