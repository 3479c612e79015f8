"""A comment GitHub answers with a 502 and applies a moment later is never posted twice.

The fake's ``late_effect`` fault answers the POST with 502 without performing it, then performs it
after a delay, as GitHub's backend sometimes does. Real processes (run-step + github comment) and the
Python API, against the local fake over HTTP.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testing.fakegithub import FakeGitHub, late_effect
from testing.repos import gitledger_argv, run_gitledger
from tests.github_support import REPO, clone, context, fast_env

COMMENTS = r"^/repos/acme/widgets/issues/\d+/comments$"


@pytest.fixture
def work(github: FakeGitHub, tmp_path: Path) -> Path:
    github.seed_prs(1)  # issue/PR #1 to comment on
    return clone(github, tmp_path / "work")


def step_argv(task: str, *extra: str, settle: str | None = None) -> list[str]:
    comment = [sys.executable, "-m", "gitledger", "github", "comment", "1", "-b", "hi"]
    if settle is not None:
        comment += ["--settle", settle]
    return [
        "run-step", "-t", task, "-s", "notify", "-c", "github-comment:1", "--github-repo", REPO,
        *extra, "--json", "--", *comment,
    ]  # fmt: skip


def counts(github: FakeGitHub) -> dict[str, int]:
    found: dict[str, int] = {}
    for comment in github.comments(1):
        body = comment["body"] or ""
        if "gitledger:" in body:
            key = body.split("gitledger:")[1].split()[0]
            found[key] = found.get(key, 0) + 1
    return found


def test_late_comments_are_found_not_posted_again(github: FakeGitHub, work: Path) -> None:
    keys = 4  # each waits out its own late comment (1.5 s): four show it is never posted twice
    github.inject("POST", COMMENTS, late_effect(1.5), times=keys)
    for n in range(keys):
        proc = run_gitledger(*step_argv(f"T-{n}"), cwd=work, env=fast_env(github))
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["status"] == "created"
        rerun = run_gitledger(*step_argv(f"T-{n}"), cwd=work, env=fast_env(github))
        assert json.loads(rerun.stdout)["status"] == "skipped", rerun.stderr
    time.sleep(2)
    assert counts(github) and set(counts(github).values()) == {1}, counts(github)
    assert len(counts(github)) == keys


def test_a_rerun_waits_out_the_window_of_a_failed_attempt(github: FakeGitHub, work: Path) -> None:
    """The command gives up before the comment lands (--settle 0.5, it lands after 2 s); the rerun at
    once waits the rest of run-step's window (3 s), then finds the comment instead of posting it."""
    github.inject("POST", COMMENTS, late_effect(2.0), times=1)
    first = run_gitledger(*step_argv("T-1", "--settle", "3", settle="0.5"), cwd=work, env=fast_env(github))
    assert first.returncode != 0 and "no definite answer" in first.stderr, first.stderr
    rerun = run_gitledger(*step_argv("T-1", "--settle", "3"), cwd=work, env=fast_env(github))
    result = json.loads(rerun.stdout)
    assert result["status"] == "already_existed", rerun.stderr
    assert any("settle" in w for w in result.get("warnings", []))
    assert list(counts(github).values()) == [1]


def test_killed_while_waiting_for_a_late_comment(github: FakeGitHub, work: Path) -> None:
    """SIGKILL while the command waits for a late comment: the rerun waits out the window from the
    claim's last sign of life before looking, so the late comment is found."""
    github.inject("POST", COMMENTS, late_effect(2.5), times=1)
    first = subprocess.Popen(
        gitledger_argv(*step_argv("T-1", "--settle", "5")),
        cwd=work,
        env={**os.environ, **fast_env(github)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    end = time.monotonic() + 30
    while not any(r.method == "POST" for r in github.requests) and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(0.2)
    first.send_signal(signal.SIGKILL)  # gitledger; its command dies with it
    first.wait()
    rerun = run_gitledger(*step_argv("T-1", "--settle", "5"), cwd=work, env=fast_env(github))
    assert json.loads(rerun.stdout)["status"] == "already_existed", rerun.stdout + rerun.stderr
    time.sleep(0.5)
    assert list(counts(github).values()) == [1]


def test_python_api_with_late_comments(
    github: FakeGitHub, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitledger.api import Ledger
    from gitledger.github.writes import post_comment

    for name, value in fast_env(github).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(work)
    keys = 6
    github.inject("POST", COMMENTS, late_effect(1.0), times=keys)
    ctx: Any = context(github)
    with Ledger.open(work, github_repo=REPO) as ledger:
        for n in range(keys):
            step = ledger.key(f"T-{n}", "notify")
            with ledger.step(f"T-{n}", "notify", checks=["github-comment:1"]) as s:
                if s.should_run:
                    outcome = post_comment(ctx, step, 1, "hi", settle=5)
                    s.done(ref=outcome.url)
            assert s.status in ("created", "already_existed")
    ctx.close()
    time.sleep(1.5)
    assert set(counts(github).values()) == {1} and len(counts(github)) == keys
