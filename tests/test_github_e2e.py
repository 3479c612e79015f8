"""End to end: ``gitledger run-step --check github-pr -- gitledger github open-pr`` as real processes.

Real PyGithub over HTTP against the local fake GitHub, real pushes to its bare repository, crashes by
SIGKILL (GITLEDGER_FAULT) and lost HTTP answers (the fake performs the create, then drops the connection).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testing.fakegithub import FakeGitHub, drop_after_effect, rate_limit, status
from testing.repos import git, run_gitledger
from tests.github_support import REPO, TOKEN, clone, fast_env, open_pr

PULLS = r"^/repos/acme/widgets/pulls$"
GITLEDGER = [sys.executable, "-m", "gitledger"]


def open_pr_command(*extra: str) -> list[str]:
    return [*GITLEDGER, "github", "open-pr", "--github-repo", REPO, "--title", "Fix", "-b", "Body", *extra]


def run_step(
    server: FakeGitHub,
    repo: Path,
    command: list[str],
    *,
    step: str = "open-pr",
    check: str = "github-pr",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return run_gitledger(
        "run-step",
        "-t",
        "T-42",
        "-s",
        step,
        "-c",
        check,
        "--github-repo",
        REPO,
        "--json",
        "--",
        *command,
        cwd=repo,
        env={**fast_env(server), **(env or {})},
    )


def result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.stdout.strip(), f"rc={proc.returncode} stderr={proc.stderr}"
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def events(repo: Path, key: str) -> list[dict[str, Any]]:
    proc = run_gitledger("show", key, "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    found: list[dict[str, Any]] = json.loads(proc.stdout)["events"]
    return found


def ledger_key(repo: Path, step: str = "open-pr") -> str:
    proc = run_gitledger("key", "-t", "T-42", "-s", step, "--json", cwd=repo)
    return str(json.loads(proc.stdout)["key"])


@pytest.fixture
def work(github: FakeGitHub, tmp_path: Path) -> Path:
    return clone(github, tmp_path / "work")


def test_created_then_skipped(github: FakeGitHub, work: Path) -> None:
    first = result(run_step(github, work, open_pr_command()))
    [pr] = github.pulls()
    assert first["status"] == "created" and first["ref"] == f"{github.url}/{REPO}/pull/{pr['number']}"
    github.reset_requests()
    second = run_step(github, work, open_pr_command())
    assert second.returncode == 0 and result(second) == {**first, "status": "skipped"}
    assert github.requests == []  # a done step asks nobody
    assert len(github.pulls()) == 1


def test_run_steps_github_repo_reaches_the_command(github: FakeGitHub, work: Path) -> None:
    bare = [*GITLEDGER, "github", "open-pr", "--title", "Fix", "-b", "Body"]  # no --github-repo of its own
    first = result(run_step(github, work, bare))
    assert first["status"] == "created" and len(github.pulls()) == 1


def test_killed_after_the_pr_was_created_reruns_as_already_existed(github: FakeGitHub, work: Path) -> None:
    crashed = run_step(github, work, open_pr_command(), env={"GITLEDGER_FAULT": "after-effect"})
    assert crashed.returncode == -9
    [pr] = github.pulls()
    rerun = run_step(github, work, open_pr_command())
    data = result(rerun)
    assert rerun.returncode == 0 and data["status"] == "already_existed"
    assert data["ref"] == f"{github.url}/{REPO}/pull/{pr['number']}"
    assert len(github.pulls()) == 1
    assert [e["state"] for e in events(work, data["key"])] == ["attempting", "done"]


def test_lost_create_answer_still_makes_exactly_one_pr(github: FakeGitHub, work: Path) -> None:
    github.inject("POST", PULLS, drop_after_effect(), times=1)
    proc = run_step(github, work, open_pr_command())
    data = result(proc)
    [pr] = github.pulls()
    assert proc.returncode == 0 and data["status"] == "created"
    assert data["ref"] == f"{github.url}/{REPO}/pull/{pr['number']}"
    assert github.count_requests("POST", PULLS) == 1
    again = result(run_step(github, work, open_pr_command()))
    assert again["status"] == "skipped" and len(github.pulls()) == 1


@pytest.mark.parametrize("how", ["closed", "merged"])
def test_closed_or_merged_pr_is_not_recreated_from_a_fresh_clone(
    github: FakeGitHub, work: Path, tmp_path: Path, how: str
) -> None:
    first = result(run_step(github, work, open_pr_command()))
    [pr] = github.pulls()
    if how == "merged":
        github.merge_pr(pr["number"])
    else:
        from tests.github_support import client

        client(github).get_repo(REPO).get_pull(pr["number"]).edit(state="closed")
    fresh = clone(github, tmp_path / "fresh")  # no ledger at all
    data = result(run_step(github, fresh, open_pr_command()))
    assert data["status"] == "already_existed" and data["ref"] == first["ref"]
    assert len(github.pulls()) == 1


def test_pr_of_another_key_does_not_stop_this_one(github: FakeGitHub, work: Path) -> None:
    other = "<!-- gitledger:other.key.000000000000000000000000 -->"
    open_pr(github, work, "someone-elses-branch", body=other)
    data = result(run_step(github, work, open_pr_command()))
    assert data["status"] == "created" and len(github.pulls()) == 2


def test_rate_limit_then_success(github: FakeGitHub, work: Path) -> None:
    github.inject("GET", PULLS, rate_limit(1), times=1)
    data = result(run_step(github, work, open_pr_command()))
    assert data["status"] == "created" and len(github.pulls()) == 1


def test_5xx_storm_fails_fast_and_leaves_only_an_explanation(github: FakeGitHub, work: Path) -> None:
    github.inject("GET", PULLS, status(500), times=None)
    started = time.monotonic()
    proc = run_step(github, work, open_pr_command())
    assert time.monotonic() - started < 30
    assert proc.returncode == 1 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "HTTP 500" in proc.stderr
    assert "nothing was done" in proc.stderr
    assert github.pulls() == [] and github.count_requests("POST") == 0
    assert [e["state"] for e in events(work, ledger_key(work))] == ["info"]


def test_missing_token_is_one_clear_line(github: FakeGitHub, work: Path) -> None:
    env = fast_env(github)
    del env["GITHUB_TOKEN"]
    proc = run_gitledger(
        "run-step", "-t", "T-42", "-s", "open-pr", "-c", "github-pr", "--github-repo", REPO, "--", "true",
        cwd=work,
        env=env,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert "GITHUB_TOKEN" in line and "GH_TOKEN" in line
    assert github.requests == []
    assert git("for-each-ref", "refs/notes/gitledger", cwd=work) == ""


def test_token_never_reaches_output_or_the_ledger(github: FakeGitHub, work: Path) -> None:
    outputs = []
    github.inject("GET", PULLS, status(500, f"token {TOKEN} echoed by a proxy"), times=None)
    outputs.append(run_step(github, work, open_pr_command()))
    github.clear_faults()
    github.inject("POST", PULLS, status(502, f"bad gateway {TOKEN}"), times=2)
    outputs.append(run_step(github, work, open_pr_command()))  # the command fails: unknown, no PR
    outputs.append(run_step(github, work, open_pr_command()))  # retried: created
    outputs.append(run_gitledger("log", cwd=work))
    assert [p.returncode for p in outputs] == [1, 1, 0, 0]
    assert "rerun to try again" in outputs[1].stderr
    history = git("log", "-p", "refs/notes/gitledger", cwd=work)
    assert "HTTP 500" in history  # the explanation is recorded...
    for text in [history, *(p.stdout + p.stderr for p in outputs)]:
        assert TOKEN not in text  # ...without the token
    assert len(github.pulls()) == 1


def test_comment_step_survives_a_crash(github: FakeGitHub, work: Path) -> None:
    pr = open_pr(github, work, "to-comment")
    command = [*GITLEDGER, "github", "comment", str(pr.number), "--github-repo", REPO, "--body", "Done"]
    check = f"github-comment:{pr.number}"
    crash = {"GITLEDGER_FAULT": "after-effect"}
    crashed = run_step(github, work, command, step="notify", check=check, env=crash)
    assert crashed.returncode == -9 and len(github.comments(pr.number)) == 1
    data = result(run_step(github, work, command, step="notify", check=check))
    assert data["status"] == "already_existed" and data["ref"].endswith(
        f"#issuecomment-{github.comments(pr.number)[0]['id']}"
    )
    assert result(run_step(github, work, command, step="notify", check=check))["status"] == "skipped"
    assert len(github.comments(pr.number)) == 1


def test_open_pr_on_its_own(github: FakeGitHub, work: Path) -> None:
    env = fast_env(github)
    bare = run_gitledger(*open_pr_command()[3:], cwd=work, env=env)
    assert bare.returncode == 2 and "run-step" in bare.stderr and "--task" in bare.stderr
    first = run_gitledger(*open_pr_command("-t", "T-7", "-s", "pr", "--json")[3:], cwd=work, env=env)
    second = run_gitledger(*open_pr_command("-t", "T-7", "-s", "pr", "--json")[3:], cwd=work, env=env)
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert (one["status"], two["status"], two["found_by"]) == ("created", "existing", "head")
    assert one["url"] == two["url"]
    assert (one["api_calls"]["total"], one["api_calls"]["writes"], two["api_calls"]["total"]) == (8, 3, 1)
    assert len(github.pulls()) == 1
