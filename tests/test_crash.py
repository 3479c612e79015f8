"""SIGKILL at the dangerous moments, then rerun: nothing is duplicated, nothing is lost.

Effects are real and visible: a branch, a commit carrying the key's trailer, a file. Each effect
script also appends to a counter file outside the repository, so the test counts how often the effect
really ran.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from testing.repos import git, run_gitledger

# Each effect: (check spec, shell script). $COUNT is the counter file.
EFFECTS = {
    "branch": (
        "branch",
        'git branch "$GITLEDGER_BRANCH" && echo x >> "$COUNT"',
    ),
    "trailer": (
        "trailer",
        'git commit -q --allow-empty -m "agent work" -m "$GITLEDGER_TRAILER" && echo x >> "$COUNT"',
    ),
    "file": (
        "file:out/result.txt",
        'mkdir -p out && echo done > out/result.txt && echo x >> "$COUNT"',
    ),
}


def step(repo: Path, count: Path, check: str, script: str, env: dict[str, str] | None = None):
    return run_gitledger(
        "run-step",
        "-t",
        "T-7",
        "-s",
        "effect",
        "-c",
        check,
        "--json",
        "--",
        "sh",
        "-c",
        script,
        cwd=repo,
        env={"COUNT": str(count), **(env or {})},
    )


def effects(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


@pytest.mark.parametrize("kind", sorted(EFFECTS))
@pytest.mark.parametrize("fault", ["after-effect", "during-done"])
def test_killed_after_the_effect_reruns_as_already_existed(repo: Path, tmp_path: Path, kind: str, fault: str):
    count = tmp_path / "count"
    check, script = EFFECTS[kind]
    crashed = step(repo, count, check, script, {"GITLEDGER_FAULT": fault})
    assert crashed.returncode == -signal.SIGKILL
    assert effects(count) == 1
    rerun = step(repo, count, check, script)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["status"] == "already_existed"
    assert effects(count) == 1
    assert json.loads(step(repo, count, check, script).stdout)["status"] == "skipped"
    assert effects(count) == 1


@pytest.mark.parametrize("kind", sorted(EFFECTS))
def test_killed_together_by_an_outside_sigkill(repo: Path, tmp_path: Path, kind: str):
    """The command makes the effect, then SIGKILLs gitledger (its parent) before done is recorded."""
    count = tmp_path / "count"
    check, script = EFFECTS[kind]
    crashed = step(repo, count, check, script + ' && kill -KILL "$PPID" && sleep 5')
    assert crashed.returncode == -signal.SIGKILL
    assert effects(count) == 1
    rerun = step(repo, count, check, script)
    assert json.loads(rerun.stdout)["status"] == "already_existed", rerun.stderr
    assert effects(count) == 1


@pytest.mark.parametrize("kind", sorted(EFFECTS))
@pytest.mark.parametrize("fault", ["before-claim", "after-claim"])
def test_killed_before_the_effect_reruns_exactly_once(repo: Path, tmp_path: Path, kind: str, fault: str):
    count = tmp_path / "count"
    check, script = EFFECTS[kind]
    crashed = step(repo, count, check, script, {"GITLEDGER_FAULT": fault})
    assert crashed.returncode == -signal.SIGKILL
    assert effects(count) == 0
    rerun = step(repo, count, check, script)
    assert json.loads(rerun.stdout)["status"] == "created", rerun.stderr
    assert effects(count) == 1


def test_ledger_only_step_killed_is_unconfirmed_then_policies(repo: Path, tmp_path: Path):
    count = tmp_path / "count"
    script = 'echo x >> "$COUNT"'
    crashed = step(repo, count, "ledger", script, {"GITLEDGER_FAULT": "after-effect"})
    assert crashed.returncode == -signal.SIGKILL and effects(count) == 1
    rerun = step(repo, count, "ledger", script)
    assert rerun.returncode == 3 and json.loads(rerun.stdout)["status"] == "unconfirmed"
    assert effects(count) == 1
    key = json.loads(rerun.stdout)["key"]
    assert run_gitledger("resolve", key, "--done", "--ref", "checked-by-hand", cwd=repo).returncode == 0
    final = step(repo, count, "ledger", script)
    assert json.loads(final.stdout) == {"status": "skipped", "key": key, "ref": "checked-by-hand"}
    assert effects(count) == 1


def test_crash_leaves_the_history_auditable(repo: Path, tmp_path: Path):
    count = tmp_path / "count"
    check, script = EFFECTS["branch"]
    step(repo, count, check, script, {"GITLEDGER_FAULT": "after-effect"})
    step(repo, count, check, script)
    log = git("log", "--format=%s", "refs/notes/gitledger", cwd=repo).splitlines()
    assert [line.split()[1] for line in log] == ["done", "attempting"]
