"""The ledger's fanned-out trees: cached reads, lookups and writes.

Notes and intents live in trees fanned out by the leading hex digits of their names (``ab/cd/<rest>``,
:data:`~gitledger.git.store.FANOUT` levels, as ``git notes`` does once a tree grows; notes written by
git at another fan-out are found too). A **fan-out level** written by gitledger holds only
two-character subtrees: 256 fixed-size records in name order at most. Such a level is kept as its raw
bytes: a lookup searches them at C speed instead of parsing 256 entries, and a write splices the new
records in instead of parsing and formatting the level again (a fold rewrites about a hundred of
them). Trees are immutable, so everything read is cached.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from gitledger.core.errors import CorruptLedgerError
from gitledger.git.repo import format_tree, parse_tree

TREE = "40000"
BLOB = "100644"
_NOTE_MODES = (BLOB, "100755")
_HEX_NAME = re.compile(r"[0-9a-f]+")
_MAX_DEPTH = 40  # levels a note can be below a ledger's root (one per two hex digits of its name)
_MIN_ID = 16  # hex digits, fan-out included, a ledger leaf is named by at least (a key digest: 24, an id: 40)


class Trees:
    """The trees of one repository, read through ``read_as(oid, kind)`` and written through
    ``write_object(kind, data) -> oid`` (the store's: objects wait there for the fold's pack)."""

    def __init__(
        self,
        read_as: Callable[[str, str], bytes | None],
        write_object: Callable[[str, bytes], str],
        oid_len: int,
    ) -> None:
        self._read_as = read_as
        self._write_object = write_object
        self._oid_len = oid_len
        self._trees: dict[str, dict[str, tuple[str, str]]] = {}
        self._fanout_levels: dict[str, bytes] = {}  # raw fan-out levels, searched without parsing

    def tree(self, oid: str | None) -> dict[str, tuple[str, str]]:
        """{name: (mode, oid)} of a tree; trees are immutable, so they are cached."""
        if oid is None:
            return {}
        cached = self._trees.get(oid)
        if cached is None:
            data = self._read_as(oid, "tree")
            if data is None:
                raise CorruptLedgerError(f"ledger tree {oid} is missing or not a tree; the ledger is damaged")
            cached = self._parse_tree(oid, data)
        return cached

    def _parse_tree(self, oid: str, data: bytes) -> dict[str, tuple[str, str]]:
        parsed = {name: (mode, child) for mode, name, child in parse_tree(data, self._oid_len)}
        if len(self._trees) > 50_000:
            self._trees.clear()
        self._trees[oid] = parsed
        return parsed

    def _fanout_level(self, tree: str) -> bytes | None:
        """The raw bytes of a tree that is a fan-out level written by gitledger (only two-character
        subtrees: fixed-size records in name order), else None (cached)."""
        raw = self._fanout_levels.get(tree)
        if raw is not None:
            return raw
        if tree in self._trees:
            return None
        data = self._read_as(tree, "tree")
        if data is None:  # missing or damaged: tree() says so
            return None
        size = 9 + self._oid_len  # "40000 ab\0" + oid
        count = len(data) // size
        regular = (
            count > 0
            and len(data) == count * size
            and data[::size] == b"4" * count
            and data[5::size] == b" " * count
            and data[8::size] == b"\0" * count
        )
        if not regular:  # parsed now, while its bytes are at hand (a leaf of notes, a flat tree)
            self._parse_tree(tree, data)
            return None
        if len(self._fanout_levels) > 4096:
            self._fanout_levels.clear()
        self._fanout_levels[tree] = data
        return data

    def _child(self, tree: str, name: str) -> tuple[str, str] | None:
        """(mode, oid) of ``name`` in a tree. A fan-out level is searched in its raw bytes instead of
        being parsed whole."""
        cached = self._trees.get(tree)
        if cached is not None:
            return cached.get(name)
        raw = self._fanout_level(tree)
        if raw is None:
            return self.tree(tree).get(name)
        if len(name) != 2:
            return None
        sub = self._level_child(raw, name)
        return None if sub is None else (TREE, sub)

    def _level_child(self, raw: bytes, name: str) -> str | None:
        """The oid of the two-character subtree ``name`` of a fan-out level's raw bytes, or None."""
        size = 9 + self._oid_len
        needle = b"40000 " + name.encode("utf-8", "surrogateescape") + b"\0"
        at = raw.find(needle)
        while at != -1 and at % size:
            at = raw.find(needle, at + 1)
        return None if at == -1 else raw[at + 9 : at + size].hex()

    def find(self, tree: str | None, name: str) -> tuple[list[str], str] | None:
        """Locate ``name`` in a fanned-out tree: (path components, blob oid), whatever the fanout."""
        path: list[str] = []
        rest = name
        while tree is not None:
            raw = self._fanout_level(tree)
            if raw is not None:  # a fan-out level holds only two-character subtrees
                if len(rest) <= 2:
                    return None
                head = rest[:2]
                tree = self._level_child(raw, head)
                path.append(head)
                rest = rest[2:]
                continue
            hit = self._child(tree, rest)
            if hit is not None:
                return [*path, rest], hit[1]
            if len(rest) <= 2:
                return None
            sub = self._child(tree, rest[:2])
            if sub is None or sub[0] != TREE:
                return None
            path.append(rest[:2])
            rest = rest[2:]
            tree = sub[1]
        return None

    def foreign_entry(self, tree: str, notes: bool = True) -> str | None:
        """Why ``tree`` cannot be a ledger's root (e.g. "its tree holds 'README'"), or None.

        A ledger's tree holds fan-out levels (two hex digits) down to notes named by hex ids (``git
        notes`` lays a small notes tree out flat). A project's commit (a ledger ref pointed at a
        branch by hand) has other names somewhere on the way down, and read as a ledger it looked
        empty: done steps ran again. So the first path down is walked (a few cached reads, once per
        tip) until a note: each level must hold an entry of a ledger (a stray file beside them is
        ignored, as lookups ignore it). A damaged level ends the walk: lookups report it there.

        ``notes``: the tree of the notes ref, whose notes are named by the object ids they annotate
        (all their hex digits); else the intents ref's, named by key digests (fewer). Each ledger ref
        pointed at the other's commit read as an empty ledger too."""
        where, named = "its tree", 0  # hex digits of the names on the way down
        for depth in range(_MAX_DEPTH):
            try:
                level = self._fanout_level(tree)
                entries = {} if level is not None else self.tree(tree)
            except CorruptLedgerError:
                if depth == 0:
                    raise
                return None
            if level is not None:  # two-character subtrees only
                name = level[6:8].decode("utf-8", "replace")
                if not _HEX_NAME.fullmatch(name):
                    return f"{where} holds {name!r}"
                tree, where, named = level[9 : 9 + self._oid_len].hex(), f"{where} under {name}/", named + 2
                continue
            ledger = sorted(
                (name, mode, oid)
                for name, (mode, oid) in entries.items()
                if _HEX_NAME.fullmatch(name)
                and (len(name) == 2 if mode == TREE else mode in _NOTE_MODES and named + len(name) >= _MIN_ID)
            )
            leaf = next((name for name, mode, _ in ledger if mode != TREE), None)
            if leaf is not None:  # a note: named as this ref's notes are?
                digits, full = named + len(leaf), self._oid_len * 2
                if notes == (digits == full):
                    return None
                named_by = "an object id" if digits == full else "a key digest"
                other = "intents" if notes else "notes"
                return f"its entries are named by {named_by}, as the {other} ref's are"
            if not ledger:
                return f"{where} holds {min(entries)!r}" if entries else f"{where} is empty"
            name, _, tree = ledger[0]
            where, named = f"{where} under {name}/", named + 2
        return None

    def walk(self, tree: str | None, prefix: str = "") -> Iterator[tuple[str, str]]:
        """Every (full name, blob oid) below a fanned-out tree."""
        for name, (mode, oid) in sorted(self.tree(tree).items()):
            if mode == TREE:
                yield from self.walk(oid, prefix + name)
            else:
                yield prefix + name, oid

    def write_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        """Write a tree from {name: (mode, oid)} (and cache it); return its oid."""
        oid = self._write_object("tree", format_tree(entries))
        self._trees[oid] = dict(entries)
        return oid

    def put_many(self, tree: str | None, changes: dict[tuple[str, ...], str]) -> str:
        """Write the trees of ``tree`` with each path of ``changes`` set to its blob; the new root."""
        groups: dict[str, dict[tuple[str, ...], str]] = {}
        blobs: dict[str, str] = {}
        for path, blob in changes.items():
            if len(path) == 1:
                blobs[path[0]] = blob
            else:
                groups.setdefault(path[0], {})[path[1:]] = blob
        level = b"" if tree is None else self._fanout_level(tree)
        if level is not None and not blobs and all(len(head.encode()) == 2 for head in groups):
            # a fan-out level: its new records are spliced into its raw bytes (a fold rewrites a
            # hundred 256-entry levels; parsing and formatting each was most of a fold's time)
            children = {}
            for head, sub in groups.items():
                hit = self._child(tree, head) if tree is not None else None
                children[head] = self.put_many(hit[1] if hit else None, sub)
            raw = self._splice_level(level, children)
            oid = self._write_object("tree", raw)
            self._fanout_levels[oid] = raw
            return oid
        entries = dict(self.tree(tree))
        entries.update((name, (BLOB, blob)) for name, blob in blobs.items())
        for head, sub in groups.items():
            current = entries.get(head)
            entries[head] = (
                TREE,
                self.put_many(current[1] if current and current[0] == TREE else None, sub),
            )
        return self.write_tree(entries)

    def _splice_level(self, raw: bytes, children: dict[str, str]) -> bytes:
        """A fan-out level's raw bytes with each two-character subtree of ``children`` set to its oid."""
        size = 9 + self._oid_len
        pieces = []
        pos = 0  # records before pos are copied already
        for name in sorted(children):
            needle = name.encode()
            lo, hi = pos // size, len(raw) // size
            while lo < hi:  # the first record whose name is not below this one
                mid = (lo + hi) // 2
                if raw[mid * size + 6 : mid * size + 8] < needle:
                    lo = mid + 1
                else:
                    hi = mid
            at = lo * size
            pieces.append(raw[pos:at])
            pieces.append(b"40000 " + needle + b"\0" + bytes.fromhex(children[name]))
            pos = at + size if raw[at + 6 : at + 8] == needle else at
        pieces.append(raw[pos:])
        return b"".join(pieces)
