"""The write-ahead journal of the git store: one appended, checksummed line per event.

A line is ``<crc32 8 hex> <key> <intent JSON>\\t<event JSON>\\n``; the checksum covers everything
between the first space and the newline. JSON text never holds a raw tab or newline, so the fields
split unambiguously. The file is ``<common git dir>/gitledger.journal``; it is appended under the
ledger lock held *shared* (many writers at once, each holding its key's stripe lock), each record by
one ``write()`` of the whole line to a descriptor opened ``O_APPEND`` (the kernel never interleaves
two such writes), and replaced by an empty file (rename) under the ledger lock held exclusively once
its lines are folded into the notes.

Reading is incremental: a reader keeps the file open, parses only what was appended since it last
looked, and starts over when the file was replaced (another inode) or shortened.

- A **torn tail** (a last line without its newline, or final lines whose checksum fails: a writer died
  in the middle of an append, before the append returned) is never read as an event. Lock-free readers
  skip it (it may be an append in flight); under the lock :meth:`Journal.repair` moves it to
  ``gitledger.journal.torn`` and cuts it off, and says so.
- A torn append followed by another writer's append makes one line ``<fragment><record>``: the
  record is the suffix of the line that passes its checksum (it starts with 8 hex digits and a
  space); the fragment, like a torn tail, was never confirmed to anyone and is never read as an event
  (the fold that empties the journal keeps it in ``gitledger.journal.torn`` and says so).
- A damaged line *followed by good lines* that holds no intact record cannot come from a crash; it is
  kept and shown to its key (when the key field is readable) as an unreadable line, which makes that
  entry corrupt until ``resolve`` — the same rule as a damaged note line.
"""

import contextlib
import os
import re
import zlib
from typing import NamedTuple

from gitledger.core import crashpoints as faults

DAMAGED_PREFIX = b"#damaged-journal-line "
_KEY = re.compile(rb"[A-Za-z0-9._:-]{1,200}")
_CRC = re.compile(rb"[0-9a-f]{8}")


class Record(NamedTuple):  # a NamedTuple: every other writer's line becomes one (a dataclass is slower)
    key: str
    intent: bytes  # the intent record (JSON, no newline)
    line: bytes  # the event line (JSON, no newline)


def encode(key: str, intent: bytes, line: bytes) -> bytes:
    payload = key.encode() + b" " + intent + b"\t" + line
    if b"\n" in payload or b"\t" in intent or b" " in key.encode():
        raise ValueError("a journal record cannot hold a newline, a tab in the intent or a space in the key")
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def split_torn(raw: bytes) -> tuple[bytes, Record | None]:
    """(torn fragment, record) of a line that is not a record as a whole: its first suffix that is
    one (after the fragments of writers killed in their append), else (the line, None)."""
    at = raw.find(b" ", 9)
    while at != -1:
        start = at - 8
        if start > 0 and _CRC.fullmatch(raw, start, at):
            record = decode(raw[start:])
            if record is not None:
                return raw[:start], record
        at = raw.find(b" ", at + 1)
    return raw, None


def decode(raw: bytes) -> Record | None:
    """The record of one line (without its newline), or None when it is damaged."""
    if len(raw) < 10 or raw[8] != 0x20:
        return None
    payload = raw[9:]
    try:
        crc = int(raw[:8], 16)
    except ValueError:
        return None
    if zlib.crc32(payload) != crc:
        return None
    key, sep, rest = payload.partition(b" ")
    intent, tab, line = rest.partition(b"\t")
    if not sep or not tab:
        return None
    try:
        return Record(key.decode(), intent, line)
    except UnicodeDecodeError:
        return None


