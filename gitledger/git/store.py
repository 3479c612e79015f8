"""The ledger stored inside the git repository: a write-ahead journal folded into git notes.

Layout (see docs/design.md, *Storage*):

- ``refs/notes/gitledger``: a notes commit chain. One note per key, attached to the key's *intent
  object*; the note body is JSON Lines, one event a line, append-only; an event's ``key`` field is
  left out (it is the intent's) and put back on reading. Notes are fanned out two levels
  (``ab/cd/<rest>``). ``git notes --ref=gitledger show <intent>`` and ``git log refs/notes/gitledger``
  work for people (after ``gitledger flush``).
- ``refs/gitledger/intents``: a commit whose tree holds every intent blob (path: the key's digest,
  fanned out the same way). It keeps the annotated objects reachable, so ``git gc`` and
  ``git notes prune`` never drop a record, and maps a key back to its intent object.
- ``<common git dir>/gitledger.journal``: events not yet folded into the notes, one checksummed line
  each (:mod:`gitledger.git.journal`); a claim is fsync'd before its append returns (``durability``).

A decision is taken on the merged view: the key's note plus its journal lines (a journal line already
in the note is not counted twice, so a fold interrupted after its ref update is harmless), under the
lock of the key's stripe (one of 64, by a hash of the key): writers of different keys decide and
append side by side, each record one ``pwrite`` of a whole line at a place taken under the journal's
own lock. The ledger lock is every stripe: a fold replacing the journal, and sync, hold it, so they see
no append in flight and nobody decides meanwhile. The version of an entry is the blob id its note has,
or will have once folded.

The **fold** (group commit) writes every journaled event into the notes in one commit: objects go into
one pack guarded by a ``.keep`` (no gc or prune can take them before the refs point at them), then the
intents ref and then the notes ref are moved, each by a fresh ``git update-ref`` process against its
exact old value and verified by reading it back (a long-lived process may trust a stale packed-refs),
and only then is the journal emptied. The intents ref moves first, so no note is ever reachable
without its intent. Folds happen every ``fold_events`` events or ``fold_bytes`` of journal, on
``gitledger flush``, and before anything leaves the machine (sync, pre-push, remote claims).

Objects and refs are read in-process (:mod:`gitledger.git.objects`), never through a git round trip.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from gitledger.core import crashpoints as faults
from gitledger.core.errors import ConflictError, CorruptLedgerError, DamagedObjectError, GitError
from gitledger.core.events import ATTEMPTING, BadLine, Entry, Event, parse_events
from gitledger.core.keys import key_digest
from gitledger.core.store import ANY_VERSION, Intent
from gitledger.git.journal import Journal, StaleTailError
from gitledger.git.journal_format import Record
from gitledger.git.journal_format import encode as encode_record
from gitledger.git.objects import (
    DamagedObjectFileError,
    DamagedRefError,
    LooseRef,
    ObjectReader,
    hash_object,
    read_ref,
    stale_keeps,
    unkeep,
    uses_files_backend,
    write_pack,
)
from gitledger.git.records import intent_bytes, merge_note, parse_intent, state_of, stored_line, with_key
from gitledger.git.refupdate import update_refs_fresh
from gitledger.git.repo import FOLD_LOCK, GitRepo
from gitledger.git.trees import Trees

NOTES_REF = "refs/notes/gitledger"
INTENTS_REF = "refs/gitledger/intents"
LEDGER_REFS = (NOTES_REF, INTENTS_REF)
FANOUT = 2
MAX_TRIES = 100


def fanout(name: str) -> list[str]:
    return [name[2 * i : 2 * i + 2] for i in range(FANOUT)] + [name[2 * FANOUT :]]


# fold the journal into the notes after this many events (1 024 fresh steps) ... A fold's fixed cost
# (a git process, two root trees, two commits, their fsyncs) is per fold, and so are the fan-out levels
# it rewrites: one per key at first, but the keys of a larger fold share more of them, and the levels
# grow with the ledger (~1.1 KB each at 10 000 entries, 7.4 KB at 100 000). Into a 10 000-entry ledger
# 3 072 fresh steps wrote 1.7 KB per step folding every 1 024 events, 1.4 KB every 1 536, 1.2 KB every
# 2 048; into 20 000 entries 2.4, 1.9 and 1.6 KB (docs/design.md). A new process searches a journal of
# up to this many lines for its keys rather than parsing it (gitledger.git.journal, LAZY_MIN)
FOLD_EVENTS = 2048
FOLD_BYTES = 2 * 1024 * 1024  # ... or this many bytes of journal (2 048 events of fresh steps are ~1.1 MiB)
# every fold leaves a pack; past this many packs (git's default gc.autoPackLimit) the store asks
# 'git gc --auto' to consolidate them, as git does after a commit (git decides, by its own settings)
AUTO_GC_PACKS = 50
_FSYNC_ALL = ("all", "committed", "reference")
_HEX = re.compile(r"[0-9a-f]+")


def _commit_tree(commit: bytes) -> str:
    """The tree id of a commit object's content (its first line: ``tree <id>``)."""
    return commit[5 : commit.index(b"\n")].decode()


