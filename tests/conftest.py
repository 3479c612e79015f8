"""Test isolation: a pinned git identity, no user or system git config, this checkout on PYTHONPATH."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.fakegithub import FakeGitHub
from testing.repos import ROOT, init_repo

_HOME = Path(tempfile.mkdtemp(prefix="gitledger-test-home-"))
(_HOME / ".gitconfig").write_text(
    "[user]\n\tname = Test Agent\n\temail = agent@example.invalid\n"
    '[init]\n\tdefaultBranch = main\n[protocol "file"]\n\tallow = always\n'
)
os.environ.update(
    {
        "HOME": str(_HOME),
        "GIT_CONFIG_GLOBAL": str(_HOME / ".gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
)
# PYTHONDONTWRITEBYTECODE (some machines set it) would make every gitledger process the suite starts
# compile the package from source again: ~45 ms each in a fresh clone, thousands of processes
for _var in (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_API_URL",
    "GITHUB_STEP_SUMMARY",
    "GITLEDGER_KEY",
    "PYTHONDONTWRITEBYTECODE",
):
    os.environ.pop(_var, None)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh non-bare repository with one commit on main."""
    return init_repo(tmp_path / "repo")


@pytest.fixture
def empty_repo(tmp_path: Path) -> Path:
    """A fresh repository with no commits."""
    return init_repo(tmp_path / "empty", commit=False)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    """A started local fake GitHub (testing/fakegithub/) accepting token ``"test-token"``, with repository
    ``"acme/widgets"`` backed by an empty bare git repository (``server.bare_path("acme/widgets")``).

    ``server.token`` / ``server.repo_name`` / ``server.url`` give the rest; build a PyGithub client with
    ``Github(auth=Auth.Token(server.token), **server.pygithub_kwargs())``.  Fails the test if the fake hit an
    internal error (a bug in the fake, not in the code under test).
    """
    server = FakeGitHub(tokens=["test-token"])
    server.add_repo("acme/widgets")
    server.start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.errors, "fake GitHub internal errors:\n" + "\n".join(server.errors)
