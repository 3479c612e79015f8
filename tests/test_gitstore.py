"""The ledger inside git: real repositories of every shape, CAS, garbage collection, corruption."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gitledger.core.errors import UsageError
from gitledger.core.keys import StepKey
from gitledger.core.store import Intent
from gitledger.git.objects import hash_object
from gitledger.git.records import state_of
from gitledger.git.repo import GitRepo
from gitledger.git.store import INTENTS_REF, NOTES_REF, GitStore
from testing.repos import git, init_repo, ledger_lock_held, run_gitledger, run_json

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
    assert run_json("flush", cwd=repo) == {"folded": 2}
    intent = git("ls-tree", "-r", "--format=%(objectname)", INTENTS_REF, cwd=repo)
    note = git("notes", "--ref=gitledger", "show", intent, cwd=repo)
    assert '"outcome":"created"' in note
    log = git("log", "--format=%B", NOTES_REF, cwd=repo)
    assert log.splitlines()[0] == "gitledger: 2 events" and "attempting" in log and "done" in log
    assert git("fsck", "--no-progress", "--strict", cwd=repo) == ""


@pytest.mark.parametrize(
    ("line", "state"),
    [
        (b'{"at":"x","owner":{"pid":1,"session":"s"},"state":"attempting","step":"s","v":1}', "attempting"),
        (b'{"owner":{"state":"nested"},"state":"done"}', "done"),  # two fields: parsed
        (b'{"result":{"state":"nested"},"v":1}', "event"),  # only a nested one
        (b'{"checks":["command:x {"],"state":"done"}', "done"),  # a brace in a string: parsed
        (b'{"state":"done"', "damaged"),  # not a whole object
        (b'{"state":7}', "event"),
        (b"#damaged-journal-line 0badc0de k {...}", "damaged"),
        (b'["state"]', "damaged"),  # not an object
    ],
)
def test_a_folds_message_names_each_events_state(line: bytes, state: str):
    """What a fold's commit message says of each event: read without parsing where the line is as
    gitledger writes it, parsed otherwise, with the same answer."""
    assert state_of(line) == state


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


@pytest.mark.parametrize(
    "name", ["plain", "new\nline dir", os.fsdecode(b"not utf-8 \xff"), "new\nline \xe9 \xff"]
)
def test_a_repository_path_with_a_newline_or_bytes_that_are_not_utf8(tmp_path: Path, name: str):
    # git rev-parse printed such a path over two lines (the ledger went to a directory that did not
    # exist: every write failed), or in bytes that did not decode (an internal error for every command)
    path = init_repo(tmp_path / name)
    wt = tmp_path / f"{name} wt"
    git("worktree", "add", "-q", "-b", "side", str(wt), cwd=path)
    assert record(path)["status"] == "created"
    assert record(wt)["status"] == "skipped"
    assert run_gitledger("flush", cwd=wt).returncode == 0
    assert [e["state"] for e in run_json("list", cwd=path)] == ["done"]
    assert git("log", "--format=%s", "refs/notes/gitledger", cwd=path) == "gitledger: 2 events"
    assert (path / ".git" / "gitledger.journal").is_file()
    bare = tmp_path / f"{name}.git"
    git("clone", "-q", "--bare", str(path), str(bare), cwd=tmp_path)
    for where in (bare, bare / "refs"):  # a check that runs git, in a bare repository and inside one
        argv = ["run-step", "-t", "T-1", "-s", "bare", "--check", "trailer", "--json", "--", "true"]
        proc = run_gitledger(*argv, cwd=where)
        assert proc.returncode == 0 and json.loads(proc.stdout)["status"] in ("created", "skipped"), (
            proc.stderr
        )


@pytest.mark.parametrize("name", ["source", os.fsdecode(b"source \xff")])
def test_a_ledger_in_the_objects_of_an_alternate_is_read(tmp_path: Path, name: str):
    # objects/info/alternates naming a path in bytes that are not UTF-8 was an internal error
    source = init_repo(tmp_path / name)
    key = record(source)["key"]
    assert run_gitledger("flush", cwd=source).returncode == 0
    shared = tmp_path / "shared"
    git("clone", "-q", "--shared", str(source), str(shared), cwd=tmp_path)
    git("fetch", "-q", "origin", "refs/notes/gitledger:refs/notes/gitledger", cwd=shared)
    git("fetch", "-q", "origin", "refs/gitledger/intents:refs/gitledger/intents", cwd=shared)
    assert not list((shared / ".git" / "objects" / "pack").glob("*.pack"))  # all in the alternate
    assert [(e["key"], e["state"]) for e in run_json("list", cwd=shared)] == [(key, "done")]
    assert record(shared)["status"] == "skipped"


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
        store.flush()
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


def _ran_again(repo: Path, marker: Path) -> subprocess.CompletedProcess[str]:
    """The recorded step T-1/push once more (``--json``), with an effect that leaves ``marker``."""
    script = f"echo ran >> {marker}"
    return run_gitledger("run-step", "-t", "T-1", "-s", "push", "--json", "--", "sh", "-c", script, cwd=repo)


@pytest.mark.parametrize("ref", [NOTES_REF, INTENTS_REF])
def test_a_ledger_ref_made_symbolic_by_hand_is_refused_and_never_written_through(repo: Path, ref: str):
    """A ledger ref turned into ``ref: refs/heads/main`` used to be followed: the step read an empty
    ledger and ran again, and a fold then moved the user's branch onto a ledger commit."""
    record(repo)
    assert run_json("flush", cwd=repo) == {"folded": 2}
    record(repo, step="later")  # in the journal: a fold has something to write
    before = git("rev-parse", ref, cwd=repo)
    main = git("rev-parse", "main", cwd=repo)
    git("symbolic-ref", ref, "refs/heads/main", cwd=repo)
    marker = repo.parent / "ran"
    again = _ran_again(repo, marker)
    if ref == INTENTS_REF:  # a done step is answered from its note (the key's intent is hashed)
        assert json.loads(again.stdout)["status"] == "skipped"
    for proc in ([again] if ref == NOTES_REF else []) + [
        run_gitledger(c, cwd=repo) for c in ("flush", "list")
    ]:
        assert proc.returncode == 1, proc
        assert proc.stderr.count("\n") == 1 and "a symbolic ref (to refs/heads/main)" in proc.stderr
        # the way back: from the reflog (gitledger keeps one for each ledger ref)
        assert f"git update-ref --no-deref {ref} {before}' (its last good value" in proc.stderr
    assert not marker.exists() and git("rev-parse", "main", cwd=repo) == main
    git("update-ref", "--no-deref", ref, before, cwd=repo)  # what the message says to do
    assert json.loads(_ran_again(repo, marker).stdout)["status"] == "skipped" and not marker.exists()


