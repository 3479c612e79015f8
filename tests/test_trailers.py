"""Trailers of commit messages read as git reads them (gitledger.git.trailers), and the audit's API
fallback that uses them: the oracle is git itself on real commits with the same messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitledger.core.keys import StepKey
from gitledger.git.trailers import parse_trailers, trailer_values
from testing.fakegithub import FakeGitHub
from testing.repos import git, init_repo, run_gitledger
from tests.audit_support import make_pr, prepare_work
from tests.github_support import REPO, fast_env

K1 = StepKey.derive("T-1", "open-pr").key
K2 = StepKey.derive("T-2", "open-pr").key

MESSAGES = [
    f"Fix the parser\n\nGitledger-Key: {K1}\n",  # a plain trailer
    # a key in prose
    f"Fix the parser\n\nGitledger-Key: {K1} is what the last run used; see the log.\n\nMore prose.\n",
    f"Fix the parser\n\nSigned-off-by: A <a@example.invalid>\nGitledger-Key:\n  {K2}\n",  # folded
    f"Fix\n\nGitledger-Key: {K1}\n\nThe last paragraph is prose, so no trailers.\n",  # not the last paragraph
    # other case, and the line git adds to a cherry-pick
    f"Fix\n\nReviewed-by: B <b@x.invalid>\ngitledger-key: {K2}\n(cherry picked from commit {'a' * 9})\n",
    "No trailers at all",
    "",
]


def _git_reads(tmp_path: Path, messages: list[str]) -> list[list[str]]:
    """What git log's %(trailers) says about commits with these messages."""
    repo = init_repo(tmp_path / "oracle")
    found = []
    for message in messages:
        git(
            "commit",
            "-q",
            "--allow-empty",
            "--allow-empty-message",
            "--cleanup=verbatim",
            "-m",
            message,
            cwd=repo,
        )
        out = git(
            "log", "-1", "--format=%(trailers:key=Gitledger-Key,valueonly,unfold,separator=%x00)", cwd=repo
        )
        found.append([v.strip() for v in out.split("\x00") if v.strip()])
    return found


def test_trailers_are_read_as_git_reads_them(tmp_path: Path) -> None:
    values = trailer_values(MESSAGES, "Gitledger-Key")
    assert values == _git_reads(tmp_path, MESSAGES)
    assert values == [[K1], [], [K2], [], [K2], [], []]
    pairs = parse_trailers(MESSAGES[2:3])[0]
    assert pairs == [("Signed-off-by", "A <a@example.invalid>"), ("Gitledger-Key", K2)]


def test_a_batch_is_one_process_and_keeps_the_order(tmp_path: Path) -> None:
    many = [f"Step {n}\n\nGitledger-Key: {StepKey.derive(f'T-{n}', 's').key}\n" for n in range(1203)]
    values = trailer_values(many, "gitledger-key")
    assert values == [[StepKey.derive(f"T-{n}", "s").key] for n in range(1203)]
    assert trailer_values([], "Gitledger-Key") == []


def test_the_audit_api_fallback_uses_gits_reading(github: FakeGitHub, tmp_path: Path) -> None:
    """Through the API (--trailers api): a folded trailer links two PRs; a key in prose links nothing."""
    work = prepare_work(github, tmp_path / "work")
    folded = f"Fix\n\nGitledger-Key:\n  {K1}\n"
    prose = f"Fix\n\nGitledger-Key: {K2} was the old attempt.\n\nMore words.\n"
    a = make_pr(github, work, "fix/a", message=folded)
    b = make_pr(github, work, "fix/b", message=f"Fix again\n\nGitledger-Key: {K1}\n")
    make_pr(github, work, "fix/c", message=prose)
    make_pr(github, work, "fix/d", message=f"Also\n\nGitledger-Key: {K2} was the old attempt.\n\nWords.\n")
    proc = run_gitledger(
        "audit", "--github-repo", REPO, "--trailers", "api", "--json", cwd=work, env=fast_env(github)
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    groups = {g["key"]: sorted(p["number"] for p in g["prs"]) for g in report["duplicates"]}
    assert groups == {K1: sorted([a, b])}


@pytest.mark.parametrize("message", ["\udcff invalid utf-8 \udcfe", "x" * 200_000])
def test_odd_messages_do_not_break_the_batch(message: str) -> None:
    assert trailer_values([message, f"ok\n\nGitledger-Key: {K1}\n"], "Gitledger-Key") == [[], [K1]]
