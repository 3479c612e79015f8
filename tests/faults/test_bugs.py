"""Regression tests for bugs the reliability suite found (one test per fix)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitledger.core.errors import UsageError
from gitledger.core.keys import Content, StepKey
from testing.repos import gitledger_argv

NOT_UTF8 = os.fsdecode(b"issue-\xff\xfe")  # what Python makes of argv bytes that are not UTF-8


def run_bytes(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(gitledger_argv(*args), cwd=cwd, capture_output=True, timeout=60, check=False)


@pytest.mark.parametrize("field", ["--task", "--step"])
def test_a_name_that_is_not_utf8_is_a_usage_error_not_a_traceback(repo: Path, field: str) -> None:
    args = {"--task": "t", "--step": "s", field: NOT_UTF8}
    argv = ["key", *[x for pair in args.items() for x in pair]]
    proc = run_bytes(argv, repo)
    assert proc.returncode == 2, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert proc.stderr.count(b"\n") == 1 and b"UTF-8" in proc.stderr
    with pytest.raises(UsageError):
        StepKey.derive(NOT_UTF8, "s")


def test_content_that_is_not_utf8_hashes_its_bytes_like_a_file(repo: Path, tmp_path: Path) -> None:
    raw = b"caf\xe9 \xff"
    (tmp_path / "c").write_bytes(raw)
    text = run_bytes(["key", "-t", "t", "-s", "s", "--content", os.fsdecode(raw), "--json"], repo)
    file = run_bytes(["key", "-t", "t", "-s", "s", "--content-file", str(tmp_path / "c"), "--json"], repo)
    assert text.returncode == 0, text.stderr
    assert text.stdout == file.stdout
    assert Content.text(os.fsdecode(raw)) == Content.raw(raw)


def test_an_argument_that_is_not_utf8_is_a_usage_error(repo: Path) -> None:
    proc = run_bytes(["key", "-t", "t", "-s", "s", "--arg", f"x={NOT_UTF8}"], repo)
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr, proc.stderr


BAD_BRANCH_PREFIXES = ["a..b/", "x.lock/", ".hidden/", "/abs/", "a//b/", "-opt/", "dir/.x", "p" * 101 + "/"]


@pytest.mark.parametrize("prefix", BAD_BRANCH_PREFIXES)
def test_a_branch_prefix_that_makes_invalid_branch_names_is_refused(repo: Path, prefix: str) -> None:
    """Before the fix 'x.lock/' was accepted and every branch step failed inside git."""
    (repo / ".gitledger.yml").write_text(f'prefixes:\n  branch: "{prefix}"\n')
    proc = subprocess.run(
        gitledger_argv("run-step", "-t", "t", "-s", "s", "-c", "branch", "--", "true"),
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and ".gitledger.yml line 2" in proc.stderr, proc.stderr


@pytest.mark.parametrize("prefix", ["gitledger/", "agent/", "a.b/", "x-", "bots/v1.2/", ""])
def test_good_branch_prefixes_still_pass_git(repo: Path, prefix: str) -> None:
    from gitledger.core.keys import Names

    branch = StepKey.derive("t", "s", names=Names(branch_prefix=prefix)).branch
    proc = subprocess.run(["git", "check-ref-format", "--branch", branch], capture_output=True, check=False)
    assert proc.returncode == 0, branch


def test_a_remote_that_looks_like_an_option_cannot_run_a_program(repo: Path, tmp_path: Path) -> None:
    """'branch:--upload-pack' used to reach 'git ls-remote' as an option: git then ran the path that
    followed (the key's branch ref) as a program, found relative to the work tree. A claim forged in
    the ledger carried the spec into 'gitledger reconcile' too."""
    from testing.repos import git, init_repo
    from tests.faults.forge import PAST, forge

    init_repo(tmp_path / "origin.git", bare=True)
    git("remote", "add", "origin", str(tmp_path / "origin.git"), cwd=repo)
    step = StepKey.derive("t", "s")
    sentinel = tmp_path / "PWNED"
    payload = repo / "refs" / "heads" / step.branch
    payload.parent.mkdir(parents=True)
    payload.write_text(f"#!/bin/sh\ntouch {sentinel}\nexit 1\n")
    payload.chmod(0o755)

    spec = "branch:--upload-pack"
    direct = subprocess.run(
        gitledger_argv("run-step", "-t", "t", "-s", "s", "-c", spec, "--", "true"),
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert direct.returncode == 2 and "unknown check spec" in direct.stderr, direct.stderr

    forge(repo, step, "attempting", lease_until=PAST, checks=[spec])
    reconcile = subprocess.run(
        gitledger_argv("reconcile", "--json"),
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert reconcile.returncode == 0, reconcile.stderr
    assert not sentinel.exists()
    # the invalid spec was dropped: nothing left that can query reality, so it stays unconfirmed
    assert '"unconfirmed"' in reconcile.stdout


def test_a_ledger_ref_pointing_at_a_missing_object_is_reported_not_read_as_empty(
    repo: Path, tmp_path: Path
) -> None:
    """Before the fix 'list' showed every entry as 'none' (exit 0) and run-step failed after 100 tries
    with "other writers keep moving refs/notes/gitledger"."""
    from testing.repos import git, run_gitledger

    count = tmp_path / "count"
    step = ["run-step", "-t", "t", "-s", "s", "--", "sh", "-c", f'echo x >> "{count}"']
    assert run_gitledger(*step, cwd=repo).returncode == 0
    missing = "1234567890" * 4
    git("update-ref", "--no-deref", "-d", "refs/notes/gitledger", cwd=repo)
    (repo / ".git" / "refs" / "notes" / "gitledger").write_text(missing + "\n")
    for args in (step, ["list"]):
        proc = run_gitledger(*args, cwd=repo)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.count("\n") == 1 and "missing from the repository" in proc.stderr, proc.stderr
    assert count.read_text() == "x\n"


def replace_in_tree_ref(repo: Path, ref: str, path: str, blob: str) -> None:
    """Point ``path`` in the tree of commit ``ref`` at ``blob`` and move ``ref`` (git plumbing only)."""
    from testing.repos import git

    index = repo.parent / "scratch-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", ref], cwd=repo, env=env, check=True)
    subprocess.run(
        ["git", "update-index", "--cacheinfo", f"100644,{blob},{path}"], cwd=repo, env=env, check=True
    )
    tree = subprocess.run(
        ["git", "write-tree"], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    commit = git("commit-tree", tree.stdout.strip(), "-p", ref, "-m", "damage", cwd=repo)
    git("update-ref", ref, commit, cwd=repo)
    index.unlink()


def test_a_damaged_intent_record_is_one_corrupt_row_not_a_traceback(repo: Path) -> None:
    """Before the fix 'list' and 'reconcile' died with a JSONDecodeError traceback."""
    from testing.repos import git, run_gitledger

    for task in ("a", "b"):
        assert run_gitledger("run-step", "-t", task, "-s", "s", "--", "true", cwd=repo).returncode == 0
    damaged = StepKey.derive("b", "s")
    path = next(
        p
        for p in git("ls-tree", "-r", "--name-only", "refs/gitledger/intents", cwd=repo).splitlines()
        if p.replace("/", "") == damaged.short_digest
    )
    junk = git("hash-object", "-w", "--stdin", cwd=repo, input="not an intent\n")
    replace_in_tree_ref(repo, "refs/gitledger/intents", path, junk)

    listed = run_gitledger("list", "--json", cwd=repo)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    rows = {row["key"]: row["state"] for row in __import__("json").loads(listed.stdout)}
    damaged_row = f"damaged-intent:{damaged.short_digest}"
    assert rows == {StepKey.derive("a", "s").key: "done", damaged_row: "corrupt"}
    reconcile = run_gitledger("reconcile", cwd=repo)
    assert reconcile.returncode == 0, reconcile.stderr
    # the note itself is intact: the step is still known to be done, and the next write heals the intent
    again = run_gitledger("run-step", "-t", "b", "-s", "s", "--json", "--", "false", cwd=repo)
    assert again.returncode == 0 and '"skipped"' in again.stdout, again.stderr


@pytest.mark.parametrize("damage", ["torn", "header-only", "garbage"])
def test_an_unreadable_note_object_is_one_corrupt_entry(repo: Path, tmp_path: Path, damage: str) -> None:
    """Before the fix a torn note object read as an *empty* entry ('list' said 'none': a run-step could
    have acted again), and an unreadable one made 'list' and 'reconcile' fail for every key."""
    import json

    from testing.repos import git, run_gitledger

    for task in ("a", "b"):
        assert run_gitledger("run-step", "-t", task, "-s", "s", "--", "true", cwd=repo).returncode == 0
    damaged = StepKey.derive("b", "s").key
    intent = json.loads(run_gitledger("show", damaged, "--json", cwd=repo).stdout)["intent_object"]
    note = git("notes", "--ref=gitledger", "list", intent, cwd=repo)
    obj = repo / ".git" / "objects" / note[:2] / note[2:]
    data = obj.read_bytes()
    obj.chmod(0o644)
    obj.write_bytes(
        {"torn": data[: len(data) // 2], "header-only": data[:20], "garbage": os.urandom(len(data))}[damage]
    )

    listed = run_gitledger("list", "--json", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    states = {row["key"]: row["state"] for row in json.loads(listed.stdout)}
    assert states == {StepKey.derive("a", "s").key: "done", damaged: "corrupt"}
    assert run_gitledger("reconcile", cwd=repo).returncode == 0
    sentinel = tmp_path / "ran"
    blocked = run_gitledger("run-step", "-t", "b", "-s", "s", "--", "touch", str(sentinel), cwd=repo)
    assert blocked.returncode == 1 and blocked.stderr.count("\n") == 1 and "corrupt" in blocked.stderr
    assert not sentinel.exists()
    assert run_gitledger("resolve", damaged, "--done", cwd=repo).returncode == 0
    after = run_gitledger("run-step", "-t", "b", "-s", "s", "--json", "--", "touch", str(sentinel), cwd=repo)
    assert '"skipped"' in after.stdout and not sentinel.exists(), after.stderr


@pytest.mark.parametrize("how", ["--lease=inf", "--lease=1e300", "config:.inf", "config:1.0e+300"])
def test_an_infinite_or_huge_lease_is_a_usage_error(repo: Path, tmp_path: Path, how: str) -> None:
    """Before the fix the claim's deadline overflowed: an OverflowError traceback after the checks ran."""
    from testing.repos import run_gitledger

    options = [how] if how.startswith("--") else []
    if how.startswith("config:"):
        (repo / ".gitledger.yml").write_text(f"lease: {how.removeprefix('config:')}\n")
    sentinel = tmp_path / "ran"
    proc = run_gitledger("run-step", "-t", "t", "-s", "s", *options, "--", "touch", str(sentinel), cwd=repo)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "lease" in proc.stderr and not sentinel.exists()


def test_text_from_a_forged_ledger_cannot_drive_the_terminal(repo: Path) -> None:
    """Before the fix list/show/log printed ledger text raw: escape sequences (clear screen, set the
    clipboard with OSC 52) and newlines written by anyone with push access reached the terminal, and
    an in_progress message with a forged host broke the one-line contract."""
    from testing.repos import run_gitledger
    from tests.faults.forge import FAR_FUTURE, foreign_owner, forge

    evil = "\x1b[2J\x1b]52;c;cHduZWQ=\x07\nfake line\x9b31m"
    step = StepKey.derive("t", "s")
    owner = {**foreign_owner(), "host": f"host{evil}"}
    forge(repo, step, "attempting", lease_until=FAR_FUTURE, owner=owner, message=evil, ref=evil)
    forge(repo, step, "info", message=evil, task=f"t{evil}")
    outputs = [run_gitledger(*args, cwd=repo) for args in (["list"], ["show", step.key], ["log"])]
    stalled = run_gitledger("run-step", "-t", "t", "-s", "s", "--", "true", cwd=repo)
    assert stalled.returncode == 75 and stalled.stderr.count("\n") == 1, stalled.stderr
    for proc in [*outputs, stalled]:
        text = proc.stdout + proc.stderr
        assert proc.returncode in (0, 75) and not any(c in text for c in "\x1b\x07\x9b"), text
    for proc in [*outputs[1:], stalled]:
        assert "\\x1b" in proc.stdout + proc.stderr  # shown, escaped


def test_an_explicit_key_that_is_not_utf8_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        Content.explicit_key(NOT_UTF8)


def test_a_ledger_ref_created_between_two_looks_is_read_not_reported_corrupt(repo: Path) -> None:
    """My own regression from the missing-object fix, found by the full test run under load: a reader
    whose 'git cat-file' asked for the ledger ref just before another process created it, and whose
    'git rev-parse' then found it, reported the fresh ledger as damaged. The timing is reproduced by
    letting a second process create the ref after the reader's first look."""
    from gitledger.git.repo import GitRepo
    from gitledger.git.store import NOTES_REF, GitStore
    from testing.repos import run_gitledger

    class LateRef(GitRepo):
        """Creates the ledger (in another process) right after the first lookup of the ref misses."""

        created = False

        def read(self, name: str) -> tuple[str, str, bytes] | None:
            found = super().read(name)
            if name == NOTES_REF and found is None and not self.created:
                self.created = True
                assert (
                    run_gitledger("run-step", "-t", "other", "-s", "s", "--", "true", cwd=repo).returncode
                    == 0
                )
            return found

    base = GitRepo.discover(repo)
    late = LateRef(base.git_dir, base.common_dir, base.objects_dir, base.worktree, base.object_format)
    try:
        tip = GitStore(late).tip(NOTES_REF)
    finally:
        late.close()
    assert late.created and tip.commit is not None


def test_an_owner_that_finishes_between_the_read_and_the_liveness_check_is_not_unconfirmed() -> None:
    """Found while analysing a flaky sync test under load: a run read the entry (a claim), the owner
    then recorded done and exited, and the run, finding the owner gone, answered 'unconfirmed' (exit 3)
    from its stale read. Reproduced by letting the owner finish right after the run's read."""
    from gitledger.core.checks import LedgerCheck
    from gitledger.core.events import Entry
    from gitledger.core.protocol import ActionResult, StepRunner, reconcile_entry
    from gitledger.core.store import ANY_VERSION, Intent, MemoryStore
    from tests.faults.forge import PAST, foreign_owner

    step = StepKey.derive("t", "s")
    intent = Intent.of(step)
    base = {"v": 1, "key": step.key, "task": "t", "step": "s", "owner": foreign_owner()}

    class FinishingOwner(MemoryStore):
        """The claim's owner records done right after the first read of the entry."""

        finished = False

        def load(self, key: str | Intent) -> Entry:
            entry = super().load(key)
            if not self.finished:
                self.finished = True
                self.append(intent, {**base, "id": "d1", "at": "2020-01-01T00:00:01.000Z", "state": "done",
                                     "outcome": "created", "ref": "the-ref"}, ANY_VERSION)  # fmt: skip
            return entry

    for how in ("run-step", "reconcile"):
        store = FinishingOwner()
        claim = {**base, "id": "c1", "at": "2020-01-01T00:00:00.000Z", "state": "attempting"}
        MemoryStore.append(store, intent, {**claim, "lease_until": PAST}, ANY_VERSION)
        runner = StepRunner(store)
        if how == "run-step":
            result = runner.run(step, [LedgerCheck()], lambda: ActionResult(ok=True))
            assert (result.status, result.ref) == ("skipped", "the-ref")
        else:
            seen = store.load(intent)  # the read reconcile works from; the owner finishes right after
            assert reconcile_entry(runner, step, seen, [LedgerCheck()])[0] == "changed"