def _project_commit(repo: Path, shape: str) -> str:
    """A commit of the project that is no ledger: its own files, an empty tree, files in directories
    named like fan-out levels (``ab/x``), or files named in hex digits (``add``, ``2024``, ``ab/1``)."""
    if shape == "files":
        return git("rev-parse", "main", cwd=repo)
    if shape == "empty":
        return git(
            "commit-tree", "-m", "empty", git("hash-object", "-t", "tree", "/dev/null", cwd=repo), cwd=repo
        )
    index = {**os.environ, "GIT_INDEX_FILE": str(repo.parent / "scratch-index")}
    for path in ("ab/x", "cd/y") if shape == "hex-folders" else ("add", "2024", "ab/1"):
        blob = git("hash-object", "-w", "--stdin", cwd=repo, input=path)
        subprocess.run(
            ["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"],
            cwd=repo,
            env=index,
            check=True,
        )
    tree = subprocess.run(
        ["git", "write-tree"], cwd=repo, env=index, capture_output=True, text=True, check=True
    )
    return git("commit-tree", "-m", "hex-named folders", tree.stdout.strip(), cwd=repo)


@pytest.mark.parametrize(
    "shape,why",
    [
        ("files", "its tree holds 'README'"),
        ("empty", "its tree is empty"),
        ("hex-folders", "its tree under ab/ holds 'x'"),
        ("hex-names", "its tree under ab/ holds '1'"),  # 'add', '2024': hex, too short for a note
    ],
)
def test_a_ledger_ref_pointed_at_a_project_commit_is_refused(repo: Path, shape: str, why: str):
    """A commit that is not a ledger read as the notes looked like an empty ledger: every done step
    ran again, and a fold built notes on the project's tree. The message names the last good value
    of the notes ref's reflog (not the commit the ref was pointed at, the newest one there)."""
    record(repo)
    assert run_json("flush", cwd=repo) == {"folded": 2}
    record(repo, step="later")
    before = git("rev-parse", NOTES_REF, cwd=repo)
    git("update-ref", NOTES_REF, _project_commit(repo, shape), cwd=repo)
    marker = repo.parent / "ran"
    for proc in (_ran_again(repo, marker), run_gitledger("flush", cwd=repo)):
        assert proc.returncode == 1, proc
        assert proc.stderr.count("\n") == 1 and f"not a gitledger ledger ({why})" in proc.stderr, proc.stderr
        assert f"git update-ref --no-deref {NOTES_REF} {before}' (its last good value" in proc.stderr
    assert not marker.exists()
    git("update-ref", NOTES_REF, before, cwd=repo)
    assert json.loads(_ran_again(repo, marker).stdout)["status"] == "skipped" and not marker.exists()


@pytest.mark.parametrize("moved", [NOTES_REF, INTENTS_REF])
def test_a_ledger_ref_pointed_at_the_other_ledger_refs_commit_is_refused(repo: Path, moved: str):
    """The notes and the intents are trees of one shape: a ledger ref pointed at the other's commit
    read as a ledger with no entries (done steps ran again; 'list' showed nothing). Their notes are
    told apart by how they are named: by the object id they annotate (notes) or by a key digest
    (intents). A step's own lookup never reads the intents: it is skipped either way."""
    record(repo)
    assert run_json("flush", cwd=repo) == {"folded": 2}
    record(repo, step="later")
    before = git("rev-parse", moved, cwd=repo)
    other = git("rev-parse", INTENTS_REF if moved == NOTES_REF else NOTES_REF, cwd=repo)
    git("update-ref", moved, other, cwd=repo)
    marker = repo.parent / "ran"
    named_by = "an object id" if moved == INTENTS_REF else "a key digest"
    procs = [run_gitledger("flush", cwd=repo), run_gitledger("list", cwd=repo)]
    if moved == NOTES_REF:
        procs.append(_ran_again(repo, marker))
    else:
        assert json.loads(_ran_again(repo, marker).stdout)["status"] == "skipped"
    for proc in procs:
        assert proc.returncode == 1, proc
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert f"{moved} points at commit {other}, which is not a gitledger ledger" in proc.stderr
        assert f"(its entries are named by {named_by}, as the " in proc.stderr
        assert f"git update-ref --no-deref {moved} {before}' (its last good value" in proc.stderr
    assert not marker.exists()
    git("update-ref", moved, before, cwd=repo)
    assert json.loads(_ran_again(repo, marker).stdout)["status"] == "skipped" and not marker.exists()
    assert len(run_json("list", "--json", cwd=repo)) == 2


