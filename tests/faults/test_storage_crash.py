"""SIGKILL at every point of a journal append and of a fold: no event lost, none applied twice.

Each case records steps through the real CLI (a ``file:`` check, so a rerun can ask reality), kills a
process at the storage crash point (``GITLEDGER_FAULT``), then audits the repository with git plumbing
and the journal's documented format only (tests/faults/audit.py), reruns, and audits again.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from gitledger.core.crashpoints import STORAGE_POINTS
from testing.repos import git, init_repo, run_gitledger, run_json
from tests.faults.audit import audit


def step(repo: Path, name: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    marker = repo / f"made-{name}"
    proc = run_gitledger(
        "run-step",
        "-t",
        "T",
        "-s",
        name,
        "--check",
        f"file:{marker.name}",
        "--json",
        "--",
        "sh",
        "-c",
        f"echo x >> count-{name}; touch {marker.name}",
        cwd=repo,
        env=env,
    )
    return proc.returncode, proc.stderr


def effects(repo: Path, name: str) -> int:
    path = repo / f"count-{name}"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("point", [p for p in STORAGE_POINTS if p != "journal-torn"])
@pytest.mark.parametrize("how", ["flush", "append"])
def test_a_fold_killed_at_any_point_loses_nothing_and_doubles_nothing(
    tmp_path: Path, point: str, how: str
) -> None:
    repo = init_repo(tmp_path / "r")
    for name in ("a", "b"):  # two keys in the journal; the fold below also writes their intents
        assert step(repo, name)[0] == 0
    before = audit(repo)
    before.assert_clean()
    assert len(before.events) == 4 and before.journal_events == 4
    if how == "flush":
        killed = run_gitledger("flush", cwd=repo, env={"GITLEDGER_FAULT": point})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    else:  # the fold a writer runs when the journal is full, killed inside its claim's append
        code, err = step(repo, "c", {"GITLEDGER_FAULT": point, "GITLEDGER_FOLD_EVENTS": "5"})
        assert code == -signal.SIGKILL, err
        assert effects(repo, "c") == 0
    mid = audit(repo)
    mid.assert_clean()  # no ref at a missing object (fsck), nothing twice, nothing lost
    assert before.ids <= mid.ids
    states = {e["key"].split(".")[1]: e["state"] for e in run_json("list", cwd=repo)}
    assert states["a"] == states["b"] == "done"
    # the rerun completes what was interrupted, then everything is folded and read back by git
    assert step(repo, "c")[0] == 0
    assert run_gitledger("flush", cwd=repo).returncode == 0
    final = audit(repo)
    final.assert_clean()
    assert final.journal_events == 0 and mid.ids <= final.ids
    assert {n: effects(repo, n) for n in "abc"} == {"a": 1, "b": 1, "c": 1}
    listed = run_json("list", cwd=repo)
    assert sorted(e["state"] for e in listed) == ["done"] * 3
    assert not any(p.name.endswith(".keep") for p in (repo / ".git/objects/pack").iterdir())
    # a rotation killed before its rename leaves JOURNAL.<pid>.tmp; the next fold removes it
    assert not list((repo / ".git").glob("gitledger.journal.*.tmp"))


def test_a_torn_journal_tail_is_reported_and_never_read_as_an_event(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    assert step(repo, "a")[0] == 0
    code, err = step(repo, "b", {"GITLEDGER_FAULT": "journal-torn"})
    assert code == -signal.SIGKILL, err
    journal = repo / ".git" / "gitledger.journal"
    assert not journal.read_bytes().partition(b"\0")[0].endswith(b"\n")  # half a line
    # lock-free readers skip it; it is neither an entry nor an error
    assert [e["key"].split(".")[1] for e in run_json("list", cwd=repo)] == ["a"]
    code, err = step(repo, "b")  # the next writer cuts it off, says so, and the step runs once
    assert code == 0 and "torn write" in err
    assert journal.read_bytes().partition(b"\0")[0].endswith(b"\n")
    assert (repo / ".git" / "gitledger.journal.torn").exists()
    assert effects(repo, "b") == 1
    final = audit(repo)
    final.assert_clean()
    assert len(final.events) == 4
    assert git("fsck", "--no-progress", cwd=repo) == ""


def test_a_record_a_power_cut_left_behind_zeros_is_taken_back_and_the_step_runs_once(tmp_path: Path) -> None:
    """A power cut can keep the blocks of a later, unsynced journal record without those of an earlier
    one: zeros, then a whole record nobody was told about (here another process's claim of b). The
    next process finds it behind the zeros and takes it back under the exclusive lock before it reads
    (an attempt whose owner is gone: it cannot tell it from a confirmed record behind a damaged
    block), asks reality, and the step runs once."""
    other = init_repo(tmp_path / "other")
    assert step(other, "b")[0] == 0
    journal = other / ".git" / "gitledger.journal"
    unsynced = journal.read_bytes().partition(b"\0")[0].splitlines(keepends=True)[0]  # b's claim
    repo = init_repo(tmp_path / "r")
    assert step(repo, "a")[0] == 0
    journal = repo / ".git" / "gitledger.journal"
    lines = journal.read_bytes().partition(b"\0")[0]
    with journal.open("r+b") as fh:
        fh.seek(len(lines) + 16)
        fh.write(unsynced)
    code, err = step(repo, "b")
    assert code == 0 and "they are read again" in err, err
    assert not (repo / ".git" / "gitledger.journal.torn").exists()
    assert effects(repo, "b") == 1
    final = audit(repo)
    final.assert_clean()
    assert len(final.events) == 5  # a: claim, done; b: the claim taken back, a new claim, done
    assert [e["state"] for e in run_json("list", cwd=repo)] == ["done", "done"]
