"""The pre-push hook asks GitHub: a new branch for a key that already has a PR is refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gitledger.core.keys import StepKey
from gitledger.features.hooks.install import install
from testing.fakegithub import FakeGitHub
from testing.repos import git
from tests.github_support import clone, fast_env, open_pr

STEP = StepKey.derive("T-1", "open-pr")


def git_run(repo: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "GITLEDGER_KEY"} | env
    return subprocess.run(["git", *args], cwd=repo, env=full, capture_output=True, text=True, check=False)


def test_push_of_a_new_branch_for_a_key_with_a_pr_is_refused(github: FakeGitHub, tmp_path: Path) -> None:
    earlier = clone(github, tmp_path / "earlier", change="first-attempt")
    pr = open_pr(github, earlier, "agent-attempt-1", labels=(STEP.label,))

    work = clone(github, tmp_path / "work", change="second-attempt")
    (work / ".gitledger.yml").write_text("github:\n  repo: acme/widgets\n")
    install(work)
    env = fast_env(github)
    made = git_run(
        work, "commit", "-q", "--allow-empty", "-m", "retry", env={**env, "GITLEDGER_KEY": STEP.key}
    )
    assert made.returncode == 0, made.stderr
    assert STEP.trailer in git("log", "-1", "--format=%B", cwd=work)

    refused = git_run(work, "push", "origin", "HEAD:refs/heads/agent-attempt-2", env=env)
    assert refused.returncode != 0
    assert pr.html_url in refused.stderr and "GITLEDGER_ALLOW_DUPLICATE" in refused.stderr
    assert git("ls-remote", "--heads", "origin", "agent-attempt-2", cwd=work) == ""

    offline = {k: v for k, v in env.items() if k != "GITHUB_TOKEN"}
    allowed = git_run(work, "push", "origin", "HEAD:refs/heads/agent-attempt-2", env=offline)
    assert allowed.returncode == 0, allowed.stderr  # without a token the hook checks branches only


def test_override_lets_the_push_through(github: FakeGitHub, tmp_path: Path) -> None:
    earlier = clone(github, tmp_path / "earlier", change="first-attempt")
    open_pr(github, earlier, "agent-attempt-1", labels=(STEP.label,))
    work = clone(github, tmp_path / "work", change="second-attempt")
    (work / ".gitledger.yml").write_text("github:\n  repo: acme/widgets\n")
    install(work)
    env = fast_env(github)
    git_run(work, "commit", "-q", "--allow-empty", "-m", "retry", env={**env, "GITLEDGER_KEY": STEP.key})
    forced = git_run(
        work,
        "push",
        "origin",
        "HEAD:refs/heads/agent-attempt-2",
        env={**env, "GITLEDGER_ALLOW_DUPLICATE": "1"},
    )
    assert forced.returncode == 0, forced.stderr