def test_ref_updates_never_go_through_a_symbolic_ref(repo: Path):
    """The last guard, for a ref made symbolic between a read and a write: the fresh ``update-ref``
    replaces the symbolic ref (its old value still checked) and leaves the branch it named alone."""
    from gitledger.git.refupdate import update_refs_fresh

    main = git("rev-parse", "main", cwd=repo)
    other = git("commit-tree", "-m", "other", f"{main}^{{tree}}", cwd=repo)
    git("symbolic-ref", NOTES_REF, "refs/heads/main", cwd=repo)
    with GitRepo.discover(repo) as r:
        moved = update_refs_fresh(
            r, [(NOTES_REF, other, main)], lambda ref: git("rev-parse", ref, cwd=repo), None, "", print
        )
        assert moved and r.update_refs([(INTENTS_REF, other, None)])
    assert git("rev-parse", "main", cwd=repo) == main
    assert git("rev-parse", NOTES_REF, cwd=repo) == other
    assert git("symbolic-ref", "-q", NOTES_REF, cwd=repo, check=False) == ""


@pytest.mark.parametrize("after", [2, 3], ids=["between-steps", "between-claim-and-done"])
def test_zeros_written_into_the_middle_of_the_journal_hide_no_step(repo: Path, after: int):
    """A run of zero bytes in the middle of the journal (a damaged block) made readers stop there:
    'list' showed one of three steps without a word, a done step ran again (or, its claim before the
    zeros and its done behind them, was 'unconfirmed', and the advice was to forget it), and 'flush'
    moved the confirmed events behind the zeros aside as torn writes. Now the first reader takes them
    back, under the exclusive lock, and says so."""
    for step in ("a", "b", "c"):
        record(repo, step=step)
    journal = repo / ".git" / "gitledger.journal"
    data = journal.read_bytes()
    at = 0
    for _ in range(after):
        at = data.index(b"\n", at) + 1
    journal.write_bytes(data[:at] + bytes(100) + b"\n" + data[at:])
    marker = repo.parent / "ran"
    script = f"echo >> {marker}"
    again = run_gitledger("run-step", "-t", "T-1", "-s", "b", "--json", "--", "sh", "-c", script, cwd=repo)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "skipped", again
    assert not marker.exists() and again.stderr.count("\n") == 1 and "they are read again" in again.stderr
    listed = run_gitledger("list", "--json", cwd=repo)
    states = {e["key"].split(".")[1]: e["state"] for e in json.loads(listed.stdout)}
    assert states == {"a": "done", "b": "done", "c": "done"} and listed.stderr == ""
    assert run_json("flush", cwd=repo) == {"folded": 6}
    assert not (repo / ".git" / "gitledger.journal.torn").exists()


def test_a_reader_takes_back_what_lies_behind_zeros_before_it_answers(repo: Path):
    """'list' (a reader) finds the records first: it takes them back and says so, in one line."""
    for step in ("a", "b"):
        record(repo, step=step)
    journal = repo / ".git" / "gitledger.journal"
    data = journal.read_bytes()
    at = data.index(b"\n", data.index(b"\n") + 1) + 1
    journal.write_bytes(data[:at] + bytes(700) + data[at:])
    listed = run_gitledger("list", "--json", cwd=repo)
    assert [e["key"].split(".")[1] for e in json.loads(listed.stdout)] == ["a", "b"]
    assert listed.stderr.count("\n") == 1 and "2 record(s) behind 700 zero byte(s)" in listed.stderr


def test_a_journal_path_that_leads_nowhere_is_one_line(repo: Path):
    """A symbolic link at the journal's path into a folder that does not exist: reading finds no
    journal, and creating one failed with an internal error."""
    (repo / ".git" / "gitledger.journal").symlink_to("/nonexistent/journal")
    proc = run_gitledger("run-step", "-t", "T-1", "-s", "x", "--", "true", cwd=repo, timeout=30)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc
    assert "cannot write the ledger journal" in proc.stderr and "No such file or directory" in proc.stderr


@pytest.mark.parametrize("kind", ["directory", "fifo", "device"])
def test_something_else_at_the_journal_path_is_one_line_not_a_hang(repo: Path, kind: str):
    """A directory, a FIFO (an open for reading waited for a writer forever) or a device (a symlink
    to /dev/null) where the journal goes: one line, exit 1, nothing run."""
    journal = repo / ".git" / "gitledger.journal"
    if kind == "directory":
        journal.mkdir()
    elif kind == "fifo":
        os.mkfifo(journal)
    else:
        journal.symlink_to("/dev/null")
    marker = repo.parent / "ran"
    for args in (["list"], ["run-step", "-t", "T-1", "-s", "x", "--", "touch", str(marker)], ["flush"]):
        proc = run_gitledger(*args, cwd=repo, timeout=30)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, (args, proc)
        assert "is not a file (something else was put there); move it away" in proc.stderr
    assert not marker.exists()


def test_a_torn_file_that_cannot_be_written_keeps_the_journal_as_it_is(repo: Path):
    """Torn lines go to gitledger.journal.torn before the journal drops them: when that cannot be
    written (a directory there), the repair stops in one line and the journal keeps them."""
    record(repo)
    journal = repo / ".git" / "gitledger.journal"
    lines = journal.read_bytes().partition(b"\0")[0]
    with journal.open("r+b") as fh:
        fh.seek(len(lines))
        fh.write(b"0123abcd a torn write")
    (repo / ".git" / "gitledger.journal.torn").mkdir()
    proc = run_gitledger("flush", cwd=repo)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc
    assert "cannot keep torn journal lines in" in proc.stderr and "Is a directory" in proc.stderr
    assert journal.read_bytes().partition(b"\0")[0] == lines + b"0123abcd a torn write"
    (repo / ".git" / "gitledger.journal.torn").rmdir()
    assert run_json("flush", cwd=repo) == {"folded": 2}


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
    for i in range(20):
        with GitRepo.discover(repo) as r:
            GitStore(r).load(STEP.key)
            GitStore(r).append(Intent.of(StepKey.derive("T-leak", f"s{i}")), {"state": "info"}, None)
    assert children() == base


