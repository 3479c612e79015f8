"""The ledger inside git: real repositories of every shape, CAS, garbage collection, corruption."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitledger.errors import UsageError
from gitledger.git import GitRepo
from gitledger.gitstore import INTENTS_REF, NOTES_REF, GitStore
from gitledger.keys import StepKey
from gitledger.store import Intent
from tests.helpers import git, init_repo, run_gitledger, run_json

STEP = StepKey.derive("T-1", "push")


def record(path: Path, task: str = "T-1", step: str = "push") -> dict:
    return run_json("run-step", "-t", task, "-s", step, "--repo", str(path), "--", "true", cwd=path)


def test_events_append_and_cas(repo: Path):
    with GitRepo.discover(repo) as r:
        store = GitStore(r)
        intent = Intent.of(STEP)
        v1 = store.append(intent, {"state": "attempting", "key": STEP.key}, None)
        assert v1 is not None
        assert store.append(intent, {"state": "done", "key": STEP.key}, None) is None  # stale version
        v2 = store.append(intent, {"state": "done", "key": STEP.key, "outcome": "created"}, v1)
        entry = store.load(STEP.key)
        assert entry.version == v2 and entry.folded.state == "done"
        assert store.load(intent).version == v2


def test_people_can_read_the_ledger_with_git(repo: Path):
    assert record(repo)["status"] == "created"
    intent = git("ls-tree", "-r", "--format=%(objectname)", INTENTS_REF, cwd=repo)
    note = git("notes", "--ref=gitledger", "show", intent, cwd=repo)
    assert '"outcome":"created"' in note
    log = git("log", "--format=%s", NOTES_REF, cwd=repo)
    assert log.splitlines()[0].startswith("gitledger: done ") and "attempting" in log
    assert git("fsck", "--no-progress", "--strict", cwd=repo) == ""


def test_user_state_is_never_touched(repo: Path):
    (repo / "dirty.txt").write_text("uncommitted\n")
    git("add", "dirty.txt", cwd=repo)
    (repo / "README").write_text("changed\n")
    before = [git(*a, cwd=repo) for a in (["status", "--porcelain"], ["rev-parse", "HEAD"], ["branch"])]
    record(repo)
    after = [git(*a, cwd=repo) for a in (["status", "--porcelain"], ["rev-parse", "HEAD"], ["branch"])]
    assert before == after


def test_works_in_empty_repo_detached_head_worktree_and_bare(tmp_path: Path, repo: Path):
    empty = init_repo(tmp_path / "empty", commit=False)
    assert record(empty)["status"] == "created"
    git("checkout", "-q", "--detach", cwd=repo)
    assert record(repo)["status"] == "created"
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", "-b", "side", str(wt), cwd=repo)
    assert record(wt)["status"] == "skipped"  # worktrees share the ledger
    assert record(wt, step="other")["status"] == "created"
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", str(repo), str(bare), cwd=tmp_path)
    assert record(bare, step="third")["status"] == "created"
    assert record(bare, step="third")["status"] == "skipped"


def test_survives_gc_and_notes_prune(repo: Path):
    keys = [record(repo, task=f"T-{i}")["key"] for i in range(5)]
    git("gc", "--prune=now", "--aggressive", "-q", cwd=repo)
    git("notes", "--ref=gitledger", "prune", cwd=repo)
    git("gc", "--prune=now", "-q", cwd=repo)
    listed = run_json("list", cwd=repo)
    assert sorted(e["key"] for e in listed) == sorted(keys)
    assert all(e["state"] == "done" for e in listed)
    assert record(repo, task="T-0")["status"] == "skipped"
    assert record(repo, task="T-9")["status"] == "created"  # writes still work on packed objects


def test_corrupt_note_fails_that_key_only(repo: Path):
    bad = record(repo, task="bad")["key"]
    good = record(repo, task="good")["key"]
    with GitRepo.discover(repo) as r:
        store = GitStore(r)
        intent = store.intent(bad)
        assert intent is not None
        store.append(intent, {"state": "done"}, "*")  # valid, then break the blob by hand below
    intent_oid = git("notes", "--ref=gitledger", "list", cwd=repo).splitlines()
    target = next(
        line.split()[1]
        for line in intent_oid
        if bad.split(".")[0] in git("notes", "--ref=gitledger", "show", line.split()[1], cwd=repo)
    )
    git("notes", "--ref=gitledger", "append", "-m", "{broken json", target, cwd=repo)
    proc = run_gitledger("run-step", "-t", "bad", "-s", "push", "--", "true", cwd=repo)
    assert proc.returncode == 1 and "corrupt" in proc.stderr and proc.stderr.count("\n") == 1
    assert run_json("run-step", "-t", "good", "-s", "push", "--", "true", cwd=repo)["status"] == "skipped"
    states = {e["key"]: e["state"] for e in run_json("list", cwd=repo)}
    assert states == {bad: "corrupt", good: "done"}
    shown = run_json("show", bad, cwd=repo)
    assert shown["corrupt_lines"] and "broken" in shown["corrupt_lines"][0]["text"]
    assert run_gitledger("resolve", bad, "--forget", cwd=repo).returncode == 0
    assert run_json("run-step", "-t", "bad", "-s", "push", "--", "true", cwd=repo)["status"] == "created"


def test_ledger_ref_pointing_at_a_blob_is_a_clear_error(repo: Path):
    record(repo)
    blob = git("hash-object", "-w", "--stdin", cwd=repo, input="junk")
    git("update-ref", NOTES_REF, blob, cwd=repo)
    proc = run_gitledger("list", cwd=repo)
    assert proc.returncode == 1 and "not a commit" in proc.stderr and proc.stderr.count("\n") == 1


def test_not_a_repository(tmp_path: Path):
    with pytest.raises(UsageError, match="not inside a git repository"):
        GitRepo.discover(tmp_path)
    proc = run_gitledger("run-step", "-t", "a", "-s", "b", "--", "true", cwd=tmp_path)
    assert proc.returncode == 2 and "not inside a git repository" in proc.stderr


def test_no_cat_file_processes_leak(repo: Path):
    import os

    def children() -> int:
        return len([p for p in os.listdir("/proc") if p.isdigit() and _is_child(int(p))])

    def _is_child(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return int(fh.read().rsplit(")", 1)[1].split()[1]) == os.getpid()
        except OSError:
            return False

    base = children()
    for _ in range(20):
        with GitRepo.discover(repo) as r:
            GitStore(r).load(STEP.key)
    assert children() == base
