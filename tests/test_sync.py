"""``gitledger sync``, remote claims and ``gitledger init``: real git, real processes, bare remotes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitledger.core.checks import LedgerCheck
from gitledger.core.events import DONE, INFO
from gitledger.core.keys import Content, StepKey
from gitledger.core.protocol import ActionResult, StepRunner
from gitledger.core.store import ANY_VERSION, Intent
from gitledger.git.repo import GitRepo
from gitledger.git.store import INTENTS_REF, NOTES_REF, GitStore
from gitledger.git.sync import LedgerSync, TreeMerger, tracking_ref, union_lines
from testing.repos import ROOT, git, gitledger_argv, init_repo, run_gitledger, run_json

# -- helpers ---------------------------------------------------------------------------------------


def make_remote(tmp_path: Path, clones: int, url: str | None = None) -> tuple[Path, list[Path]]:
    """A bare remote and ``clones`` repositories with it as origin (``url`` overrides the path)."""
    remote = init_repo(tmp_path / "remote.git", bare=True)
    paths = []
    for i in range(clones):
        clone = init_repo(tmp_path / f"clone{i}", commit=False)
        git("remote", "add", "origin", url or str(remote), cwd=clone)
        paths.append(clone)
    return remote, paths


def record(path: Path, task: str, steps: list[str]) -> None:
    """Run steps to done in-process (fast): one claim + one done event per key."""
    with GitRepo.discover(path) as repo:
        runner = StepRunner(GitStore(repo))
        for step in steps:
            result = runner.run(StepKey.derive(task, step, Content.empty()), [LedgerCheck()], ok)
            assert result.status == "created"


def ok() -> ActionResult:
    return ActionResult(ok=True)


def events(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every key's events in a repository's ledger (bare remotes too)."""
    with GitRepo.discover(path) as repo:
        return {entry.key: entry.events for entry in GitStore(repo).entries()}


def refs(path: Path) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/notes", "refs/gitledger", cwd=path)
    return dict(line.split(" ") for line in out.splitlines() if line)