def test_ref_updates_are_compare_and_swap_through_one_process(repo: Path):
    """A refused transaction returns False and moves nothing; the next one works; real errors raise."""
    from gitledger.core.errors import GitError

    head = git("rev-parse", "HEAD", cwd=repo)
    tree = git("rev-parse", "HEAD^{tree}", cwd=repo)
    other = git("commit-tree", "-m", "other", tree, cwd=repo)
    with GitRepo.discover(repo) as r:
        assert r.update_refs([("refs/gitledger/t1", head, None)])
        assert not r.update_refs([("refs/gitledger/t1", other, None)])  # exists already
        assert not r.update_refs([("refs/gitledger/t1", other, other)])  # not at that value
        assert not r.update_refs([("refs/gitledger/t2", head, None), ("refs/gitledger/t1", other, other)])
        assert git("rev-parse", "refs/gitledger/t1", cwd=repo) == head
        assert git("for-each-ref", "refs/gitledger/t2", cwd=repo) == ""  # all or nothing
        assert r.update_refs([("refs/gitledger/t1", other, head), ("refs/gitledger/t2", head, None)])
        assert git("rev-parse", "refs/gitledger/t1", "refs/gitledger/t2", cwd=repo).split() == [other, head]
        git("update-ref", "refs/gitledger/t1", head, cwd=repo)  # someone else moves it
        assert not r.update_refs([("refs/gitledger/t1", other, other)])
        with pytest.raises(GitError, match="update-ref failed"):
            r.update_refs([("refs/gitledger/bad..name", head, None)])
        assert r.update_refs([("refs/gitledger/t1", other, head)])


def test_notes_at_any_fanout_are_read(repo: Path):
    """A note written by git itself (flat fan-out) is found, as is one written by the store."""
    with GitRepo.discover(repo) as r:
        store = GitStore(r)
        intent = Intent.of(StepKey.derive("T-flat", "push"))
        oid = store.intent_oid(intent)
        from gitledger.git.store import intent_bytes

        assert git("hash-object", "-w", "--stdin", cwd=repo, input=intent_bytes(intent).decode()) == oid
        line = json.dumps({"key": intent.key, "outcome": "created", "state": "done"})
        git("notes", "--ref=gitledger", "add", "-m", line, oid, cwd=repo)
        assert oid in git("ls-tree", "--name-only", NOTES_REF, cwd=repo).split()  # flat, not ab/cd/...
        entry = store.load(intent)
        assert entry.folded.state == "done" and entry.version is not None
        v2 = store.append(intent, {"state": "info", "key": intent.key}, entry.version)
        assert v2 is not None and store.load(intent).version == v2
        other = Intent.of(STEP)
        v3 = store.append(other, {"state": "attempting", "key": STEP.key}, None)
        assert store.load(other).version == v3


def test_trees_are_formatted_as_git_formats_them(repo: Path):
    """format_tree orders entries exactly as git does (a tree 'x' sorts as 'x/'), checked by git mktree."""
    import random

    from gitledger.git.repo import format_tree

    rng = random.Random(5)
    blob = git("hash-object", "-w", "--stdin", cwd=repo, input="x")
    tree = git("mktree", cwd=repo, input=f"100644 blob {blob}\tf\n")
    names = ["a", "a.b", "a-b", "a0", "ab", "b", "ab.c", "é", "a_b", *[f"{i:02x}" for i in range(40)]]
    with GitRepo.discover(repo) as r:
        for _ in range(20):
            chosen = rng.sample(names, rng.randint(1, len(names)))
            entries = {n: ("40000", tree) if rng.random() < 0.5 else ("100644", blob) for n in chosen}
            listing = "".join(
                f"{'040000 tree' if mode == '40000' else '100644 blob'} {oid}\t{name}\n"
                for name, (mode, oid) in entries.items()
            )
            made = hash_object("tree", format_tree(entries), r.object_format)
            assert made == git("mktree", cwd=repo, input=listing)


def test_a_stale_ref_lock_left_by_a_dead_writer_is_removed_and_said(repo: Path):
    """issue 16, 8: a SIGKILLed group can leave refs/notes/gitledger.lock; under gitledger's own lock
    (which every gitledger ref writer holds) one older than a few seconds is from a dead process."""
    import os
    import time

    record(repo)
    run_json("flush", cwd=repo)
    record(repo, task="T-2")
    lock = repo / ".git" / "refs" / "notes" / "gitledger.lock"
    lock.write_text("")
    old = time.time() - 60
    os.utime(lock, (old, old))
    proc = run_gitledger("flush", "--json", cwd=repo)
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"folded": 2}
    assert "removed" in proc.stderr and "gitledger.lock" in proc.stderr
    assert not lock.exists()
    assert [e["state"] for e in run_json("list", cwd=repo)] == ["done", "done"]


def test_waiting_for_a_stopped_lock_holder_ends_with_a_clear_message(repo: Path):
    """issue 16, 8: a SIGSTOPped process holding the ledger lock does not block writers forever."""
    import signal

    with ledger_lock_held(repo) as holder:
        holder.send_signal(signal.SIGSTOP)
        proc = run_gitledger(
            "run-step", "-t", "T", "-s", "s", "--", "true", cwd=repo, env={"GITLEDGER_LOCK_TIMEOUT": "1"}
        )
        assert proc.returncode != 0 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
        assert f"held for 1 s by process {holder.pid}" in proc.stderr and "SIGSTOP" in proc.stderr
    assert run_json("run-step", "-t", "T", "-s", "s", "--", "true", cwd=repo)["status"] == "created"


