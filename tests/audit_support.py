"""Helpers for the audit tests: PRs with gitledger evidence in the fake GitHub, and the audit command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitledger.core.keys import StepKey, label_for
from testing.fakegithub import FakeGitHub
from testing.repos import git, run_gitledger
from tests.github_support import REPO, TOKEN, client, clone, fast_env

KEY_A = StepKey.derive("T-1", "open-pr").key
KEY_B = StepKey.derive("T-2", "open-pr").key
KEY_C = StepKey.derive("T-3", "open-pr").key


def make_pr(
    server: FakeGitHub,
    work: Path,
    branch: str,
    *,
    message: str | None = None,
    body: str = "",
    labels: tuple[str, ...] = (),
) -> int:
    """Commit on a new branch from origin/main, push it, open a PR through the API; return its number."""
    git("checkout", "-q", "-b", branch, "origin/main", cwd=work)
    name = branch.replace("/", "_")
    (work / f"{name}.txt").write_text(f"{branch}\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", message or f"change on {branch}", cwd=work)
    git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=work)
    git("checkout", "-q", "main", cwd=work)
    pr = client(server).get_repo(REPO).create_pull(base="main", head=branch, title=f"PR {branch}", body=body)
    if labels:
        pr.add_to_labels(*labels)
    return int(pr.number)


def audit(
    server: FakeGitHub, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    proc = run_gitledger(
        "audit", "--github-repo", REPO, "--json", *args, cwd=cwd, env={**fast_env(server), **(env or {})}
    )
    assert proc.stdout.strip(), f"rc={proc.returncode} stderr={proc.stderr}"
    assert TOKEN not in proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def by_key(report: dict[str, Any]) -> dict[str | None, dict[str, Any]]:
    return {group["key"]: group for group in report["duplicates"]}


def numbers(group: dict[str, Any]) -> list[int]:
    return [pr["number"] for pr in group["prs"]]


def prepare_work(github: FakeGitHub, path: Path) -> Path:
    """A clone of the fake's repository whose main (with one new commit) is pushed and fetched."""
    repo = clone(github, path)
    git("push", "-q", "origin", "main", cwd=repo)
    git("fetch", "-q", "origin", cwd=repo)
    return repo


def make_scenario(github: FakeGitHub, work: Path) -> dict[str, list[int]]:
    """3 PRs linked by KEY_A's label only, 2 by KEY_B's trailer only, 1 unrelated."""
    label = label_for(KEY_A)
    a = [make_pr(github, work, f"agent/a{i}", labels=(label,)) for i in range(3)]
    trailer = f"Fix the thing\n\nLonger text.\n\nGitledger-Key: {KEY_B}\n"
    b = [make_pr(github, work, f"fix/b{i}", message=trailer) for i in range(2)]
    other = [make_pr(github, work, "unrelated", body="nothing to see")]
    return {"a": a, "b": b, "other": other}
