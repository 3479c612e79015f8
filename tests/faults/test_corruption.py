"""A corpus of damaged ledgers: each is reported in one line (exit 1), never a traceback; a damaged
entry blocks only its own step (which does not run), every other key keeps working, and ``resolve``
repairs it. Damage to the refs themselves stops every command with a one-line message.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gitledger.core.keys import StepKey
from testing.repos import git, run_gitledger
from tests.faults.tally import TALLY

NOTES = "refs/notes/gitledger"
INTENTS = "refs/gitledger/intents"
A = StepKey.derive("a", "s")
B = StepKey.derive("b", "s")


def note_of(repo: Path, step: StepKey) -> tuple[str, str]:
    """(intent object, note blob) of a key."""
    intent = json.loads(run_gitledger("show", step.key, "--json", cwd=repo).stdout)["intent_object"]
    return intent, git("notes", "--ref=gitledger", "list", intent, cwd=repo)


def set_note(repo: Path, step: StepKey, data: bytes) -> None:
    intent, _ = note_of(repo, step)
    path = repo.parent / "note-data"
    path.write_bytes(data)
    git("notes", "--ref=gitledger", "add", "-f", "--allow-empty", "-F", str(path), intent, cwd=repo)


def all_loose(repo: Path) -> None:
    """Every object as a loose file (gitledger folds into packs; these tests damage object files)."""
    pack_dir = repo / ".git" / "objects" / "pack"
    aside = repo.parent / "packs-aside"
    aside.mkdir(exist_ok=True)
    for path in list(pack_dir.iterdir()):
        path.rename(aside / path.name)
    for pack in aside.glob("*.pack"):
        with pack.open("rb") as fh:
            subprocess.run(["git", "unpack-objects", "-q"], cwd=repo, stdin=fh, check=True)


def damage_object(repo: Path, oid: str, how: str) -> None:
    all_loose(repo)
    obj = repo / ".git" / "objects" / oid[:2] / oid[2:]
    data = obj.read_bytes()
    obj.chmod(0o644)
    obj.write_bytes(data[: len(data) // 2] if how == "torn" else os.urandom(len(data)))


def intent_path(repo: Path, step: StepKey) -> str:
    listed = git("ls-tree", "-r", "--name-only", INTENTS, cwd=repo).splitlines()
    return next(p for p in listed if p.replace("/", "") == step.short_digest)


def put_in_tree(repo: Path, ref: str, path: str, blob: str) -> None:
    index = repo.parent / "scratch-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    for args in (["read-tree", ref], ["update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    tree = subprocess.run(
        ["git", "write-tree"], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    git(
        "update-ref",
        ref,
        git("commit-tree", tree.stdout.strip(), "-p", ref, "-m", "damage", cwd=repo),
        cwd=repo,
    )
    index.unlink()


def blob(repo: Path, text: str) -> str:
    return git("hash-object", "-w", "--stdin", cwd=repo, input=text)


def point_ref(repo: Path, ref: str, target: str) -> None:
    git("update-ref", "--no-deref", "-d", ref, cwd=repo)
    path = repo / ".git" / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(target + "\n")


Damage = Callable[[Path], None]
# name -> (damage, scope): "entry" damages B only; "global" damages a ledger ref itself
CORPUS: dict[str, tuple[Damage, str]] = {
    "bad-json-line": (lambda r: set_note(r, B, _note(r) + b"{not json\n"), "entry"),
    "truncated-json-line": (lambda r: set_note(r, B, _note(r)[:-9]), "entry"),
    "not-an-event": (lambda r: set_note(r, B, _note(r) + b'{"state": "exploded"}\n'), "entry"),
    "json-array-line": (lambda r: set_note(r, B, _note(r) + b"[1, 2, 3]\n"), "entry"),
    "binary-note": (lambda r: set_note(r, B, os.urandom(300)), "entry"),
    "invalid-utf8-line": (lambda r: set_note(r, B, _note(r) + b'{"state": "done\xff"}\n'), "entry"),
    "empty-note": (lambda r: set_note(r, B, b""), "entry"),
    "torn-note-object": (lambda r: damage_object(r, note_of(r, B)[1], "torn"), "entry"),
    "garbage-note-object": (lambda r: damage_object(r, note_of(r, B)[1], "garbage"), "entry"),
    "damaged-intent-record": (lambda r: put_in_tree(r, INTENTS, intent_path(r, B), blob(r, "{}")), "entry"),
    "torn-intent-object": (lambda r: damage_object(r, note_of(r, B)[0], "torn"), "entry"),
    "junk-file-in-notes-tree": (lambda r: put_in_tree(r, NOTES, "README", blob(r, "hi")), "none"),
    "notes-ref-to-a-blob": (lambda r: point_ref(r, NOTES, blob(r, "x")), "global"),
    "notes-ref-to-a-tree": (lambda r: point_ref(r, NOTES, git("rev-parse", "HEAD^{tree}", cwd=r)), "global"),
    "notes-ref-to-a-missing-object": (lambda r: point_ref(r, NOTES, "ab" * 20), "global"),
    # by hand: never read as an empty ledger (done steps ran again), never written through to a branch
    "notes-ref-to-a-project-commit": (
        lambda r: point_ref(r, NOTES, git("rev-parse", "HEAD", cwd=r)),
        "global",
    ),
    "notes-ref-symbolic-to-a-branch": (
        lambda r: git("symbolic-ref", NOTES, "refs/heads/main", cwd=r),
        "global",
    ),
    "intents-ref-to-a-blob": (lambda r: point_ref(r, INTENTS, blob(r, "x")), "global-list"),
    "torn-notes-commit": (lambda r: damage_object(r, git("rev-parse", NOTES, cwd=r), "torn"), "global"),
    # a power cut after a ref update that git did not fsync (issue 16, 8c): never an empty ledger
    "notes-ref-empty-file": (lambda r: point_ref(r, NOTES, ""), "global"),
    "intents-ref-empty-file": (lambda r: point_ref(r, INTENTS, ""), "global-list"),
}


def _note(repo: Path) -> bytes:
    _intent, oid = note_of(repo, B)
    return subprocess.run(["git", "cat-file", "blob", oid], cwd=repo, capture_output=True, check=True).stdout


def step(repo: Path, task: str, sentinel: Path) -> subprocess.CompletedProcess[str]:
    return run_gitledger("run-step", "-t", task, "-s", "s", "--json", "--", "touch", str(sentinel), cwd=repo)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> bool:
    return proc.returncode == 1 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("gitledger: ")


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_damaged_ledger_is_reported_in_one_line_and_blocks_only_its_step(
    repo: Path, tmp_path: Path, name: str
) -> None:
    damage, scope = CORPUS[name]
    for task in ("a", "b"):
        assert step(repo, task, tmp_path / f"first-{task}").returncode == 0
    assert run_gitledger("flush", cwd=repo).returncode == 0  # damage what git shows
    damage(repo)
    TALLY.add("inputs.bad")
    ran_a, ran_b = tmp_path / "ran-a", tmp_path / "ran-b"
    results = {
        "list": run_gitledger("list", "--json", cwd=repo),
        "reconcile": run_gitledger("reconcile", "--json", cwd=repo),
        "log": run_gitledger("log", cwd=repo),
        "a": step(repo, "a", ran_a),
        "b": step(repo, "b", ran_b),
    }
    for what, proc in results.items():
        assert "Traceback" not in proc.stderr, (what, proc.stderr)
        assert proc.returncode == 0 or one_line_error(proc), (what, proc.returncode, proc.stderr)
    assert not ran_a.exists(), "a step that was done ran again"
    assert not ran_b.exists(), "the step of a damaged entry ran"

    if scope == "none":
        assert all(p.returncode == 0 for p in results.values())
    elif scope == "entry":
        assert results["a"].returncode == 0 and json.loads(results["a"].stdout)["status"] == "skipped"
        assert results["list"].returncode == 0 and results["reconcile"].returncode == 0
        states = {row["key"]: row["state"] for row in json.loads(results["list"].stdout)}
        assert states.get(A.key) == "done" and "corrupt" in states.values(), states
        if name != "damaged-intent-record" and name != "torn-intent-object":
            assert one_line_error(results["b"]) and "corrupt" in results["b"].stderr
            repaired = run_gitledger("resolve", B.key, "--done", cwd=repo)
            assert repaired.returncode == 0, repaired.stderr
            after = step(repo, "b", ran_b)
            assert json.loads(after.stdout)["status"] == "skipped", after.stderr
            assert not ran_b.exists()
    elif scope == "global-list":
        assert one_line_error(results["list"])
    else:
        assert all(one_line_error(results[w]) for w in ("list", "a", "b")), results