def _holds_notes(ref: str) -> bool:
    """Whether ``ref`` holds notes: the intents ref and its copies (tracking refs) end in ``/intents``."""
    return not ref.endswith("/intents")


def _restore(ref: str, commit: str = "<commit>") -> str:
    """How to put a damaged ledger ref back (never through a symbolic ref to a branch)."""
    return f"restore it with 'git update-ref --no-deref {ref} {commit}'"


@dataclass(frozen=True)
class Tip:
    commit: str | None
    tree: str | None


class GitStore:
    """A :class:`~gitledger.core.store.Store`: a journal + ``refs/notes/gitledger`` + the intents ref.

    ``durability``: ``"fsync"`` (default) makes a claim durable before its append returns and any other
    event by the next sync of the journal, a fold or the process's exit; ``"full"`` every event before
    its append returns; ``"none"`` leaves it to the operating system (a killed process loses nothing,
    a power cut may), unless git's own ``core.fsync`` asks for references to be synced (then as
    ``"fsync"``). Every process writing one ledger should use the same setting (docs/design.md).
    """

    def __init__(
        self,
        repo: GitRepo,
        durability: str = "fsync",
        *,
        fold_events: int = FOLD_EVENTS,
        fold_bytes: int = FOLD_BYTES,
    ) -> None:
        self.repo = repo
        self.durability = durability
        try:
            self.fold_events = max(1, int(os.environ.get("GITLEDGER_FOLD_EVENTS") or fold_events))
        except ValueError:  # a tuning knob for tests and benchmarks: a bad value keeps the default
            self.fold_events = fold_events
        self.fold_bytes = fold_bytes
        self._oid_len = 32 if repo.object_format == "sha256" else 20
        self._hex_len = self._oid_len * 2
        self._reader = ObjectReader(repo.objects_dir, repo.object_format)
        self.trees = Trees(self.read_as, self.write_object, self._oid_len)
        self._files_refs = uses_files_backend(repo.common_dir)
        self._git_fsync: str | None = None
        self.journal = Journal(str(repo.common_dir / "gitledger.journal"), durable=durability != "none")
        self._durable_set = durability != "none"
        self._pending: dict[str, tuple[str, bytes]] = {}  # objects written but not yet packed
        self._versions: dict[str, bytes] = {}  # merged note bodies by version, for version_bytes
        self.notices: list[str] = []
        self._intents: dict[Intent, tuple[str, bytes]] = {}  # intent -> (blob id, record, no newline)
        self._tips: dict[tuple[str, bool], Tip] = {}  # (commit id, notes) -> its tip (trees never change)
        self._notes: dict[tuple[str | None, str], tuple[str | None, bytes | None, bool]] = {}
        self._loose_refs = {ref: LooseRef(repo.common_dir, ref, self._hex_len) for ref in LEDGER_REFS}
        self._gc_at = AUTO_GC_PACKS  # ask git to pack when there are more packs than this
        self._hidden_said = False  # the notice on records behind zeros in the journal, once
        self._gc: subprocess.Popen[bytes] | None = None

    # -- objects and refs, in-process ----------------------------------------------------------------

    def read(self, name: str) -> tuple[str, str, bytes] | None:
        """(oid, type, content) of an object id (or, through git, any other name), None if missing."""
        pending = self._pending.get(name)
        if pending is not None:
            return name, pending[0], pending[1]
        if len(name) != self._hex_len or not _HEX.fullmatch(name):
            return self.repo.read(name)
        try:
            found = self._reader.read(name)
        except DamagedObjectFileError:
            found = None
            damaged = True
        else:
            damaged = False
        if found is None:
            if damaged:
                raise DamagedObjectError(f"object {name} is damaged; run 'git fsck'")
            return self.repo.read(name) if self._reader.promisor else None  # git fetches it lazily
        return name, found[0], found[1]

    def read_as(self, oid: str, kind: str) -> bytes | None:
        """The content of object ``oid`` when it is there, readable and of type ``kind``; else None."""
        try:
            found = self.read(oid)
        except GitError:
            return None
        return found[2] if found is not None and found[1] == kind else None

    def _ref(self, ref: str) -> str | None:
        if not self._files_refs:
            proc = self.repo.run("rev-parse", "-q", "--verify", ref, check=False)
            return proc.stdout.decode().strip() or None if proc.returncode == 0 else None
        try:
            loose = self._loose_refs.get(ref)
            if loose is not None:
                return loose.read()
            return read_ref(self.repo.common_dir, ref, self._hex_len)
        except DamagedRefError as exc:
            raise CorruptLedgerError(f"{exc}; {self._repair_hint(ref)}") from exc

    def _repair_hint(self, ref: str) -> str:
        """How to restore ``ref``: its newest value in its reflog that is a ledger's commit (the
        reflog also records what damaged it, e.g. a branch's commit it was pointed at)."""
        try:
            with open(self.repo.common_dir / "logs" / ref, "rb") as fh:
                values = [line.split(b" ")[1].decode(errors="replace") for line in fh.read().splitlines()]
        except (OSError, IndexError):
            values = []
        for value in reversed(values):
            if self._is_ledger_commit(value, ref):
                return f"{_restore(ref, value)} (its last good value in 'git reflog {ref}')"
        return f"{_restore(ref)} (see 'git reflog {ref}') or fetch it from a clone"

    def _is_ledger_commit(self, oid: str, ref: str) -> bool:
        try:
            found = self._reader.read(oid) if _HEX.fullmatch(oid) else None
            if found is None or found[0] != "commit":
                return False
            return self.trees.foreign_entry(_commit_tree(found[1]), _holds_notes(ref)) is None
        except (GitError, CorruptLedgerError, DamagedObjectFileError, ValueError):
            return False

    def tip(self, ref: str, notes: bool | None = None) -> Tip:
        """The commit and tree a ledger ref (or a commit id) points at. ``notes``: whether it is a
        notes commit or an intents one; None: from the ref's name (:func:`_holds_notes`)."""
        notes = _holds_notes(ref) if notes is None else notes
        if len(ref) == self._hex_len and _HEX.fullmatch(ref):
            oid: str | None = ref
        else:
            oid = self._ref(ref)
        if oid is None:
            return Tip(None, None)
        known = self._tips.get((oid, notes))
        if known is not None:
            return known
        found = self.read(oid)
        if found is None:
            raise CorruptLedgerError(
                f"{ref} points at {oid}, which is missing from the repository; {self._repair_hint(ref)}"
            )
        _, kind, data = found
        if kind != "commit":
            hint = f"{_restore(ref)} (see 'git reflog {ref}')"
            raise CorruptLedgerError(f"{ref} points at a {kind}, not a commit; {hint}")
        tree = _commit_tree(data)
        foreign = self.trees.foreign_entry(tree, notes)
        if foreign is not None:
            raise CorruptLedgerError(
                f"{ref} points at commit {oid}, which is not a gitledger ledger ({foreign}); "
                f"{self._repair_hint(ref)}"
            )
        if len(self._tips) > 64:
            self._tips.clear()
        tip = self._tips[(oid, notes)] = Tip(oid, tree)
        return tip

    def intent_oid(self, intent: Intent) -> str:
        return self._intent(intent)[0]

    def _intent(self, intent: Intent) -> tuple[str, bytes]:
        """(blob id, record without its newline) of an intent, remembered for the next lookups."""
        known = self._intents.get(intent)
        if known is None:
            if len(self._intents) > 10_000:
                self._intents.clear()
            data = intent_bytes(intent)
            oid = hash_object("blob", data, self.repo.object_format)
            known = self._intents[intent] = (oid, data.rstrip(b"\n"))
        return known

    def _intent_oid_for_key(self, key: str) -> str | None:
        raw = self.journal.intent_of(key)
        if raw is not None:
            return hash_object("blob", raw + b"\n", self.repo.object_format)
        found = self.trees.find(self.tip(INTENTS_REF).tree, key_digest(key))
        return found[1] if found else None

    # -- the merged view -----------------------------------------------------------------------------

    def _note(self, intent_oid: str, notes_tree: str | None) -> tuple[str | None, bytes | None, bool]:
        """(note blob oid, its content, damaged) of one key in the notes (remembered for a notes tree:
        trees and blobs never change; a damaged note is looked up again)."""
        known = self._notes.get((notes_tree, intent_oid))
        if known is not None:
            return known
        found = self._note_at(self.trees.find(notes_tree, intent_oid))
        if not found[2]:
            if len(self._notes) > 256:
                self._notes.clear()
            self._notes[(notes_tree, intent_oid)] = found
        return found

    def _note_at(self, found: tuple[list[str], str] | None) -> tuple[str | None, bytes | None, bool]:
        """:meth:`_note` of what :meth:`find` found."""
        if found is None:
            return None, None, False
        blob = self.read_as(found[1], "blob")
        return found[1], blob, blob is None

    def _version(
        self, key: str, intent_oid: str | None, notes_tree: str | None, *, versioned: bool = True
    ) -> tuple[str | None, bytes | None, str | None, bool]:
        """(version, body, note blob oid, damaged) of one key on the merged view, without parsing it.

        The version is the blob id the note has (no journal lines) or will have once folded; for an
        unreadable note it is derived from the damaged blob's id too (a fold drops that note). Not
        ``versioned``: the version is None where it would have to be hashed."""
        lines = self.journal.lines(key)
        note_oid, note, damaged = self._note(intent_oid, notes_tree) if intent_oid else (None, None, False)
        if not lines:
            return note_oid, note, note_oid, damaged
        merged = merge_note(note or b"", lines)
        if not versioned:
            return None, merged, note_oid, damaged
        version = hash_object("blob", merged, self.repo.object_format)
        if damaged:
            version = hash_object("blob", b"damaged " + (note_oid or "").encode() + b"\n" + merged)
        self._remember(version, merged)
        return version, merged, note_oid, damaged

    def _entry(self, key: str, intent_oid: str | None, notes_tree: str | None) -> Entry:
        if intent_oid is None and not self.journal.lines(key):
            return Entry(key, [], None)
        version, body, note_oid, damaged = self._version(key, intent_oid, notes_tree)
        bad: list[BadLine] = []
        if damaged:
            # missing or unreadable (a truncated or overwritten object file): this entry is corrupt,
            # every other entry stays readable; 'resolve' supersedes it
            bad.append(BadLine(0, "", f"the note object {note_oid} is missing or damaged"))
        if body is None:
            return Entry(key, [], version, bad, location=intent_oid or "")
        events, more = parse_events(body)
        events = [with_key(event, key) for event in events]
        if not events and not more:  # gitledger never writes an empty note: someone emptied it
            more = [BadLine(0, "", f"the note {note_oid} is empty")]
        return Entry(key, events, version, bad + more, location=intent_oid or "")

    def _remember(self, version: str, body: bytes) -> None:
        if len(self._versions) > 1024:
            self._versions.clear()
        self._versions[version] = body

    def version_bytes(self, version: str | None) -> bytes | None:
        """The note body an entry had at ``version`` (one this store read or wrote, or a note blob)."""
        if version is None:
            return None
        body = self._versions.get(version)
        if body is not None:
            return body
        return self.read_as(version, "blob")

    def _refresh(self) -> None:
        """Read the journal's new lines, after taking back records found behind zeros in it (under the
        exclusive lock: read without them, a done step looked unconfirmed). A thread that holds a lock
        already must not wait for that one: it says so once, and a write or 'gitledger flush' takes
        them back."""
        self.journal.refresh()
        if not self.journal.hidden:
            return
        if not self.repo.holds_a_lock():
            with self.repo.lock(fold=False):
                self._notice(self.journal.repair())
            self.journal.refresh()
        elif not self._hidden_said:
            self._hidden_said = True
            self._notice(
                f"gitledger: the ledger journal {self.journal.path} holds records behind zero bytes in its "
                "middle (damage, or a power cut), not read yet; the next write takes them back, or run "
                "'gitledger flush'"
            )

    def load(self, key: str | Intent) -> Entry:
        # the journal first, then the notes: a fold moves the refs before it empties the journal, so
        # what this reads is never missing an event that was in the journal when it was read
        self._refresh()
        notes_tree = self.tip(NOTES_REF).tree
        if isinstance(key, Intent):
            return self._entry(key.key, self.intent_oid(key), notes_tree)
        return self._entry(key, self._intent_oid_for_key(key), notes_tree)

    def intent(self, key: str) -> Intent | None:
        self._refresh()
        raw = self.journal.intent_of(key)
        if raw is not None:
            return parse_intent(raw)
        return self._tree_intent(self.tip(INTENTS_REF).tree, key)

    def _tree_intent(self, tree: str | None, key: str) -> Intent | None:
        found = self.trees.find(tree, key_digest(key))
        try:
            blob = self.read(found[1]) if found else None
        except GitError:
            blob = None
        return parse_intent(blob[2]) if blob is not None else None

    def entries(self) -> Iterator[Entry]:
        """Every entry, by key; an intent record that is missing or unreadable is reported as a corrupt
        entry of its own (named ``damaged-intent:<key digest>``) and leaves every other entry readable."""
        self._refresh()
        notes_tree = self.tip(NOTES_REF).tree
        keys: dict[str, str | None] = {}
        damaged: list[tuple[str, str]] = []
        for path, intent_oid in self.trees.walk(self.tip(INTENTS_REF).tree):
            blob = self.read_as(intent_oid, "blob")
            intent = parse_intent(blob) if blob is not None else None
            if intent is None:
                damaged.append((path, intent_oid))
            else:
                keys[intent.key] = intent_oid
        for key in self.journal.key_names():
            if key not in keys:
                raw = self.journal.intent_of(key)
                keys[key] = hash_object("blob", raw + b"\n", self.repo.object_format) if raw else None
        for key in sorted(keys):
            yield self._entry(key, keys[key], notes_tree)
        for path, oid in damaged:
            bad = BadLine(0, "", f"the intent record {oid} in {INTENTS_REF} is missing or not an intent")
            yield Entry(f"damaged-intent:{path}", [], oid, [bad], location=oid)

    def has_ledger(self) -> bool:
        self._refresh()
        return bool(self.journal.key_names()) or any(self._ref(ref) for ref in LEDGER_REFS)

    # -- writing -------------------------------------------------------------------------------------

    def _notice(self, text: str | None) -> None:
        if text:
            self.notices.append(text)
            print(text, file=sys.stderr)

    def append(self, intent: Intent, event: Event, expected: str | None) -> str | None:
        line = stored_line(intent.key, event)
        intent_oid, intent_record = self._intent(intent)
        decoded = Record(intent.key, intent_record, line)
        record = encode_record(*decoded)
        if not self._durable_set:
            self.journal.durable = self._git_wants_fsync()
            self._durable_set = True
        journal = self.journal
        for _ in range(MAX_TRIES):
            # the key's stripe (the ledger lock, which a fold or sync holds, is every stripe): the
            # decision on this key and the append are atomic; other keys' writers go on meanwhile
            with self.repo.append_lock(intent.key):
                journal.refresh()
                if journal.tail:
                    journal.settle()
                if not journal.tail and not journal.hidden:
                    notes_tree = self.tip(NOTES_REF).tree
                    anyway = expected == ANY_VERSION
                    current, body, _, damaged = self._version(
                        intent.key, intent_oid, notes_tree, versioned=not anyway
                    )
                    if not anyway and current != expected:
                        return None
                    if event.get("state") == "done":
                        faults.point("during-done")
                    try:
                        fd = journal.append(record)
                    except StaleTailError:  # leftovers of a power cut where the record would go
                        pass
                    else:
                        try:
                            journal.appended(record, decoded)
                            before = (body, damaged)
                            version = self._next_version(intent.key, intent_oid, notes_tree, before, line)
                            fold_due = journal.count() >= self.fold_events or journal.size >= self.fold_bytes
                        except BaseException:
                            journal.sync(fd)
                            raise
                        break
            # what follows the last good line, with nobody writing, is a writer killed in its write or
            # what a power cut left (or a write begun since): it is moved aside under the exclusive lock
            with self.repo.lock(fold=False):
                self._notice(journal.repair())
        else:
            raise CorruptLedgerError(
                f"the ledger journal {journal.path} still ends in a torn write after {MAX_TRIES} repairs: "
                "something keeps writing to it; stop it, then run 'gitledger flush'"
            )
        # outside the lock: concurrent writers' syncs overlap. A claim is durable before this returns,
        # i.e. before anyone acts on it; an outcome, written after the effect, may wait (docs/design.md)
        journal.sync(fd, now=self.durability == "full" or event.get("state") == ATTEMPTING)
        if fold_due:
            try:
                self._fold_due()
            except Exception as exc:  # the event is recorded and synced: the caller must get its version
                self._notice(
                    f"gitledger: the event was recorded, but folding the ledger journal failed ({exc}); the "
                    "next write or 'gitledger flush' folds it again"
                )
        return version

    def _next_version(
        self,
        key: str,
        intent_oid: str,
        notes_tree: str | None,
        before: tuple[bytes | None, bool],
        line: bytes,
    ) -> str:
        """The version of ``key`` once this process appended ``line`` on top of ``before`` (its merged
        body then, and whether its note is damaged), without merging again (the stripe lock is held:
        nobody else appended to this key meanwhile)."""
        body, damaged = before
        if not damaged and (body is None or line not in body):
            merged = (body or b"") + (b"\n" if body and not body.endswith(b"\n") else b"") + line + b"\n"
            version = hash_object("blob", merged, self.repo.object_format)
            self._remember(version, merged)
            return version
        found = self._version(key, intent_oid, notes_tree)[0]
        assert found is not None
        return found

    def _fold_due(self) -> None:
        """Fold after an append filled the journal, beside the other writers (who go on appending
        meanwhile); nothing to do when another process is folding or has just folded."""
        with self.repo.try_lock(FOLD_LOCK) as mine:
            if mine:
                self.journal.refresh()
                if self.journal.count() >= self.fold_events or self.journal.size >= self.fold_bytes:
                    self._fold(exclusive=False)

    def _git_wants_fsync(self) -> bool:
        """Whether git's own ``core.fsync`` asks for references (or everything) to reach the disk."""
        if self._git_fsync is None:
            self._git_fsync = self.repo.out("config", "--get", "core.fsync", check=False).lower()
        parts = {p.strip() for p in self._git_fsync.split(",")}
        return bool(parts & set(_FSYNC_ALL))

    def flush(self) -> int:
        """Fold the journal into the notes now; the number of events folded."""
        with self.repo.lock():
            return self.fold_locked()

    def fold_locked(self) -> int:
        """:meth:`flush` for a caller that holds the ledger lock (sync)."""
        self._notice(self.journal.repair())
        return self._fold(exclusive=True)

    def _fold(self, exclusive: bool) -> int:
        """Fold the journal as read now (a prefix of it: appends may go on beside a fold that holds
        only the fold lock) into the notes, then replace the journal by what was appended after that
        prefix. ``exclusive``: the caller holds the ledger lock exclusively (else the fold lock).

        Appenders deciding while the refs move see the same merged view before and after (the note
        then holds the journal lines it did not hold, and a line is never counted twice); the journal
        is replaced under the exclusive lock, after the refs moved."""
        journal = self.journal
        for keep in stale_keeps(self.repo.objects_dir):  # we hold the fold lock: their folds are over
            unkeep(keep)
        keys = journal.key_names()
        end = journal.size  # the journal is not read again before the rotation: a consistent prefix
        if not keys:
            return 0
        aside: set[str] = set()  # keys whose lines were set aside (once, whatever the tries)
        for _ in range(MAX_TRIES):
            notes, intents = self.tip(NOTES_REF), self.tip(INTENTS_REF)
            note_changes: dict[tuple[str, ...], str] = {}
            intent_changes: dict[tuple[str, ...], str] = {}
            folded: list[str] = []
            for key in keys:
                raw = journal.intent_of(key)
                intent = parse_intent(raw) if raw is not None else self._tree_intent(intents.tree, key)
                if intent is None:  # only damaged lines, of a key nobody recorded: keep them aside
                    if key not in aside:
                        self._set_aside(key)
                        aside.add(key)
                    continue
                intent_oid = self.intent_oid(intent)
                found = self.trees.find(notes.tree, intent_oid)
                _, old, damaged = self._note_at(found)
                merged = merge_note(b"" if damaged else (old or b""), journal.lines(key))
                if not damaged and old is not None and merged == old:
                    continue  # already folded (a fold that died before it emptied the journal)
                note_changes[tuple(found[0] if found else fanout(intent_oid))] = self.write_object(
                    "blob", merged
                )
                folded += [f"{state_of(line)} {key}" for line in journal.lines(key)]
                at = self.trees.find(intents.tree, key_digest(key))
                if at is None or at[1] != intent_oid:
                    self.write_object("blob", intent_bytes(intent))
                    intent_changes[tuple(at[0] if at else fanout(key_digest(key)))] = intent_oid
            if not note_changes:
                self._rotate(end, exclusive)
                return 0
            updates: list[tuple[str, str, str | None]] = []
            if intent_changes:
                root = self.trees.put_many(intents.tree, intent_changes)
                names = sorted(k for k in keys if journal.intent_of(k) is not None)
                message = (
                    f"gitledger: intent {names[0]}"
                    if len(intent_changes) == 1
                    else (f"gitledger: intents of {len(intent_changes)} keys")
                )
                updates.append((INTENTS_REF, self.commit(root, [intents.commit], message), intents.commit))
            root = self.trees.put_many(notes.tree, note_changes)
            message = (
                f"gitledger: {folded[0]}"
                if len(folded) == 1
                else (f"gitledger: {len(folded)} events\n\n" + "\n".join(folded))
            )
            updates.append((NOTES_REF, self.commit(root, [notes.commit], message), notes.commit))
            if self.move_refs(updates, fault="fold"):
                self._rotate(end, exclusive)
                self._ask_git_to_pack()
                return len(folded)
            time.sleep(0.001)
        raise ConflictError(
            f"could not fold the ledger journal after {MAX_TRIES} tries: something outside gitledger keeps "
            f"moving {NOTES_REF}; try again"
        )

    def _ask_git_to_pack(self) -> None:
        """Start ``git gc --auto`` once the folds have left more than :data:`AUTO_GC_PACKS` packs.

        Every lookup may search every pack index, so thousands of small packs (a bot that runs only
        gitledger steps never runs a git command that would consolidate them) made a done step 3.8x
        slower at 1 000 packs. git decides by its own settings (``gc.auto``, ``gc.autoPackLimit``;
        ``gc.autoDetach`` puts the work in the background); this process does not wait for it, and
        asks again only after as many more packs (git may have said no)."""
        packs = self._reader.pack_count()
        if packs <= self._gc_at or (self._gc is not None and self._gc.poll() is None):
            return
        self._gc_at = packs + AUTO_GC_PACKS
        self._gc = self.repo.start("gc", "--auto", "--quiet")

    def _rotate(self, end: int, exclusive: bool) -> None:
        if exclusive:
            self._notice(self.journal.rotate(end))
        else:
            with self.repo.lock(fold=False):
                self._notice(self.journal.rotate(end))

    def _set_aside(self, key: str) -> None:
        lines = self.journal.lines(key)
        self.journal.keep_aside(lines)
        self._notice(
            f"gitledger: {len(lines)} damaged journal line(s) naming {key}, a key without an intent, were "
            f"kept in {self.journal.torn_path}"
        )

    def move_refs(self, updates: list[tuple[str, str, str | None]], fault: str = "") -> bool:
        """Store the pending objects (in a kept pack) and move refs one by one (in the given order) by
        compare-and-swap with a fresh git process, each verified by reading it back. False when a ref
        was not at its expected old value. Call with the ledger lock held."""
        keep = None
        if self._pending:
            objects = [(oid, kind, data) for oid, (kind, data) in self._pending.items()]
            keep = write_pack(self.repo.objects_dir, objects, self.repo.object_format, self._sync_objects())
            self._pending.clear()
            self._reader.rescan()
        if fault:
            faults.point(f"{fault}-objects")
        try:
            if not self._update_refs(updates, fault):
                return False
            if fault:
                faults.point(f"{fault}-refs")
        finally:
            if keep is not None:
                unkeep(keep)
        return True

    def _sync_objects(self) -> bool:
        """Whether to fsync the pack: always with ``durability: fsync``/``full``; otherwise only when git's
        own ``core.fsync`` names packs or objects (the default of git is not taken as a demand here)."""
        if self.durability != "none":
            return True
        value = self._git_fsync or ""
        return bool({p.strip() for p in value.split(",")} & {"all", "committed", "objects", "pack", "added"})

    def _update_refs(self, updates: list[tuple[str, str, str | None]], fault: str) -> bool:
        fsync = None
        if self.durability != "none":
            fsync = f"{self._git_fsync + ',' if self._git_fsync else ''}committed"
        return update_refs_fresh(self.repo, updates, self._ref, fsync, fault, self._notice)

    def write_object(self, kind: str, data: bytes) -> str:
        """An object to store with the next :meth:`move_refs` (readable through this store at once)."""
        oid = hash_object(kind, data, self.repo.object_format)
        self._pending[oid] = (kind, data)
        return oid

    def commit(self, tree: str, parents: list[str | None], message: str) -> str:
        name = os.environ.get("GIT_COMMITTER_NAME", "gitledger")
        email = os.environ.get("GIT_COMMITTER_EMAIL", "gitledger@localhost")
        ident = f"{name} <{email}> {int(time.time())} +0000"
        lines = [f"tree {tree}"] + [f"parent {p}" for p in parents if p]
        lines += [f"author {ident}", f"committer {ident}", "", message]
        return self.write_object("commit", ("\n".join(lines) + "\n").encode())

    def close(self) -> None:
        for loose in self._loose_refs.values():
            loose.close()
        self.journal.close()
        self._reader.close()
        self.repo.close()