class Journal:
    """One journal file, read incrementally."""

    def __init__(self, path: str, durable: bool = True) -> None:
        self.path = path
        self.torn_path = path + ".torn"
        self.durable = durable
        self._fd: int | None = None
        self._ino: int | None = None
        self._wfd: int | None = None  # the append descriptor, kept while the file is the same
        self._wino: int | None = None
        self._wpid = os.getpid()
        self._appended_end = -1  # where the last append of this process ended
        self._reset()

    def _reset(self) -> None:
        self.records: list[Record] = []
        self.by_key: dict[str, list[bytes]] = {}
        self.intents: dict[str, bytes] = {}
        self.damaged: list[tuple[str | None, bytes]] = []  # (key if readable, raw line) mid-file
        self.fragments: list[bytes] = []  # torn appends of killed writers, before another's record
        self._fragment_ends: list[int] = []  # the offset after the line of each fragment
        self._good_end = 0  # offset just past the last good line
        self._read_end = 0  # offset up to which complete lines were parsed
        self._pending: list[bytes] = []  # complete lines after the last good one that fail the check
        self._partial = b""  # bytes after the last newline

    @property
    def size(self) -> int:
        """Bytes of good lines."""
        return self._good_end

    @property
    def tail(self) -> bytes:
        """What follows the last good line: a torn append (or nothing)."""
        return b"".join(line + b"\n" for line in self._pending) + self._partial

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = self._ino = None

    def refresh(self) -> None:
        """Read what was appended since the last look (from scratch if the file was replaced)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._close_fd()
            self._reset()
            return
        if st.st_ino != self._ino or st.st_size < self._good_end:
            self._close_fd()
            self._reset()
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            st = os.fstat(self._fd)
            self._ino = st.st_ino
        assert self._fd is not None
        # what followed the last good line is read again: a torn tail may have been cut off (by
        # repair) and written over since
        self._pending.clear()
        self._partial = b""
        self._read_end = self._good_end
        # up to the size seen now (what is appended meanwhile is read next time): no read when
        # nothing was appended, one when something was (a read to the end costs one more)
        chunks = []
        pos = self._good_end
        while pos < st.st_size:
            chunk = os.pread(self._fd, st.st_size - pos, pos)
            if not chunk:  # cut off meanwhile (repair)
                break
            chunks.append(chunk)
            pos += len(chunk)
        if not chunks:
            return
        data = b"".join(chunks)
        end = data.rfind(b"\n") + 1
        self._partial = data[end:]
        offset = self._read_end
        records, by_key, intents, pending = self.records, self.by_key, self.intents, self._pending
        for raw in data[:end].split(b"\n")[:-1]:  # every other writer's line passes here: kept tight
            offset += len(raw) + 1
            record = decode(raw)
            if record is None:
                fragment, record = split_torn(raw)
                if record is None:
                    pending.append(raw)
                    continue
                if fragment:
                    self.fragments.append(fragment)
                    self._fragment_ends.append(offset)
            if pending:  # damage followed by a good line: not a torn append
                self.damaged.extend((self._damaged_key(bad), bad) for bad in pending)
                pending.clear()
            records.append(record)
            key = record.key
            lines = by_key.get(key)
            if lines is None:
                by_key[key] = [record.line]
                intents.setdefault(key, record.intent)
            else:
                lines.append(record.line)
            self._good_end = offset
        self._read_end = offset

    @staticmethod
    def _damaged_key(raw: bytes) -> str | None:
        parts = raw.split(b" ", 2)
        if len(parts) >= 2 and _KEY.fullmatch(parts[1]):
            return parts[1].decode()
        return None

    def lines(self, key: str) -> list[bytes]:
        """The event lines of ``key`` in order; damaged lines of it are returned in a form that never
        parses as an event."""
        found = list(self.by_key.get(key, ()))
        for bad_key, raw in self.damaged:
            if bad_key == key:
                found.append(DAMAGED_PREFIX + raw.replace(b"\t", b" "))
        return found

    def key_names(self) -> list[str]:
        keys = set(self.by_key)
        keys.update(k for k, _ in self.damaged if k is not None)
        return sorted(keys)

    def count(self) -> int:
        return len(self.records) + len(self.damaged)

    # -- under the ledger lock -------------------------------------------------------------------

    def repair(self) -> str | None:
        """Cut a torn tail off (kept in ``gitledger.journal.torn``); a notice saying so, or None.

        Only under the ledger lock: without it the tail may be an append in flight.
        """
        self.refresh()
        tail = self.tail
        if not tail:
            return None
        with open(self.torn_path, "ab") as fh:
            fh.write(tail if tail.endswith(b"\n") else tail + b"\n")
            if self.durable:
                os.fsync(fh.fileno())
        os.truncate(self.path, self._good_end)
        if self.durable:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._read_end = self._good_end
        self._pending.clear()
        self._partial = b""
        return (
            f"gitledger: the ledger journal ended in a torn write ({len(tail)} bytes, from a process killed "
            f"while it wrote; that event was never confirmed to anyone); kept in {self.torn_path}"
        )

    def append(self, record: bytes) -> int:
        """Append one encoded record; return the descriptor to :meth:`sync` once the lock is released.

        The caller holds the ledger lock while appending and may release it before syncing: concurrent
        writers' syncs then overlap (group commit), and nobody acts on an event before its own append
        returned, i.e. before it is durable.
        """
        fd = self._append_fd()
        if os.environ.get("GITLEDGER_FAULT") == "journal-torn":
            os.write(fd, record[: len(record) // 2])
            faults.point("journal-torn")
        # one write of the whole line: appenders run concurrently, so the rest of a short write could
        # land after another writer's line; a short write is a torn append (never confirmed), and the
        # next writer's record is still found behind it (split_torn)
        written = os.write(fd, record)
        if written != len(record):
            raise OSError(f"{self.path}: short write ({written} of {len(record)} bytes): disk full?")
        self._appended_end = os.lseek(fd, 0, os.SEEK_CUR)
        return fd

    def appended(self, record: bytes) -> None:
        """Take in a record this process just appended (as :meth:`refresh` would read it, without
        reading it back when nobody else appended since this process last looked)."""
        if self._ino is None or self.tail or self._appended_end != self._good_end + len(record):
            self.refresh()
            return
        decoded = decode(record[:-1])
        if decoded is None:
            self.refresh()
            return
        self.records.append(decoded)
        self.by_key.setdefault(decoded.key, []).append(decoded.line)
        self.intents.setdefault(decoded.key, decoded.intent)
        self._good_end += len(record)
        self._read_end = self._good_end

    def _append_fd(self) -> int:
        """A descriptor appending to the file at ``path`` now (kept open while it stays that file)."""
        # under the lock, refresh() has just looked at the file: _ino is the inode at the path now
        same_file = self._ino is not None and self._ino == self._wino
        if self._wfd is not None and self._wpid == os.getpid() and same_file:
            return self._wfd
        self._close_wfd()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._wfd, self._wino, self._wpid = fd, os.fstat(fd).st_ino, os.getpid()
        return fd

    def _close_wfd(self) -> None:
        if self._wfd is not None and self._wpid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(self._wfd)
        self._wfd = self._wino = None

    def sync(self, fd: int) -> None:
        if self.durable:
            os.fdatasync(fd)

    def rotate(self, end: int | None = None) -> str | None:
        """Replace the journal by a file holding only what follows offset ``end`` (what was appended
        after a fold read the journal up to ``end``; by default nothing): the lines before it are in
        the notes now. Only under the ledger lock held exclusively (no append in flight).

        A torn tail, and the torn fragments before ``end``, are kept in ``gitledger.journal.torn``:
        a notice saying so, or None."""
        self.refresh()
        if end is None:
            end = self._good_end
        fd = self._fd
        keep = b""
        if fd is not None and self._good_end > end:
            keep = os.pread(fd, self._good_end - end, end)
        torn = [f for f, at in zip(self.fragments, self._fragment_ends, strict=True) if at <= end]
        tail = self.tail
        notice = None
        if torn or tail:
            pieces = [*torn, tail.rstrip(b"\n")] if tail else torn
            with open(self.torn_path, "ab") as fh:
                fh.write(b"".join(piece + b"\n" for piece in pieces))
                if self.durable:
                    os.fsync(fh.fileno())
            notice = (
                f"gitledger: the ledger journal held {len(pieces)} torn write(s) (from processes killed "
                f"while they wrote; never confirmed to anyone); kept in {self.torn_path}"
            )
        self._remove_leftovers()
        tmp = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(keep)
            while view:
                view = view[os.write(fd, view) :]
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        faults.point("fold-rotate")
        os.replace(tmp, self.path)
        if self.durable:
            dfd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self._close_fd()
        self._reset()
        return notice

    def _remove_leftovers(self) -> None:
        """Remove the ``JOURNAL.<pid>.tmp`` files of rotations killed before their rename. Under the
        exclusive ledger lock no other rotation runs, so every such file is a leftover; its content
        is still in the journal it was to replace (the rename never happened)."""
        folder, name = os.path.split(self.path)
        for entry in os.scandir(folder or "."):
            rest = entry.name.removeprefix(f"{name}.")
            if rest != entry.name and rest.endswith(".tmp") and rest[: -len(".tmp")].isdigit():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)

    def close(self) -> None:
        self._close_fd()
        self._close_wfd()