def sync(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = run_gitledger("sync", *args, cwd=path)
    assert proc.returncode == 0, proc.stderr
    return proc


def run_step_json(*args: str, cwd: Path) -> dict[str, Any]:
    """``run-step ARGS`` with --json before the '--' that starts the command."""
    cut = args.index("--")
    proc = run_gitledger("run-step", *args[:cut], "--json", *args[cut:], cwd=cwd)
    assert proc.stdout.strip(), proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def ids(evs: list[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in evs]


# -- merging -----------------------------------------------------------------------------------------


def test_union_lines_keeps_local_order_then_remote_only_lines_once() -> None:
    local = b'{"id":"a"}\n{"id":"b"}\n'
    remote = b'{"id":"c"}\n{"id":"a"}\n{"id":"d"}\n'
    assert union_lines(local, remote) == b'{"id":"a"}\n{"id":"b"}\n{"id":"c"}\n{"id":"d"}\n'
    # one side holding everything: that side, byte for byte (clones converge on one blob)
    assert union_lines(local, b'{"id":"b"}\n') is local
    assert union_lines(b'{"id":"b"}\n', local) is local
    assert union_lines(b"", remote) is remote
    # malformed lines are kept, never dropped
    assert union_lines(b"garbage\n", remote).startswith(b"garbage\n")


def test_tree_merge_rewrites_a_foreign_fanout_in_the_standard_layout(repo: Path) -> None:
    with GitRepo.discover(repo) as git_repo:
        store = GitStore(git_repo)
        a = store.write_object("blob", b'{"id":"a"}\n')
        b = store.write_object("blob", b'{"id":"b"}\n')
        name = "ab" * 20
        flat = store.trees.write_tree({name: ("100644", a)})  # fanout 0, as 'git notes' writes small trees
        fanned = store.trees.put_many(None, {("ab", "ab", name[4:]): b})
        merger = TreeMerger(store, lambda left, right: store.write_object("blob", b"merged\n"))
        merged = merger.merge(flat, fanned)
        assert merger.blobs_merged == 1
        found = store.trees.find(merged, name)
        assert found is not None and found[0] == ["ab", "ab", name[4:]]
        assert list(store.trees.walk(merged)) == [(name, store.write_object("blob", b"merged\n"))]


def test_two_clones_sync_both_ways_to_the_union_and_a_second_sync_changes_nothing(tmp_path: Path) -> None:
    remote, (a, b) = make_remote(tmp_path, 2)
    record(a, "T-a", ["one", "two"])
    record(b, "T-b", ["three"])
    shared = StepKey.derive("T-s", "shared", Content.empty())
    for clone in (a, b):  # both clones add events to one key: its lines must be unioned
        with GitRepo.discover(clone) as repo:
            runner = StepRunner(GitStore(repo))
            runner.record(shared, runner.event(shared, INFO, message=f"from {clone.name}"))
    sync(a)
    sync(b)
    sync(a)
    ea, eb, er = events(a), events(b), events(remote)
    assert ea == eb == er
    assert len(ea) == 4
    assert sorted(e["message"] for e in ea[shared.key]) == ["from clone0", "from clone1"]
    assert all(len(evs) == 2 for key, evs in ea.items() if key != shared.key)
    # a merge commit with both parents keeps both histories in the audit log
    parents = git("log", "-1", "--format=%P", NOTES_REF, cwd=b).split()
    assert len(parents) == 2
    assert refs(a)[NOTES_REF] == refs(b)[NOTES_REF] == refs(remote)[NOTES_REF]
    # idempotent: nothing changes anywhere on a second round
    before = (refs(a), refs(b), refs(remote))
    for clone in (a, b):
        report = run_json("sync", cwd=clone)
        assert report["changed"] is False and report["pushed"] == [] and report["local"] == {}
    assert (refs(a), refs(b), refs(remote)) == before
    # people can read the ledger with git itself
    intent = ea[shared.key][0]
    assert intent["key"] == shared.key
    assert git("notes", "--ref=gitledger", "list", cwd=a).count("\n") == 3


def test_a_push_against_a_moved_remote_is_rejected_by_the_lease(tmp_path: Path) -> None:
    remote, (a, b) = make_remote(tmp_path, 2)
    record(a, "T", ["one"])
    with GitRepo.discover(a) as repo:
        ledger = LedgerSync(GitStore(repo), "origin")
        stale = ledger.fetch()  # the remote has no ledger yet
        record(b, "T", ["two"])
        sync(b)  # someone else writes first
        moved = refs(remote)
        assert ledger.push(stale) is False  # lease on "absent" fails: nothing overwritten
        assert refs(remote) == moved
        report = ledger.sync()
        assert report.pushed == [INTENTS_REF, NOTES_REF]
    assert set(events(remote)) == set(events(a))


def test_merged_history_with_a_dead_claim_and_a_finished_one_is_done(tmp_path: Path) -> None:
    _, (a, b) = make_remote(tmp_path, 2)
    argv = ["run-step", "-t", "T", "-s", "s", "--", "true"]
    crashed = run_gitledger(*argv, cwd=a, env={"GITLEDGER_FAULT": "after-effect"})
    assert crashed.returncode == -9  # claimed and acted, killed before recording done
    assert run_gitledger(*argv, cwd=b).returncode == 0
    sync(a)
    sync(b)
    sync(a)
    for clone in (a, b):
        (row,) = run_json("list", cwd=clone)
        assert row["state"] == "done" and row["events"] == 3 and row["duplicate"] is False


def test_two_created_outcomes_from_two_clones_show_as_duplicate(tmp_path: Path) -> None:
    _, (a, b) = make_remote(tmp_path, 2)
    for clone in (a, b):  # local claims: the clones cannot see each other, both act
        assert run_gitledger("run-step", "-t", "T", "-s", "s", "--", "true", cwd=clone).returncode == 0
    sync(a)
    sync(b)
    sync(a)
    for clone in (a, b):
        (row,) = run_json("list", cwd=clone)
        assert row["state"] == "done" and row["duplicate"] is True and row["events"] == 4
        assert "DUPLICATE" in run_gitledger("list", cwd=clone).stdout


# -- concurrency -------------------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import subprocess, sys
    from gitledger.core.checks import LedgerCheck
    from gitledger.git.repo import GitRepo
    from gitledger.git.store import GitStore
    from gitledger.core.keys import Content, StepKey
    from gitledger.core.events import INFO
    from gitledger.core.protocol import ActionResult, StepRunner

    clone, name, rounds, per_round = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    shared = StepKey.derive("shared", "key", Content.empty())
    with GitRepo.discover(clone) as repo:
        runner = StepRunner(GitStore(repo))
        for r in range(rounds):
            # the sync runs in its own process while this one keeps writing the same ledger
            sync = subprocess.Popen([sys.executable, "-m", "gitledger", "sync"], cwd=clone,
                                    stderr=subprocess.PIPE, text=True)
            for i in range(per_round):
                step = StepKey.derive(name, f"step-{r}-{i}", Content.empty())
                result = runner.run(step, [LedgerCheck()], lambda: ActionResult(ok=True))
                assert result.status == "created", result
            runner.record(shared, runner.event(shared, INFO, message=f"{name} round {r}"))
            _, err = sync.communicate(timeout=300)
            assert sync.returncode == 0, err
    """
)


def test_three_clones_syncing_concurrently_lose_no_event(tmp_path: Path) -> None:
    remote, clones = make_remote(tmp_path, 3)
    rounds, per_round = 3, 10
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(c), f"clone{i}", str(rounds), str(per_round)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, c in enumerate(clones)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err
    for clone in [*clones, *clones[:2]]:  # a final round so everyone has everything
        sync(clone)
    expected_keys = 3 * rounds * per_round + 1
    for path in [*clones, remote]:
        ledger = events(path)
        assert len(ledger) == expected_keys
        shared = next(evs for key, evs in ledger.items() if key.startswith("shared."))
        assert len(shared) == 3 * rounds and len(set(ids(shared))) == 3 * rounds
        others = [evs for key, evs in ledger.items() if not key.startswith("shared.")]
        assert all([e["state"] for e in evs] == ["attempting", DONE] for evs in others)
        assert sum(len(evs) for evs in ledger.values()) == 3 * rounds * (2 * per_round + 1)
    assert refs(clones[0])[NOTES_REF] == refs(remote)[NOTES_REF]


def test_remote_claim_race_across_clones_acts_exactly_once(tmp_path: Path) -> None:
    _, clones = make_remote(tmp_path, 3)
    effect = tmp_path / "effect"
    argv = gitledger_argv(
        "run-step", "--remote", "origin", "-t", "race", "-s", "once", "--json", "--",
        "sh", "-c", f"echo x >> '{effect}'; sleep 0.3",
    )  # fmt: skip
    procs = [
        subprocess.Popen(argv, cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for clone in clones
        for _ in range(4)
    ]
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        outcomes.append((proc.returncode, json.loads(out)["status"] if out.strip() else err))
    assert effect.read_text() == "x\n", outcomes
    statuses = sorted(status for _, status in outcomes)
    assert statuses.count("created") == 1, outcomes
    assert set(statuses) <= {"created", "in_progress", "skipped"}, outcomes
    assert all(code in (0, 75) for code, _ in outcomes), outcomes
    # once the winner's outcome travelled, every clone skips it and the ledger holds one creation
    for clone in clones:
        sync(clone)
    for clone in clones:
        result = run_step_json("--remote", "origin", "-t", "race", "-s", "once", "--", "true", cwd=clone)
        assert result["status"] == "skipped"
        (row,) = run_json("list", cwd=clone)
        assert row["state"] == "done" and row["duplicate"] is False
    assert effect.read_text() == "x\n"


def test_claims_remote_in_config_and_an_unreachable_remote_fail_closed(tmp_path: Path) -> None:
    _, (a,) = make_remote(tmp_path, 1, url=str(tmp_path / "missing.git"))
    effect = tmp_path / "effect"
    action = ["--", "sh", "-c", f"echo x >> '{effect}'"]
    cases: list[tuple[list[str], str | None]] = [
        (["--remote", "origin"], None),
        ([], "claims: remote\nremote: origin\n"),
    ]
    for args, config in cases:
        if config:
            (a / ".gitledger.yml").write_text(config)
        proc = run_gitledger("run-step", "-t", "T", "-s", "s", *args, *action, cwd=a)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gitledger: cannot fetch the ledger from 'origin'")
        assert "nothing was done" in lines[0] and "--allow-offline" in lines[0]
        assert not effect.exists()
        (row,) = run_json("list", cwd=a)
        assert row["state"] == "none"  # the claim was withdrawn: the next run may act
    offline_sync = run_gitledger("sync", cwd=a)
    assert offline_sync.returncode == 1 and len(offline_sync.stderr.strip().splitlines()) == 1
    proc = run_gitledger("run-step", "-t", "T", "-s", "s", "--allow-offline", "--json", *action, cwd=a)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "created"
    assert effect.read_text() == "x\n"
    assert "warning: cannot fetch the ledger from 'origin'" in proc.stderr
    assert "not pushed to 'origin'" in proc.stderr  # publishing the outcome failed too, as a warning


@pytest.mark.parametrize("remote_has_ledger", [False, True])
def test_a_remote_of_the_other_object_format_is_refused_in_one_clear_line(
    tmp_path: Path, remote_has_ledger: bool
) -> None:
    # a sha256 clone and a sha1 remote: the push to an empty remote failed with git's "protocol
    # error: unexpected capabilities^{}", a fetch was "remote not reachable: retry or --allow-offline"
    remote = init_repo(tmp_path / "remote.git", bare=True)
    if remote_has_ledger:
        _, (sha1,) = make_remote(tmp_path / "sha1", 1, url=str(remote))
        record(sha1, "T", ["a"])
        sync(sha1)
    local = tmp_path / "sha256"
    git("init", "-q", "--object-format=sha256", str(local), cwd=tmp_path)
    git("remote", "add", "origin", str(remote), cwd=local)
    record(local, "T", ["b"])
    before = refs(remote)
    effect = tmp_path / "effect"
    for args in (
        ["sync"],
        ["run-step", "-t", "T", "-s", "c", "--remote", "origin", "--", "touch", str(effect)],
        [
            "run-step",
            "-t",
            "T",
            "-s",
            "c",
            "--remote",
            "origin",
            "--allow-offline",
            "--",
            "touch",
            str(effect),
        ],
    ):
        proc = run_gitledger(*args, cwd=local)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert "'origin': it hashes objects with another algorithm than this sha256 repository" in line
        assert "remote of the same one" in line
    assert not effect.exists() and refs(remote) == before
    assert {row["key"].split(".")[1]: row["state"] for row in run_json("list", cwd=local)} == {
        "b": "done",
        "c": "none",
    }


def test_a_partial_clone_reads_the_ledger_it_fetched(tmp_path: Path) -> None:
    # a clone with --filter=blob:none fetched the ledger's commits and trees without the notes and
    # intents (blobs): every entry read as corrupt and a done step asked for 'resolve'
    remote, (a,) = make_remote(tmp_path, 1)
    git("config", "uploadpack.allowFilter", "true", cwd=remote)
    (a / "f").write_text("x\n")
    git("add", "f", cwd=a)
    git("commit", "-q", "-m", "one", cwd=a)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=a)
    record(a, "T", ["a", "b"])
    sync(a)
    url = f"file://{remote}"
    by_sync, by_fetch = tmp_path / "by-sync", tmp_path / "by-fetch"
    for clone in (by_sync, by_fetch):
        git("clone", "-q", "--filter=blob:none", url, str(clone), cwd=tmp_path)
    sync(by_sync)  # its own fetch of the ledger brings every object
    missing = git("rev-list", "--objects", "--missing=print", "refs/notes/gitledger", cwd=by_sync)
    assert "?" not in missing
    assert run_gitledger("init", cwd=by_fetch).returncode == 0
    git("fetch", "-q", "origin", cwd=by_fetch)  # the partial clone's filter: the blobs stay behind
    missing = git(
        "rev-list", "--objects", "--missing=print", "refs/gitledger/remotes/origin/notes", cwd=by_fetch
    )
    assert "\n?" in missing
    sync(by_fetch)  # git fetches what the ledger reads, when it reads it
    for clone in (by_sync, by_fetch):
        assert [row["state"] for row in run_json("list", cwd=clone)] == ["done", "done"]
        proc = run_gitledger("run-step", "-t", "T", "-s", "a", "--", "false", cwd=clone)
        assert proc.returncode == 0 and "skipped" in proc.stderr, proc.stderr


def test_unknown_remote_is_a_usage_error(tmp_path: Path) -> None:
    _, (a,) = make_remote(tmp_path, 1)
    proc = run_gitledger("sync", "nowhere", cwd=a)
    assert proc.returncode == 2 and "no git remote named 'nowhere'" in proc.stderr


@pytest.mark.parametrize("kind", ["blob", "tree"])
def test_a_damaged_ledger_on_the_remote_is_named_as_the_remotes(tmp_path: Path, kind: str) -> None:
    """The message named the local tracking ref and how to restore it there, which the next sync
    fetched again, as it was, from the remote."""
    remote, (a,) = make_remote(tmp_path, 1)
    record(a, "T", ["s"])
    sync(a)
    before = refs(a)
    oid = (
        git("hash-object", "-w", "--stdin", cwd=remote, input="x")
        if kind == "blob"
        else git("mktree", cwd=remote, input="")
    )
    git("update-ref", NOTES_REF, oid, cwd=remote)
    proc = run_gitledger("sync", cwd=a)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(
        f"gitledger: the ledger on 'origin' is damaged: its {NOTES_REF} points at a {kind}, not a commit; "
        f"nothing was merged or pushed. Repair it there (its reflog, a backup), or delete it with "
        f"'git push origin :{NOTES_REF}'"
    ), proc.stderr
    assert {ref: v for ref, v in refs(a).items() if "remotes" not in ref} == {
        ref: v for ref, v in before.items() if "remotes" not in ref
    }
    git("push", "-q", "origin", f":{NOTES_REF}", cwd=a)  # as the message says, when nothing is worth keeping
    sync(a)
    assert git("rev-parse", NOTES_REF, cwd=remote) == git("rev-parse", NOTES_REF, cwd=a)


# -- git daemon ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A ``git daemon`` on 127.0.0.1 serving ``tmp_path/served`` (push enabled); skips if unavailable."""
    exec_path = git("--exec-path", cwd=tmp_path)
    if not (Path(exec_path) / "git-daemon").exists() and shutil.which("git-daemon") is None:
        pytest.skip("git daemon is not installed")
    served = tmp_path / "served"
    served.mkdir()
    port = _free_port()
    proc = subprocess.Popen(
        ["git", "daemon", "--export-all", "--enable=receive-pack", "--reuseaddr",
         f"--base-path={served}", f"--port={port}", "--listen=127.0.0.1", str(served)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("git daemon did not start")
                time.sleep(0.05)
        yield served, f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_sync_and_remote_claims_over_git_daemon(tmp_path: Path, git_daemon: tuple[Path, str]) -> None:
    served, base = git_daemon
    remote = init_repo(served / "ledger.git", bare=True)
    clones = []
    for i in range(2):
        clone = init_repo(tmp_path / f"clone{i}", commit=False)
        git("remote", "add", "origin", f"{base}/ledger.git", cwd=clone)
        clones.append(clone)
    a, b = clones
    record(a, "T", ["one"])
    record(b, "T", ["two"])
    sync(a)
    sync(b)
    sync(a)
    assert events(a) == events(b) == events(remote)
    assert len(events(a)) == 2
    argv = ["--remote", "origin", "-t", "T", "-s", "claimed", "--", "true"]
    assert run_step_json(*argv, cwd=a)["status"] == "created"
    assert run_step_json(*argv, cwd=b)["status"] == "skipped"  # learnt from the remote, not the local ledger
    assert len(events(remote)) == 3


# -- init ---------------------------------------------------------------------------------------------


def config_values(path: Path, key: str) -> list[str]:
    return git("config", "--get-all", key, cwd=path, check=False).splitlines()


def test_init_is_idempotent_and_undo_removes_exactly_what_it_added(tmp_path: Path) -> None:
    remote, (a, b) = make_remote(tmp_path, 2)
    before = git("config", "--list", "--local", cwd=a)
    dry = run_gitledger("init", "--dry-run", cwd=a)
    assert dry.returncode == 0 and "would have added remote.origin.fetch" in dry.stderr
    assert git("config", "--list", "--local", cwd=a) == before
    for _ in range(2):
        assert run_gitledger("init", cwd=a).returncode == 0
    fetch = config_values(a, "remote.origin.fetch")
    assert fetch == [
        "+refs/heads/*:refs/remotes/origin/*",
        "+refs/notes/gitledger*:refs/gitledger/remotes/origin/notes*",
        "+refs/gitledger/intents*:refs/gitledger/remotes/origin/intents*",
    ]
    assert config_values(a, "gitledger.remote") == ["origin"]
    assert config_values(a, "gitledger.pushLedger") == ["true"]
    assert config_values(a, "remote.origin.push") == []  # never replace git's default push
    assert "already set up" in run_gitledger("init", cwd=a).stderr
    # a remote without a ledger must not break 'git fetch'; once it has one, 'git fetch' brings it
    git("fetch", "origin", cwd=a)
    record(b, "T", ["one"])
    sync(b)
    git("fetch", "origin", cwd=a)
    assert refs(a)[tracking_ref("origin", NOTES_REF)] == refs(remote)[NOTES_REF]
    assert refs(a)[tracking_ref("origin", INTENTS_REF)] == refs(remote)[INTENTS_REF]
    for _ in range(2):
        assert run_gitledger("init", "--undo", cwd=a).returncode == 0
    assert git("config", "--list", "--local", cwd=a) == before
    assert "nothing to undo" in run_gitledger("init", "--undo", cwd=a).stderr


def test_sync_uses_the_remote_set_by_init(tmp_path: Path) -> None:
    remote, (a,) = make_remote(tmp_path, 1)
    git("remote", "rename", "origin", "shared", cwd=a)
    assert run_gitledger("init", "--remote", "shared", cwd=a).returncode == 0
    record(a, "T", ["one"])
    assert "synced with 'shared'" in sync(a).stderr
    assert set(events(remote)) == set(events(a))


def test_local_ledger_writes_during_a_merge_are_kept(tmp_path: Path) -> None:
    """The merge moves the local refs by compare-and-swap: an append in between is never lost."""
    remote, (a, b) = make_remote(tmp_path, 2)
    record(b, "T", ["remote-side"])
    sync(b)
    with GitRepo.discover(a) as repo:
        store = GitStore(repo)
        ledger = LedgerSync(store, "origin")
        tips = ledger.fetch()
        step = StepKey.derive("T", "local-side", Content.empty())
        runner = StepRunner(store)
        store.append(Intent.of(step), runner.event(step, INFO, message="written first"), ANY_VERSION)
        ledger.merge(tips)
        assert ledger.push(tips)
    assert (
        set(events(remote))
        == set(events(a))
        == {
            StepKey.derive("T", "remote-side", Content.empty()).key,
            step.key,
        }
    )
    assert os.environ.get("GITLEDGER_FAULT") is None


def test_a_crash_between_local_claim_and_remote_push_fails_safe(tmp_path: Path) -> None:
    remote, (a,) = make_remote(tmp_path, 1)
    effect = tmp_path / "effect"
    action = ["--", "sh", "-c", f"echo x >> '{effect}'"]
    argv = ["run-step", "--remote", "origin", "-t", "T", "-s", "s"]
    crashed = run_gitledger(*argv, *action, cwd=a, env={"GITLEDGER_FAULT": "after-claim"})
    assert crashed.returncode == -9 and not effect.exists()
    assert events(remote) == {}  # the claim never reached the remote
    # ledger-only: nothing can prove the dead claimant did not act, so the default policy stops
    again = run_gitledger(*argv, *action, cwd=a)
    assert again.returncode == 3 and not effect.exists()
    # a step with a reality check looks, finds nothing, and claims afresh through the remote
    proc = run_gitledger(*argv, "--check", f"file:{tmp_path / 'absent'}", "--json", *action, cwd=a)
    assert json.loads(proc.stdout)["status"] == "created", proc.stderr
    assert effect.read_text() == "x\n"
    (evs,) = events(remote).values()
    assert [e["state"] for e in evs] == ["attempting", "attempting", DONE]
    assert evs[1]["supersedes"] == [evs[0]["id"]]


def test_init_and_the_pre_push_hook_carry_the_ledger_with_a_plain_git_push(tmp_path: Path) -> None:
    """``init`` sets gitledger.pushLedger; the installed pre-push hook then runs ``sync`` on push."""
    remote, (a, b) = make_remote(tmp_path, 2)
    for clone in (a, b):
        assert run_gitledger("init", cwd=clone).returncode == 0
        assert run_gitledger("hooks", "install", cwd=clone).returncode == 0
    (a / "f").write_text("x\n")
    git("add", "f", cwd=a)
    git("commit", "-q", "-m", "work", cwd=a)
    record(a, "T", ["one"])
    record(b, "T", ["two"])
    sync(b)
    push = subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=a, capture_output=True, text=True)
    assert push.returncode == 0, push.stderr
    assert git("rev-parse", "main", cwd=remote) == git("rev-parse", "HEAD", cwd=a)  # the branch went
    assert (
        set(events(remote))
        == set(events(a))
        == {  # and the ledger, merged with b's
            StepKey.derive("T", "one", Content.empty()).key,
            StepKey.derive("T", "two", Content.empty()).key,
        }
    )
    git("fetch", "-q", "origin", cwd=b)  # plain fetch brings the ledger into the tracking refs
    assert refs(b)[tracking_ref("origin", NOTES_REF)] == refs(remote)[NOTES_REF]


def test_remote_mode_skips_a_done_key_the_same_with_and_without_the_fast_path(tmp_path: Path) -> None:
    _, (a,) = make_remote(tmp_path, 1)
    argv = ["run-step", "-t", "T", "-s", "s", "--remote", "nowhere", "--", "true"]
    first = run_gitledger(*argv, cwd=a)
    assert first.returncode == 2 and "no git remote named 'nowhere'" in first.stderr
    assert run_json("list", cwd=a) == []  # the remote is checked before anything is written
    record(a, "T", ["s"])
    fast = run_gitledger(*argv, cwd=a)
    full = run_gitledger(*argv, cwd=a, env={"GITLEDGER_NO_FASTPATH": "1"})
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
    assert fast.returncode == 0 and "skipped" in fast.stderr
