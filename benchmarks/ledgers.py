"""Two baseline ledgers with gitledger's :class:`~gitledger.core.store.Store` semantics, for comparison.

Both are faithful *minimal* implementations of the interface the step protocol uses: ``load(key |
Intent)`` and ``append(intent, event, expected) -> version | None``, a compare-and-swap at the level of
one key (``expected`` is the version the caller decided on; ``ANY_VERSION`` appends unconditionally).

- :class:`JsonFileStore`: the whole ledger is one JSON file ``{key: [event, ...]}``. Every read loads
  and parses the file; every append takes an exclusive ``flock``, loads the file, appends, and writes
  a temporary file that is renamed over the ledger (atomic, crash-safe, no fsync — like gitledger).
  The version of an entry is its number of events (entries are append-only).
- :class:`SqliteStore`: stdlib ``sqlite3``, one table ``ledger(key PRIMARY KEY, version, events)``
  (events as JSON Lines text), WAL journal, one transaction per append; the CAS is
  ``UPDATE ... WHERE key = ? AND version = ?``.
  ``synchronous=NORMAL``: no fsync per commit, the durability gitledger also offers (survives a killed
  process, not necessarily a power loss).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from gitledger.core.events import Entry, Event, encode_event, parse_events
from gitledger.core.store import ANY_VERSION, Intent


def _key(key: str | Intent) -> str:
    return key.key if isinstance(key, Intent) else key


def _clean(event: Event) -> Event:
    return {k: v for k, v in event.items() if not k.startswith("_")}


class JsonFileStore:
    """The whole ledger in one JSON file, rewritten (temp file + rename) on every transition."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    def _read(self) -> dict[str, list[Event]]:
        try:
            with open(self.path, "rb") as fh:
                data: dict[str, list[Event]] = json.load(fh)
                return data
        except FileNotFoundError:
            return {}

    def _write(self, data: dict[str, list[Event]]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".ledger-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, separators=(",", ":"), ensure_ascii=False)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _entry(key: str, events: list[Event] | None) -> Entry:
        if not events:
            return Entry(key, [], None)
        lined = [{**event, "_line": i} for i, event in enumerate(events, start=1)]
        return Entry(key, lined, str(len(events)), location=f"json:{key}")

    def load(self, key: str | Intent) -> Entry:
        name = _key(key)
        return self._entry(name, self._read().get(name))

    def append(self, intent: Intent, event: Event, expected: str | None) -> str | None:
        with self._locked():
            data = self._read()
            events = data.get(intent.key)
            current = str(len(events)) if events else None
            if expected != ANY_VERSION and current != expected:
                return None
            data.setdefault(intent.key, []).append(_clean(event))
            self._write(data)
            return str(len(data[intent.key]))

    def entries(self) -> Iterator[Entry]:
        data = self._read()
        for key in sorted(data):
            yield self._entry(key, data[key])

    def bulk_load(self, items: Iterable[tuple[Intent, list[Event]]]) -> None:
        """Write a whole ledger at once (to build large ledgers fast)."""
        with self._locked():
            data = self._read()
            for intent, events in items:
                data[intent.key] = [_clean(e) for e in events]
            self._write(data)

    def count(self) -> int:
        return len(self._read())

    def close(self) -> None:
        pass


class SqliteStore:
    """One SQLite table, WAL, one transaction per append, CAS through a version column."""

    def __init__(self, path: Path, synchronous: str = "NORMAL") -> None:
        self.path = Path(path)
        # autocommit mode: every statement is its own transaction (BEGIN/COMMIT done by SQLite)
        self.db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if synchronous == 'FULL' else 'NORMAL'}")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS ledger ("
            "key TEXT PRIMARY KEY, task TEXT, step TEXT, digest TEXT, "
            "version INTEGER NOT NULL, events TEXT NOT NULL)"
        )

    def reuse_wal(self, size: int = 8 << 20) -> None:
        """Put the write-ahead log in the state a long-running writer keeps it in: a file of at least
        ``size`` bytes that the next commit overwrites from its start. A new log grows with every
        commit, and each sync then also commits the file's new size; once a checkpoint has reset it,
        SQLite restarts the log in place (``journal_size_limit`` is unlimited by default, so the file
        keeps its size). One commit of a ``size``-byte blob, the table dropped, then a checkpoint that
        makes the next writer restart the log. The log is deleted when the last connection closes,
        so call this on a connection that stays open while it is measured."""
        db = self.db
        db.execute("CREATE TABLE wal_fill (x BLOB)")
        db.execute("INSERT INTO wal_fill VALUES (zeroblob(?))", (size,))
        db.execute("DROP TABLE wal_fill")
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        if busy:
            raise RuntimeError(f"{self.path}: the write-ahead log could not be reset (a reader is active)")

    def load(self, key: str | Intent) -> Entry:
        name = _key(key)
        row = self.db.execute("SELECT version, events FROM ledger WHERE key = ?", (name,)).fetchone()
        if row is None:
            return Entry(name, [], None)
        events, bad = parse_events(row[1].encode())
        return Entry(name, events, str(row[0]), bad, location=f"sqlite:{name}")

    def append(self, intent: Intent, event: Event, expected: str | None) -> str | None:
        line = encode_event(_clean(event)).decode()
        db = self.db
        if expected == ANY_VERSION:
            row = db.execute(
                "INSERT INTO ledger (key, task, step, digest, version, events) VALUES (?, ?, ?, ?, 1, ?) "
                "ON CONFLICT(key) DO UPDATE SET version = version + 1, events = events || excluded.events "
                "RETURNING version",
                (intent.key, intent.task, intent.step, intent.digest, line),
            ).fetchone()
            return str(row[0])
        if expected is None:
            cur = db.execute(
                "INSERT OR IGNORE INTO ledger (key, task, step, digest, version, events) "
                "VALUES (?, ?, ?, ?, 1, ?)",
                (intent.key, intent.task, intent.step, intent.digest, line),
            )
            return "1" if cur.rowcount == 1 else None
        cur = db.execute(
            "UPDATE ledger SET version = version + 1, events = events || ? WHERE key = ? AND version = ?",
            (line, intent.key, int(expected)),
        )
        return str(int(expected) + 1) if cur.rowcount == 1 else None

    def entries(self) -> Iterator[Entry]:
        keys = [row[0] for row in self.db.execute("SELECT key FROM ledger ORDER BY key")]
        for key in keys:
            yield self.load(key)

    def bulk_load(self, items: Iterable[tuple[Intent, list[Event]]]) -> None:
        rows = (
            (i.key, i.task, i.step, i.digest, len(ev), b"".join(encode_event(_clean(e)) for e in ev).decode())
            for i, ev in items
        )
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO ledger (key, task, step, digest, version, events) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM ledger").fetchone()[0])

    def close(self) -> None:
        self.db.close()
