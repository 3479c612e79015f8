"""The process-free remote URL reader gives git's own answer or none at all.

Every configuration below is written into a real repository (and a global configuration file), then
``gitconfig.remote_url`` is compared with ``git remote get-url``: either the same URL (or both "no
such remote"), or UNKNOWN — never a different answer. The common layouts must be answered without git.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitledger.git import gitconfig
from gitledger.git.repo import GitRepo

PLAIN = '[core]\n\tbare = false\n[remote "origin"]\n\turl = https://github.com/acme/widgets.git\n'
CASES: dict[str, tuple[str, str, bool]] = {
    # name: (repository config addition, global config, must be answered without git)
    "plain": (PLAIN, "", True),
    "ssh scp-like": ('[remote "origin"]\n\turl = git@github.com:acme/widgets.git\n', "", True),
    "spaces and comments": (
        '# a comment\n[remote "origin"]  ; trailing\n  URL=https://h/o/r.git  # note\n',
        "",
        True,
    ),
    "two urls": ('[remote "origin"]\n\turl = https://a/o/r\n\turl = https://b/o/r\n', "", True),
    "no such remote": ('[remote "upstream"]\n\turl = https://h/o/r\n', "", True),
    "other remote first": (
        '[remote "upstream"]\n\turl = https://u/o/r\n[remote "origin"]\n\turl = https://h/o/r\n',
        "",
        True,
    ),
    "case of subsection": ('[remote "Origin"]\n\turl = https://h/o/r\n', "", True),
    # git counts a remote only when the repository's own configuration names it
    "global url": ("", '[remote "origin"]\n\turl = https://global/o/r\n', False),
    "global and repo url": (PLAIN, '[remote "origin"]\n\turl = https://global/o/r\n', False),
    "insteadOf in global": (
        PLAIN,
        '[url "https://mirror.example/"]\n\tinsteadOf = https://github.com/\n',
        False,
    ),
    "insteadOf in repo": (PLAIN + '[url "ssh://git@h/"]\n\tinsteadOf = https://github.com/\n', "", False),
    "include": (PLAIN, "[include]\n\tpath = /nonexistent/cfg\n", False),
    "quoted url": ('[remote "origin"]\n\turl = "https://h/o/r x"\n', "", False),
    "escaped": ('[remote "origin"]\n\turl = https://h/o/r\\t.git\n', "", False),
    "entry on the header line": ('[remote "origin"] url = https://h/o/r\n', "", False),
    "section name in capitals": ('[REMOTE "origin"]\n\tUrl = https://h/o/r\n', "", True),
    "old section form": ("[remote.origin]\n\turl = https://old/o/r\n", "", False),
    "empty url resets": (
        '[remote "origin"]\n\turl = https://h/o/r\n\turl =\n\turl = https://x/o/r\n',
        "",
        False,
    ),
}


def git_answer(repo: Path, env: dict[str, str]) -> str | None:
    proc = subprocess.run(
        ["git", "remote", "get-url", "origin"], cwd=repo, capture_output=True, text=True, env=env
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_answer_as_git_or_none(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local, global_text, fast = CASES[name]
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(global_text)
    for key in ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + local)
    expected = git_answer(repo, dict(os.environ))
    with GitRepo.discover(repo) as git:
        answer = gitconfig.remote_url("origin", git.git_dir, git.common_dir)
        assert answer is gitconfig.UNKNOWN or answer == expected, (answer, expected)
        assert (answer is not gitconfig.UNKNOWN) == fast
        assert git.remote_url("origin") == expected  # the repository's answer is git's, either way


def test_environment_configuration_is_left_to_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "https://h/o/r"], check=True)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "url.https://mirror/.insteadOf")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://h/")
    with GitRepo.discover(repo) as git:
        assert gitconfig.remote_url("origin", git.git_dir, git.common_dir) is gitconfig.UNKNOWN
        assert git.remote_url("origin") == "https://mirror/o/r"


def test_worktree_reads_the_common_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"],
        check=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "a",
            "GIT_AUTHOR_EMAIL": "a@b",
            "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@b",
        },
    )
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "https://h/o/r"], check=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
    with GitRepo.discover(tmp_path / "wt") as git:
        assert gitconfig.remote_url("origin", git.git_dir, git.common_dir) == "https://h/o/r"