def test_the_ledger_lock_waits_for_every_appender_and_names_the_one_it_waited_for(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger lock is every key stripe: it is not taken while any appender holds its key's stripe,
    and a wait that times out names that appender's process (from the kernel's lock table, not from
    ids written into lock files). Once the appenders are gone, it is taken."""
    import subprocess
    import sys

    from gitledger.core.errors import GitError
    from gitledger.git.repo import _STRIPES, _stripe

    keys = [f"key-{i}" for i in range(2)]
    assert _stripe(keys[0]) != _stripe(keys[1])
    script = (
        "import sys, time; from gitledger.git.repo import GitRepo\n"
        "with GitRepo.discover(sys.argv[1]).append_lock(sys.argv[2]):\n"
        "    print('held', flush=True); time.sleep(60)"
    )
    holders = {
        key: subprocess.Popen(
            [sys.executable, "-c", script, str(repo), key], stdout=subprocess.PIPE, text=True
        )
        for key in keys
    }
    monkeypatch.setenv("GITLEDGER_LOCK_TIMEOUT", "0.3")
    try:
        for holder in holders.values():
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        for key in sorted(keys, key=lambda k: _STRIPES.index(_stripe(k))):  # stripes are taken in order
            with GitRepo.discover(repo) as r, pytest.raises(GitError) as failed, r.lock():
                pass
            assert f"{_stripe(key)} has been held for 0.3 s by process {holders[key].pid};" in str(
                failed.value
            )
            holders[key].kill()
            holders[key].wait()
    finally:
        for holder in holders.values():
            holder.kill()
            holder.wait()
    with GitRepo.discover(repo) as r, r.lock():
        pass


def test_a_writer_holding_one_key_does_not_hold_up_other_keys(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends take the ledger lock shared and their key's stripe lock: a writer stopped in the middle
    of an append on one key delays that key only (and a fold, which needs the ledger lock alone)."""
    import signal
    import subprocess
    import sys
    import zlib

    from gitledger.core.errors import GitError
    from gitledger.git.repo import KEY_STRIPES

    held = StepKey.derive("T-held", "s")
    other = next(
        s
        for s in (StepKey.derive(f"T-{i}", "s") for i in range(100))
        if zlib.crc32(s.key.encode()) % KEY_STRIPES != zlib.crc32(held.key.encode()) % KEY_STRIPES
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from gitledger.git.repo import GitRepo\n"
            "r = GitRepo.discover(sys.argv[1])\n"
            "with r.append_lock(sys.argv[2]):\n"
            "    print('held', flush=True); time.sleep(60)",
            str(repo),
            held.key,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    monkeypatch.setenv("GITLEDGER_LOCK_TIMEOUT", "0.5")
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        holder.send_signal(signal.SIGSTOP)
        with GitRepo.discover(repo) as r:
            store = GitStore(r)
            version = store.append(Intent.of(other), {"state": "attempting", "key": other.key}, None)
            assert version is not None and store.load(other.key).version == version
            with pytest.raises(GitError, match=f"by process {holder.pid}"):
                store.append(Intent.of(held), {"state": "attempting", "key": held.key}, None)
            with pytest.raises(GitError, match=r"held for 0\.5 s"):
                store.flush()  # the fold waits for every appender
            assert store.load(held.key).version is None
            holder.kill()
            holder.wait()
            # the failed appends let go of what they had taken (the ledger lock, shared, in this
            # process and in the kernel): the fold and the append go through now
            assert store.flush() == 1
            assert store.append(Intent.of(held), {"state": "attempting", "key": held.key}, None)
    finally:
        holder.kill()
        holder.wait()


def test_appends_made_while_a_fold_runs_are_kept_and_their_versions_hold(repo: Path) -> None:
    """A fold holds only the fold lock while it writes objects and moves the refs; writers append
    meanwhile (on keys it folds, too). Their events stay in the journal, which the fold replaces by
    what followed the part it folded, and the versions they were given stay valid."""
    with GitRepo.discover(repo) as ra, GitRepo.discover(repo) as rb:
        folder, writer = GitStore(ra, "none"), GitStore(rb, "none")
        first, second = StepKey.derive("T-fold", "a"), StepKey.derive("T-fold", "b")
        v1 = folder.append(Intent.of(first), {"state": "attempting", "key": first.key, "id": "1"}, None)
        during: dict[str, str | None] = {}
        move_refs = folder.move_refs

        def racing_move_refs(*args: object, **kwargs: object) -> bool:
            # while the refs move: one more event on the key being folded, one on a new key
            during["first"] = writer.append(
                Intent.of(first), {"state": "done", "key": first.key, "id": "2"}, v1
            )
            during["second"] = writer.append(
                Intent.of(second), {"state": "attempting", "key": second.key, "id": "3"}, None
            )
            return move_refs(*args, **kwargs)  # type: ignore[arg-type]

        folder.move_refs = racing_move_refs  # type: ignore[method-assign]
        folder.journal.refresh()
        assert folder._fold(exclusive=False) == 1
        assert during["first"] is not None and during["second"] is not None
        # the fold took the journal as it was before the race; the later lines are still journaled
        writer.journal.refresh()
        assert sorted(r.key for r in writer.journal.records) == sorted([first.key, second.key])
        reader = GitStore(GitRepo.discover(repo))
        assert reader.load(first.key).version == during["first"]
        assert [e["id"] for e in reader.load(first.key).events] == ["1", "2"]
        assert reader.load(second.key).version == during["second"]
        assert writer.append(
            Intent.of(first), {"state": "info", "key": first.key, "id": "4"}, during["first"]
        )
        assert reader.flush() == 3
        assert [e["id"] for e in reader.load(first.key).events] == ["1", "2", "4"]
        assert [e["id"] for e in reader.load(second.key).events] == ["3"]
        reader.close()


def test_notes_written_with_the_key_in_every_event_still_read_the_same(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events are stored without their key (it is the annotated intent's) and get it back on reading;
    ledgers written before, with the key on every line, read as they did, and both kinds of line mix
    in one note."""
    import gitledger.git.store as gitstore
    from gitledger.core.events import encode_event

    intent = Intent.of(STEP)
    with GitRepo.discover(repo) as r:
        with monkeypatch.context() as patch:  # the format before: the whole event on every line
            patch.setattr(gitstore, "stored_line", lambda key, event: encode_event(event).rstrip(b"\n"))
            old = GitStore(r)
            v1 = old.append(intent, {"state": "attempting", "key": STEP.key, "id": "a"}, None)
            assert old.flush() == 1
        store = GitStore(GitRepo.discover(repo))
        first = store.load(STEP.key)
        assert first.version == v1 and first.events[0]["key"] == STEP.key
        v2 = store.append(intent, {"state": "done", "key": STEP.key, "id": "b", "outcome": "created"}, v1)
        assert v2 is not None and store.flush() == 1
        note = git("notes", "--ref=gitledger", "show", store.intent_oid(intent), cwd=repo).splitlines()
        assert [json.loads(line).get("key") for line in note] == [STEP.key, None]
        entry = GitStore(GitRepo.discover(repo)).load(intent)
        assert entry.version == v2 and entry.folded.state == "done"
        assert [{k: v for k, v in e.items() if k != "_line"} for e in entry.events] == [
            {"id": "a", "key": STEP.key, "state": "attempting"},
            {"id": "b", "key": STEP.key, "outcome": "created", "state": "done"},
        ]
        assert [list(e) for e in entry.events] == [
            ["id", "key", "state", "_line"],
            ["id", "key", "outcome", "state", "_line"],
        ]


@pytest.mark.parametrize(
    "task", ["T-1", 'quote " and \\ backslash', "é ü 日本", "tab\there", "\x00\x1f\u2028"]
)
def test_the_intent_record_is_the_json_it_always_was(task: str) -> None:
    """An intent's object id is the key's identity in every clone: the record, now built directly,
    must stay byte for byte what ``json.dumps`` gave."""
    from gitledger.git.store import intent_bytes

    intent = Intent(f"{task}.step.abc", task, "step\n", "d" * 64)
    record = {"digest": intent.digest, "key": intent.key, "step": intent.step, "task": intent.task, "v": 1}
    expected = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    assert intent_bytes(intent) == expected


def test_fanout_levels_spliced_in_place_are_the_trees_git_writes(repo: Path) -> None:
    """A fold splices new subtrees into the raw bytes of each fan-out level (inserting at the front,
    the middle and the end, and replacing). Every tree it wrote is the tree git's own mktree writes
    from the same listing, git fsck finds nothing, and every note is where git notes finds it."""
    with GitRepo.discover(repo) as r:
        store = GitStore(r, "none", fold_events=40)
        intents = [Intent.of(StepKey.derive(f"T-{i}", "push")) for i in range(400)]
        for i, intent in enumerate(intents):  # 800 events: about 20 folds over growing levels
            version = store.append(intent, {"state": "attempting", "key": intent.key, "n": i}, None)
            assert store.append(intent, {"state": "done", "key": intent.key}, version) is not None
        store.flush()
        notes = git("rev-list", NOTES_REF, cwd=repo).split()
        assert len(notes) > 10
        # fsck --strict checks the order of every tree of every fold (unsorted or duplicate entries
        # are errors); mktree rebuilds a sample from their listings
        listing = [line.split() for line in git("ls-tree", "-r", "-t", NOTES_REF, cwd=repo).splitlines()]
        trees = [oid for _, kind, oid, _ in listing if kind == "tree"]
        for oid in [git("rev-parse", f"{NOTES_REF}^{{tree}}", cwd=repo), *trees[:: max(1, len(trees) // 12)]]:
            listing = git("ls-tree", oid, cwd=repo) + "\n"
            assert git("mktree", cwd=repo, input=listing) == oid
        git("fsck", "--strict", "--no-dangling", cwd=repo)
        listed = {line.split()[1] for line in git("notes", "--ref=gitledger", "list", cwd=repo).splitlines()}
        assert listed == {store.intent_oid(intent) for intent in intents}
        assert all(store.load(intent).folded.state == "done" for intent in intents)


WRITER = """
import json, sys, time
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult, StepRunner
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore
store = GitStore(GitRepo.discover(sys.argv[1]), "fsync")
runner = StepRunner(store)
while time.time() < float(sys.argv[3]):
    time.sleep(0.001)
for i in range(40):
    step = StepKey.derive("w" + sys.argv[2], "s%d" % i)
    assert runner.run(step, [LedgerCheck()], lambda: ActionResult(ok=True)).status == "created"
store.close()
"""


def test_concurrent_durable_writers_lose_nothing(repo: Path) -> None:
    """Six processes record fresh steps at once with durability fsync: every entry is there, done."""
    import subprocess
    import sys
    import time

    start = time.time() + 1.5
    argv = [sys.executable, "-c", WRITER, str(repo)]
    procs = [subprocess.Popen([*argv, f"{w}", f"{start}"], stdout=subprocess.PIPE) for w in range(6)]
    for proc in procs:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    entries = run_json("list", "--json", cwd=repo)
    assert len(entries) == 6 * 40
    assert all(e["state"] == "done" for e in entries)


@pytest.mark.parametrize("auto", ["on", "off"])
def test_folds_ask_git_to_consolidate_their_packs(repo: Path, auto: str) -> None:
    """Every fold leaves a pack; past 50 the store asks 'git gc --auto', which packs them into one
    (in the background) unless the user turned automatic gc off. Nothing is lost either way."""
    import time

    if auto == "off":
        git("config", "gc.auto", "0", cwd=repo)
    pack_dir = repo / ".git" / "objects" / "pack"
    with GitRepo.discover(repo) as r:
        store = GitStore(r, "none", fold_events=2)
        intents = [Intent.of(StepKey.derive(f"T-{i}", "push")) for i in range(60)]
        for intent in intents:  # a fold per step: 60 packs
            version = store.append(intent, {"state": "attempting", "key": intent.key}, None)
            assert store.append(intent, {"state": "done", "key": intent.key}, version) is not None
        assert store._gc is not None  # asked once, past 50 packs
        assert store._gc.wait(timeout=60) == 0
        deadline = time.monotonic() + 60
        while auto == "on" and len(list(pack_dir.glob("*.pack"))) > 12 and time.monotonic() < deadline:
            time.sleep(0.1)  # gc.autoDetach: the packing goes on in the background
        while (repo / ".git" / "gc.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        packs = len(list(pack_dir.glob("*.pack")))
        # packed into one at the 51st fold; the folds after it left one pack each
        assert packs <= 12 if auto == "on" else packs == 60
        reader = GitStore(r, "none")
        assert all(reader.load(intent).folded.state == "done" for intent in intents)
    git("fsck", "--no-dangling", cwd=repo)


def test_a_fold_that_fails_after_an_append_does_not_fail_the_append(
    repo: Path, capsys: pytest.CaptureFixture[str]
):
    """The fold an append starts once the journal is full is housekeeping: the event is recorded and
    synced before it. When the fold fails (here the intents ref was made to point at a blob), the
    append still returns its version, says what failed, and the event is in the ledger."""
    with GitRepo.discover(repo) as r:
        store = GitStore(r, fold_events=2)
        first = StepKey.derive("T-1", "first")
        assert store.append(Intent.of(first), {"state": "attempting", "key": first.key}, None) is not None
        store.flush()
        blob = git("hash-object", "-w", "--stdin", cwd=repo, input="not a commit\n").strip()
        git("update-ref", INTENTS_REF, blob, cwd=repo)
        intent = Intent.of(STEP)
        v1 = store.append(intent, {"state": "attempting", "key": STEP.key}, None)
        v2 = store.append(intent, {"state": "done", "key": STEP.key, "outcome": "created"}, v1)  # fold due
        assert v1 is not None and v2 is not None
        assert "the event was recorded, but folding the ledger journal failed" in capsys.readouterr().err
        entry = store.load(intent)
        assert entry.version == v2 and entry.folded.state == "done"


def test_the_version_an_append_returns_is_the_one_a_load_reports_beside_a_damaged_line(repo: Path):
    """A key whose journal holds a damaged line (followed by good lines: damage, not a torn write):
    the version an append returns is the one a load then reports, so a compare-and-swap against it
    succeeds."""
    with GitRepo.discover(repo) as r:
        store = GitStore(r)
        intent = Intent.of(STEP)
        v1 = store.append(intent, {"state": "attempting", "key": STEP.key}, None)
        other = StepKey.derive("T-1", "other")
        assert store.append(Intent.of(other), {"state": "attempting", "key": other.key}, None) is not None
        path = r.common_dir / "gitledger.journal"
        data = bytearray(path.read_bytes())
        data[data.index(b'"attempting"')] ^= 0x01  # the first line: STEP's claim
        path.write_bytes(bytes(data))
    with GitRepo.discover(repo) as r:
        store = GitStore(r)
        before = store.load(intent)
        assert before.bad_lines and before.version != v1
        v2 = store.append(intent, {"state": "info", "key": STEP.key, "note": "x"}, before.version)
        assert v2 is not None and store.load(intent).version == v2
        assert store.append(intent, {"state": "info", "key": STEP.key, "note": "y"}, v2) is not None


def test_an_alarm_that_rings_just_as_the_lock_is_taken_does_not_escape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A blocking wait for a lock is ended by a one-shot SIGALRM at its deadline. An alarm that rings
    just after the lock was taken (here: while the timer is being disarmed) must not raise out of the
    wait: the lock is held, and the wait says so."""
    import fcntl
    import os
    import signal

    from gitledger.git import repo as repo_module

    path = tmp_path / "lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    other = os.open(path, os.O_RDWR)
    real = signal.setitimer

    def setitimer(which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        if seconds == 0:  # being disarmed: the alarm rings now
            handler = signal.getsignal(signal.SIGALRM)
            assert callable(handler)
            handler(signal.SIGALRM, None)
        return real(which, seconds, interval)

    monkeypatch.setattr(signal, "setitimer", setitimer)
    try:
        assert repo_module.wait_for_flock(fd, 5.0) is True
        with pytest.raises(BlockingIOError):  # this descriptor holds it
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
        os.close(other)


def test_damaged_lines_of_a_key_without_an_intent_are_set_aside_once(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    """A damaged journal line naming a key that has no intent anywhere folds into no note: the fold
    keeps it in ``gitledger.journal.torn`` and says so, once, even when the fold has to try again
    (here its first compare-and-swap of the refs loses)."""
    with GitRepo.discover(repo) as r:
        store = GitStore(r)
        intent = Intent.of(STEP)
        assert store.append(intent, {"state": "attempting", "key": STEP.key}, None) is not None
        path = r.common_dir / "gitledger.journal"
        lines = path.read_bytes().partition(b"\0")[0]
        damaged = b"00000000 T-9.nobody {}\t{}"
        path.write_bytes(damaged + b"\n" + lines)  # damage followed by a good line
    with GitRepo.discover(repo) as r:
        store = GitStore(r)
        real = store.move_refs
        calls = []

        def move_refs(*args: object, **kwargs: object) -> bool:
            calls.append(1)
            return False if len(calls) == 1 else real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "move_refs", move_refs)
        assert store.flush() == 1 and len(calls) == 2
        kept = (r.common_dir / "gitledger.journal.torn").read_bytes()
        assert kept == b"#damaged-journal-line " + damaged.replace(b"\t", b" ") + b"\n"
        assert capsys.readouterr().err.count("a key without an intent") == 1
        assert store.load(intent).folded.state == "attempting"


def test_a_forked_child_takes_the_locks_as_a_process_of_its_own(repo: Path, monkeypatch) -> None:
    """The lock descriptors are per process (the pid is kept without a system call, updated at fork):
    a child forked while its parent holds a key's lock waits for the parent like any other process,
    and names the parent when its wait ends; it does not share the parent's lock."""
    import os

    from gitledger.git.repo import _stripe

    monkeypatch.setenv("GITLEDGER_LOCK_TIMEOUT", "0.3")
    r = GitRepo.discover(repo)
    with r.append_lock("one-key"):
        holder = r.common_dir / _stripe("one-key")
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through the pipe
            message = "taken"
            try:
                with r.append_lock("one-key"):  # the parent's GitRepo, its descriptors cached
                    pass
            except Exception as exc:
                message = str(exc)
            os.write(write, message.encode())
            os._exit(0)
        os.close(write)
        _, status = os.waitpid(child, 0)
        message = os.read(read, 4096).decode()
        os.close(read)
    assert status == 0
    assert f"{holder} has been held for 0.3 s by process {os.getpid()}" in message


def test_a_write_in_flight_is_waited_for_not_repaired(repo: Path, monkeypatch) -> None:
    """Another process has written half of its record and still holds the journal's lock (a write in
    flight, not a torn one). An appender that reads the half record waits for that write to end and
    appends after it: no repair (which would take the ledger lock exclusively, stopping every writer),
    no notice, both records kept."""
    import subprocess
    import sys
    import threading

    from gitledger.git import journal as journal_module

    with GitRepo.discover(repo) as r:
        store = GitStore(r)
        first = StepKey.derive("T-1", "first")
        assert store.append(Intent.of(first), {"state": "attempting", "key": first.key}, None)
        writer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import os, sys, fcntl\n"
                "from gitledger.git.journal import Journal\nfrom gitledger.git.journal_format import encode\n"
                "from gitledger.git.repo import GitRepo\n"
                "GitRepo.discover(sys.argv[2]).append_lock('other').__enter__()  # as every appender\n"
                "j = Journal(sys.argv[1]); j.refresh(); fd = j._append_fd(); j._lock_place(fd)\n"
                'line = b\'{"state":"attempting","x":"\' + b\'y\' * 300 + b\'"}\'\n'
                "record = encode('other', b'{}', line)\n"
                "at = j._place(fd, len(record)); os.pwrite(fd, record[:100], at)\n"
                "print('half', flush=True); sys.stdin.readline()\n"
                "os.pwrite(fd, record, at); fcntl.flock(fd, fcntl.LOCK_UN); print('done', flush=True)\n",
                store.journal.path,
                str(repo),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert writer.stdin is not None and writer.stdout is not None
        try:
            assert writer.stdout.readline() == "half\n"
            repairs: list[object] = []
            real = journal_module.Journal.repair
            monkeypatch.setattr(
                journal_module.Journal, "repair", lambda self: repairs.append(1) or real(self)
            )
            results: list[str | None] = []
            second = StepKey.derive("T-1", "second")
            appender = threading.Thread(
                target=lambda: results.append(
                    store.append(Intent.of(second), {"state": "attempting", "key": second.key}, None)
                )
            )
            appender.start()
            appender.join(0.5)
            assert appender.is_alive()  # it waits for the write in flight
            writer.stdin.write("go\n")
            writer.stdin.flush()
            assert writer.stdout.readline() == "done\n"
            appender.join(30)
            assert not appender.is_alive() and results and results[0] is not None
        finally:
            writer.kill()
            writer.wait()
        assert repairs == [] and store.notices == []
        assert not Path(store.journal.torn_path).exists()
        store.journal.refresh()
        assert store.journal.key_names() == sorted(["other", first.key, second.key])
        assert store.journal.tail == b"" and store.journal.damaged == []


def test_a_new_process_decides_on_a_large_journal_it_has_not_parsed(repo: Path) -> None:
    """A store opened on a journal of hundreds of steps parses none of it up front (it searches it for
    each key it is asked about): its loads, versions, compare-and-swaps, listing and fold are those
    of a store that parsed it all, and another store's appends meanwhile are seen."""
    from gitledger.git import journal as journal_module

    intents = [Intent.of(StepKey.derive(f"T-{i}", "push")) for i in range(300)]
    with GitRepo.discover(repo) as r:
        writer = GitStore(r, "none", fold_events=100_000)
        versions = {}
        for intent in intents:
            version = writer.append(intent, {"state": "attempting", "key": intent.key}, None)
            versions[intent.key] = writer.append(intent, {"state": "done", "key": intent.key}, version)
        assert writer.journal.size > journal_module.LAZY_MIN
        store = GitStore(r, "none", fold_events=100_000)
        entry = store.load(intents[7])
        assert store.journal.records == []  # nothing parsed: the key's lines were searched for
        assert entry.version == versions[intents[7].key] and entry.folded.state == "done"
        assert store.load(intents[8].key).folded.state == "done"  # by key: its intent from the journal
        assert store.append(intents[7], {"state": "done", "key": intents[7].key}, "0" * 40) is None  # stale
        late = writer.append(intents[9], {"state": "note", "key": intents[9].key}, versions[intents[9].key])
        assert store.load(intents[9]).version == late
        assert store.append(intents[9], {"state": "note", "key": intents[9].key}, late) is not None
        listed = {entry.key: entry.folded.state for entry in store.entries()}
        assert len(listed) == 300 and set(listed.values()) == {"done"}
        assert store.flush() == 602  # 300 steps, then one note of each store
        assert all(GitStore(r).load(intent).folded.state == "done" for intent in intents)
