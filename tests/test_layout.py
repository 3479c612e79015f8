"""The ledger's trees are laid out as ``git notes`` lays out its own (git's notes.c, determine_fanout).

git itself is the oracle: it rewrites a notes tree by its own rule whenever it edits a note, so a tree
gitledger wrote must come out of ``git notes add -f`` with every note where it was."""

from __future__ import annotations

from pathlib import Path

from gitledger.git.objects import hash_object
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore
from gitledger.git.trees import layout, splits
from testing.repos import git

REF = "refs/notes/layout"


def paths(repo: Path, ref: str) -> set[str]:
    return {line.split("\t")[1] for line in git("ls-tree", "-r", ref, cwd=repo).splitlines()}


def names_under(
    prefixes: list[str], start: int, object_format: str, avoid: tuple[str, ...]
) -> list[tuple[str, bytes]]:
    """(oid, content) of blobs, one whose oid begins with each of ``prefixes`` and none with one of
    ``avoid`` (found by hashing)."""
    wanted = sorted(prefixes, key=len, reverse=True)
    found = []
    i = start
    while wanted:
        data = f"object {i}\n".encode()
        oid = hash_object("blob", data, object_format)
        if oid.startswith(avoid):
            i += 1
            continue
        for prefix in wanted:
            if oid.startswith(prefix):
                found.append((oid, data))
                wanted.remove(prefix)
                break
        i += 1
    return found


def test_the_rule_is_git_notes_rule() -> None:
    hexes = "0123456789abcdef"
    assert not splits([])
    assert splits([d + "0" * 38 for d in hexes] * 2)  # two names under every next digit
    assert not splits([d + "0" * 38 for d in hexes[:-1]] * 2 + ["f" + "0" * 38])  # one under 'f'
    assert splits([d + "1" for d in hexes])  # two-character names are subtrees: each counts as two
    assert not splits(["README"] * 40)  # names that are not notes do not count
    assert layout(["ab" + "0" * 38]) == {"ab" + "0" * 38: "ab" + "0" * 38}


def test_trees_written_fold_by_fold_are_the_trees_git_notes_writes(repo: Path) -> None:
    """Names spread so that some subtrees hold enough notes to split (git: ``ab/cd/<36>``) and others
    do not (``cd/<38>``), at the edge of the rule too ('ef': two names under each next digit; '12':
    the same but one under 'f'), written in batches as folds write them: every note is at the path
    :func:`layout` gives from all the names at once, and after git rewrites the subtrees it edits a
    note in, every note is still where gitledger put it."""
    hexes = "0123456789abcdef"
    with GitRepo.discover(repo) as r:
        subtrees = {
            "": [""] * 300,
            "ab": ["ab"] * 120,
            "cd": ["cd"] * 30,
            "ef": [f"ef{d}" for d in hexes] * 2,
            "12": [f"12{d}" for d in hexes] + [f"12{d}" for d in hexes[:-1]],
        }
        objects = []
        first = {}
        for start, (name, prefixes) in enumerate(subtrees.items()):
            first[name] = len(objects)
            avoid = tuple(other for other in subtrees if other and other != name)
            objects += names_under(prefixes, start * 1_000_000, r.object_format, avoid)
        store = GitStore(r, "none")
        for _, data in objects:
            store.write_object("blob", data)
        note = store.write_object("blob", b"a note\n")
        tree = None
        for at in range(0, len(objects), 37):  # 13 folds: levels grow, and split between two folds
            tree = store.trees.put_many(tree, {oid: note for oid, _ in objects[at : at + 37]})
        assert tree is not None
        commit = store.commit(tree, [], "layout")
        with r.lock():
            assert store.move_refs([(REF, commit, None)])
        store.close()
    ours = paths(repo, REF)
    expected = layout(oid for oid, _ in objects)
    assert ours == set(expected.values())
    depth = {name: expected[objects[at][0]].count("/") for name, at in first.items()}
    assert depth == {"": 1, "ab": 2, "cd": 1, "ef": 2, "12": 1}  # the names do what they are for
    for at in first.values():  # git rewrites what it edits (and keeps a level whose 16 parts are subtrees)
        git("notes", "--ref=layout", "add", "-f", "-m", "edited", objects[at][0], cwd=repo)
    assert git("rev-parse", f"{REF}^{{tree}}", cwd=repo) != tree
    assert paths(repo, REF) == ours
    # and git writing every note from nothing (merged into a notes ref without them) lays them out
    # the same: a note on the note's own blob, then the merge adds all the others
    assert not note.startswith(tuple(subtrees)[1:])
    git("notes", "--ref=fresh", "add", "-m", "first", note, cwd=repo)
    git("notes", "--ref=fresh", "merge", "-q", REF, cwd=repo)
    assert paths(repo, "refs/notes/fresh") == ours | {layout([note, *expected])[note]}
