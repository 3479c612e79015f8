"""The ledger stored inside the git repository.

Layout (see docs/design.md):

- ``refs/notes/gitledger``: a notes commit chain. One note per key, attached to the key's *intent
  object*; the note body is JSON Lines, one event a line, append-only. Notes are fanned out two levels
  (``ab/cd/<rest>``) so a write rewrites three small trees whatever the ledger's size.
  ``git notes --ref=gitledger show <intent>`` and ``git log --notes=gitledger`` work for people.
- ``refs/gitledger/intents``: a commit whose tree holds every intent blob (path: the key's digest,
  fanned out the same way). It keeps the annotated objects reachable, so ``git gc`` and
  ``git notes prune`` never drop a record, and maps a key back to its intent object.

Every transition is one commit on the notes ref, moved together with the intents ref (for a new key)
by one ``git update-ref --stdin`` transaction against the exact old values. ``git log
refs/notes/gitledger`` is the audit log.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from gitledger.core import crashpoints as faults
from gitledger.core.errors import ConflictError, CorruptLedgerError, DamagedObjectError
from gitledger.core.events import BadLine, Entry, Event, encode_event, parse_events
from gitledger.core.keys import key_digest
from gitledger.core.store import ANY_VERSION, Intent
from gitledger.git.repo import GitRepo, format_tree, parse_tree

NOTES_REF = "refs/notes/gitledger"
INTENTS_REF = "refs/gitledger/intents"
LEDGER_REFS = (NOTES_REF, INTENTS_REF)
FANOUT = 2
MAX_TRIES = 100
TREE = "40000"
BLOB = "100644"


def fanout(name: str) -> list[str]:
    return [name[2 * i : 2 * i + 2] for i in range(FANOUT)] + [name[2 * FANOUT :]]


def intent_bytes(intent: Intent) -> bytes:
    record = {"digest": intent.digest, "key": intent.key, "step": intent.step, "task": intent.task, "v": 1}
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def parse_intent(data: bytes) -> Intent | None:
    """The intent in a record written by :func:`intent_bytes`, or None when it is not one."""
    try:
        record = json.loads(data)
        intent = Intent(record["key"], record["task"], record["step"], record["digest"])
    except (ValueError, UnicodeDecodeError, TypeError, KeyError):
        return None
    if not all(isinstance(x, str) for x in (intent.key, intent.task, intent.step, intent.digest)):
        return None
    return intent


@dataclass(frozen=True)
class Tip:
    commit: str | None
    tree: str | None


class GitStore:
    """A :class:`~gitledger.core.store.Store` in ``refs/notes/gitledger`` + ``refs/gitledger/intents``."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self._oid_len = 32 if repo.object_format == "sha256" else 20
        self._trees: dict[str, dict[str, tuple[str, str]]] = {}

    # -- reading -----------------------------------------------------------------------------------

    def tip(self, ref: str) -> Tip:
        found = self.repo.read(ref)
        if found is None:
            # Absent, created by another writer since we looked, or pointing at an object that is not
            # there. Only the last is damage: reading it as an empty ledger would hide every entry (and
            # make every write fail as a "conflict"). Writers store objects before they move a ref, so
            # an object a ref points at is there unless the repository is damaged.
            proc = self.repo.run("rev-parse", "-q", "--verify", ref, check=False)
            if proc.returncode != 0:
                return Tip(None, None)
            oid = proc.stdout.decode().strip()
            found = self.repo.read(oid)
            if found is None:
                raise CorruptLedgerError(
                    f"{ref} points at {oid}, which is missing from the repository; restore it with "
                    f"'git update-ref {ref} <commit>' (see 'git reflog {ref}') or fetch it from a clone"
                )
        oid, kind, data = found
        if kind != "commit":
            raise CorruptLedgerError(
                f"{ref} points at a {kind}, not a commit; restore it with 'git update-ref {ref} <commit>' "
                f"(see 'git reflog {ref}')"
            )
        tree = data[5 : data.index(b"\n")].decode()
        return Tip(oid, tree)

    def tree(self, oid: str | None) -> dict[str, tuple[str, str]]:
        """{name: (mode, oid)} of a tree; trees are immutable, so they are cached."""
        if oid is None:
            return {}
        cached = self._trees.get(oid)
        if cached is None:
            found = self.repo.read(oid)
            if found is None or found[1] != "tree":
                raise CorruptLedgerError(f"ledger tree {oid} is missing or not a tree; the ledger is damaged")
            cached = {name: (mode, child) for mode, name, child in parse_tree(found[2], self._oid_len)}
            self._trees[oid] = cached
        return cached

    def find(self, tree: str | None, name: str) -> tuple[list[str], str] | None:
        """Locate ``name`` in a fanned-out tree: (path components, blob oid), whatever the fanout."""
        path: list[str] = []
        rest = name
        while tree is not None:
            entries = self.tree(tree)
            if rest in entries:
                return [*path, rest], entries[rest][1]
            sub = entries.get(rest[:2])
            if sub is None or sub[0] != TREE or len(rest) <= 2:
                return None
            path.append(rest[:2])
            rest = rest[2:]
            tree = sub[1]
        return None

    def walk(self, tree: str | None, prefix: str = "") -> Iterator[tuple[str, str]]:
        """Every (full name, blob oid) below a fanned-out tree."""
        for name, (mode, oid) in sorted(self.tree(tree).items()):
            if mode == TREE:
                yield from self.walk(oid, prefix + name)
            else:
                yield prefix + name, oid

    def intent_oid(self, intent: Intent) -> str:
        return self.repo.hash_object("blob", intent_bytes(intent))[0]

    def _intent_oid_for_key(self, key: str) -> str | None:
        found = self.find(self.tip(INTENTS_REF).tree, key_digest(key))
        return found[1] if found else None

    def _entry(self, key: str, intent_oid: str | None, notes_tree: str | None) -> Entry:
        if intent_oid is None:
            return Entry(key, [], None)
        found = self.find(notes_tree, intent_oid)
        if found is None:
            return Entry(key, [], None, location=intent_oid)
        try:
            blob = self.repo.read(found[1])
        except DamagedObjectError:
            blob = None
        if blob is None or blob[1] != "blob":
            # missing or unreadable (a truncated or overwritten object file): this entry is corrupt,
            # every other entry stays readable; 'resolve' supersedes it
            problem = f"the note object {found[1]} is missing or damaged"
            return Entry(key, [], found[1], [BadLine(0, "", problem)], location=intent_oid)
        events, bad = parse_events(blob[2])
        if not events and not bad:  # gitledger never writes an empty note: someone emptied it
            bad = [BadLine(0, "", f"the note {found[1]} is empty")]
        return Entry(key, events, found[1], bad, location=intent_oid)

    def load(self, key: str | Intent) -> Entry:
        if isinstance(key, Intent):
            intent_oid = self.intent_oid(key)
            # First one read at the path this store writes notes to (``ab/cd/<rest>``): git walks the
            # trees in C, where parsing a 256-entry fan-out tree in Python costs ~150 us, so a read
            # stays flat as the ledger grows. No note there (a new key, another fan-out, a damaged
            # ref): the general walk below, which also reports what is wrong.
            # A damaged or empty note falls through too, so that it is reported as corrupt.
            try:
                found = self.repo.read(f"{NOTES_REF}:{'/'.join(fanout(intent_oid))}")
            except DamagedObjectError:
                found = None
            if found is not None and found[1] == "blob":
                events, bad = parse_events(found[2])
                if events or bad:
                    return Entry(key.key, events, found[0], bad, location=intent_oid)
            return self._entry(key.key, intent_oid, self.tip(NOTES_REF).tree)
        return self._entry(key, self._intent_oid_for_key(key), self.tip(NOTES_REF).tree)

    def intent(self, key: str) -> Intent | None:
        oid = self._intent_oid_for_key(key)
        blob = self.repo.read(oid) if oid else None
        if blob is None:
            return None
        return parse_intent(blob[2])

    def entries(self) -> Iterator[Entry]:
        """Every entry, by key; an intent record that is missing or unreadable is reported as a corrupt
        entry of its own (named ``damaged-intent:<key digest>``) and leaves every other entry readable."""
        notes_tree = self.tip(NOTES_REF).tree
        keys: dict[str, str] = {}
        damaged: list[tuple[str, str]] = []
        for path, intent_oid in self.walk(self.tip(INTENTS_REF).tree):
            try:
                blob = self.repo.read(intent_oid)
            except DamagedObjectError:
                blob = None
            intent = parse_intent(blob[2]) if blob is not None and blob[1] == "blob" else None
            if intent is None:
                damaged.append((path, intent_oid))
            else:
                keys[intent.key] = intent_oid
        for key in sorted(keys):
            yield self._entry(key, keys[key], notes_tree)
        for path, oid in damaged:
            bad = BadLine(0, "", f"the intent record {oid} in {INTENTS_REF} is missing or not an intent")
            yield Entry(f"damaged-intent:{path}", [], oid, [bad], location=oid)

    # -- writing -----------------------------------------------------------------------------------

    def write_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        """Write a tree from {name: (mode, oid)} (and cache it); return its oid."""
        oid = self.repo.write_object("tree", format_tree(entries))
        self._trees[oid] = dict(entries)
        return oid

    def _put(self, tree: str | None, path: list[str], blob: str) -> str:
        """Write the trees of ``tree`` with ``path`` set to ``blob``; return the new root."""
        entries = dict(self.tree(tree))
        if len(path) == 1:
            entries[path[0]] = (BLOB, blob)
        else:
            sub = entries.get(path[0])
            entries[path[0]] = (TREE, self._put(sub[1] if sub and sub[0] == TREE else None, path[1:], blob))
        return self.write_tree(entries)

    def commit(self, tree: str, parents: list[str | None], message: str) -> str:
        name = os.environ.get("GIT_COMMITTER_NAME", "gitledger")
        email = os.environ.get("GIT_COMMITTER_EMAIL", "gitledger@localhost")
        ident = f"{name} <{email}> {int(time.time())} +0000"
        lines = [f"tree {tree}"] + [f"parent {p}" for p in parents if p]
        lines += [f"author {ident}", f"committer {ident}", "", message]
        return self.repo.write_object("commit", ("\n".join(lines) + "\n").encode())

    def append(self, intent: Intent, event: Event, expected: str | None) -> str | None:
        intent_oid = self.intent_oid(intent)
        line = encode_event(event)
        message = f"gitledger: {event.get('state')} {intent.key}"
        with self.repo.lock():
            for _ in range(MAX_TRIES):
                notes = self.tip(NOTES_REF)
                found = self.find(notes.tree, intent_oid)
                current = found[1] if found else None
                if expected != ANY_VERSION and current != expected:
                    return None
                old = b""
                if current is not None:
                    try:
                        blob = self.repo.read(current)
                    except DamagedObjectError:
                        blob = None  # unreadable: the new note starts afresh (resolve repairs this way)
                    old = blob[2] if blob else b""
                    if old and not old.endswith(b"\n"):
                        old += b"\n"
                new_blob = self.repo.write_object("blob", old + line)
                path = found[0] if found else fanout(intent_oid)
                root = self._put(notes.tree, path, new_blob)
                updates = [(NOTES_REF, self.commit(root, [notes.commit], message), notes.commit)]
                if current is None:
                    updates += self._intent_update(intent)
                if event.get("state") == "done":
                    faults.point("during-done")
                if self.repo.update_refs(updates):
                    return new_blob
                time.sleep(0.001)
        raise ConflictError(
            f"could not record {intent.key} after {MAX_TRIES} tries: other writers keep moving "
            f"{NOTES_REF}; try again"
        )

    def _intent_update(self, intent: Intent) -> list[tuple[str, str, str | None]]:
        tip = self.tip(INTENTS_REF)
        oid = self.intent_oid(intent)
        name = key_digest(intent.key)
        found = self.find(tip.tree, name)
        if found is not None and found[1] == oid:
            return []
        self.repo.write_object("blob", intent_bytes(intent))
        root = self._put(tip.tree, found[0] if found else fanout(name), oid)
        return [(INTENTS_REF, self.commit(root, [tip.commit], f"gitledger: intent {intent.key}"), tip.commit)]

    def close(self) -> None:
        self.repo.close()
