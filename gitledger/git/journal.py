"""The write-ahead journal of the git store: one checksummed line per event.

A line is ``<crc32 8 hex> <key> <intent JSON>\\t<event JSON>\\n`` (:mod:`gitledger.git.journal_format`).
The file is ``<common git dir>/gitledger.journal``.

**Written in place.** The lines are followed by zero bytes up to the end of the file: space written
beforehand (:data:`RESERVE` bytes at a time, by the writer that finds too little), into which each
record is written at the end of the lines (``pwrite``) rather than appended. Syncing a write that
does not change the file's size needs no metadata commit: on ext4 an ``fdatasync`` of an overwrite
costs about half one of an append (``benchmarks/bench_fdatasync.py``; docs/design.md, *Written in
place*). Records are written under the ledger lock held *shared* (many writers at once, each holding
its key's stripe lock); the offset is taken and the record written under an ``flock`` of the journal
file itself, so two writers never take the same place. A reader stops at the first zero byte (JSON
text never holds one). After a power cut the blocks of a later, unsynced record may be on disk
without those of an earlier one (and a damaged block reads as zeros): records behind zeros. A writer
checks that the bytes it writes over, and the byte after them, are zeros, and a process looks behind
the zeros when it opens the file (:attr:`Journal.hidden`); :meth:`Journal.repair`, under the
exclusive lock, puts such records right after the last good line (the file is replaced).
A journal written by an earlier build (appended, no zeros) is read to its end and then written in
place. Once its lines are folded into the notes, the file is replaced (rename) under the ledger lock
held exclusively by one holding what was written after the fold read it (the next writer adds zeros,
so a flushed journal is an empty file); before the rename, the line :data:`ROTATED` after the old
file's last record tells the readers that keep it open.

Reading is incremental: a reader keeps the file open, parses only what was written since it last
looked, and starts over when it meets :data:`ROTATED` and the path names another file. A first read
of :data:`LAZY_MIN` bytes or more that ends in a good record is not parsed at once (a new process
parsed a full journal, ~2 000 lines, in ~9 ms before it could answer for one key): a lookup searches
its bytes for the key and decodes that key's lines only. A line naming the key that is anything but a
whole record of it (damage, a torn fragment before a record, the name inside a value) has them all
parsed first, as have listing the keys, a fold and a key looked up after :data:`LAZY_SEARCHES` others; the
lines parsed since then go behind them.

- A **torn tail** (a last line without its newline, or final lines whose checksum fails: a writer died
  in the middle of a write, before it returned, or a power cut kept part of an unsynced one) is never
  read as an event. Lock-free readers skip it (it may be a write in flight); under the lock
  :meth:`Journal.repair` moves it, and anything else that is not zeros after the last good line, to
  ``gitledger.journal.torn``, writes zeros over it, and says so.
- A torn append followed by another writer's append makes one line ``<fragment><record>``: the
  record is the suffix of the line that passes its checksum (it starts with 8 hex digits and a
  space); the fragment, like a torn tail, was never confirmed to anyone and is never read as an event
  (the fold that empties the journal keeps it in ``gitledger.journal.torn`` and says so).
- A damaged line *followed by good lines* that holds no intact record cannot come from a crash; it is
  kept and shown to its key, in its place among the key's lines (when the key field is readable), as
  an unreadable line, which makes that entry corrupt until ``resolve`` — the same rule as a damaged
  note line. One naming no readable key is kept in ``gitledger.journal.torn`` when the file is replaced.
- Bytes a reader has read change under it in one case: a repair wrote zeros over a torn write, and
  records were then written in its place. A read that straddles the two holds half of each, which
  parses as damage or a fragment; so before a line is kept as either, its bytes are read again, and
  when they changed the reader parses again from its last good line.
"""

import contextlib
import fcntl
import os
import re
import stat
import time

from gitledger.core import crashpoints as faults
from gitledger.core.errors import GitError
from gitledger.git.journal_format import DAMAGED_PREFIX, Record, decode, sort_leftovers, split_torn
from gitledger.git.journal_io import (
    FIRST_READ,
    keep_aside,
    open_noatime,
    read_to_zero,
    remove_leftovers,
    sync_dir,
    sync_later,
    sync_left,
    sync_now,
    write_all,
    write_at,
    zeros_from,
)
from gitledger.git.repo import current_pid, held_for, lock_holders, lock_timeout, take_flock

_KEY = re.compile(rb"[A-Za-z0-9._:-]{1,200}")
_NONZERO = re.compile(rb"[^\0]+")
RESERVE = 256 * 1024  # zeros written ahead of the records at a time (a fold empties up to ~1.1 MiB of lines)
ROTATED = b"#rotated"  # written after the last record of a journal about to be replaced
_MAX_REOPENS = 100  # rotations a lock-free reader follows in one refresh before it settles for a view
PATH_CHECK_SECONDS = 1.0  # how often a refresh looks at the path without a ROTATED line (one stat)
_MAX_REREADS = 100  # parses a refresh starts over when bytes it read changed under it (a repair)
LAZY_MIN = 64 * 1024  # a first read this large is kept unparsed until a lookup needs more than a search
LAZY_SEARCHES = 8  # keys looked up by searching the unparsed lines; the next lookup parses them


class StaleTailError(Exception):
    """Bytes other than zeros lie where the next record would go (leftovers of a power cut): the
    journal needs :meth:`Journal.repair` under the exclusive lock before anyone writes to it."""


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
        self._wpid = current_pid()
        self._check_at = 0.0  # when refresh looks at the path again without a ROTATED line
        self._appended_end = -1  # where the last append of this process ended
        self._reset()

    def _reset(self) -> None:
        self.records: list[Record] = []
        self.by_key: dict[str, list[bytes]] = {}
        self.intents: dict[str, bytes] = {}
        self.damaged: list[tuple[str | None, bytes]] = []  # (key if readable, raw line) mid-file
        # of each damaged line: (how many good lines of its key precede it, the offset after it)
        self._damaged_at: list[tuple[int, int]] = []
        self.fragments: list[bytes] = []  # torn appends of killed writers, before another's record
        self._fragment_ends: list[int] = []  # the offset after the line of each fragment
        self._good_end = 0  # offset just past the last good line
        self._read_end = 0  # offset up to which complete lines were parsed
        self._pending: list[bytes] = []  # complete lines after the last good one that fail the check
        self._partial = b""  # bytes after the last newline
        self._lazy = b""  # the lines of a large first read, not parsed yet (they precede the rest)
        self._lazy_count = 0  # how many lines that is
        self._lazy_found: dict[str, tuple[list[bytes], bytes | None]] = {}  # key -> its lines, intent
        self._lazy_left = LAZY_SEARCHES
        self.hidden = False  # records lie behind zeros after the last good line (see repair)

    @property
    def size(self) -> int:
        """Bytes of good lines."""
        return self._good_end

    @property
    def tail(self) -> bytes:
        """What follows the last good line: a torn append (or nothing)."""
        if not self._pending:
            return self._partial
        return b"".join(line + b"\n" for line in self._pending) + self._partial

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = self._ino = None

    def refresh(self) -> None:
        """Read what was written since the last look (from scratch if the file was replaced).

        Nothing here asks the file for its status (``stat``): with a ``stat`` between two writes, the
        next write's ``fdatasync`` commits the inode too (likely Linux's multigrain timestamps: a file
        whose times were read gets a fine-grained time at its next write; measured 140 -> 231 us a
        sync on ext4, docs/design.md). A rotation tells the readers that keep the old file open by a
        line :data:`ROTATED` after its last record; then the path is looked at again, and at most
        every :data:`PATH_CHECK_SECONDS` otherwise (a journal deleted or replaced by hand, not by a
        fold, is noticed within that time)."""
        if self._fd is not None and time.monotonic() >= self._check_at and self._replaced():
            self._close_fd()
            self._reset()
        for _ in range(_MAX_REOPENS):
            opened = self._fd is None
            if opened and not self._open():
                return
            if self._read():
                if opened:
                    self.hidden = bool(sort_leftovers(self._behind_zeros())[0])
                return
            self._close_fd()  # rotated: the path names the replacement
            self._reset()

    def _behind_zeros(self) -> list[bytes]:
        """The runs of bytes other than zeros that lie after zeros after the last good line (once,
        when the file is opened: a write that lands meanwhile is at the last good line, not behind
        zeros). Records among them were written behind an earlier write a power cut lost, or the file
        was damaged in its middle: :meth:`repair` takes them back in."""
        if self._fd is None or zeros_from(self._fd, self._good_end, os.fstat(self._fd).st_size):
            return []  # the common case: the zeros reserved ahead of the records
        return self._leftovers(behind_zeros=True)[1]

    def _open(self) -> bool:
        self._reset()
        try:  # O_NONBLOCK: a FIFO put at the path must not hang the open (no effect on a file)
            self._fd = open_noatime(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise GitError(f"cannot read the ledger journal {self.path} ({exc.strerror})") from exc
        self._check_at = time.monotonic() + PATH_CHECK_SECONDS
        status = os.fstat(self._fd)
        self._ino = status.st_ino
        if not stat.S_ISREG(status.st_mode):
            self._close_fd()
            raise GitError(
                f"the ledger journal {self.path} is not a file (something else was put there); move it "
                "away, then try again"
            )
        return True

    def _replaced(self) -> bool:
        """Whether the path names another file than the one open (a rotation is complete)."""
        self._check_at = time.monotonic() + PATH_CHECK_SECONDS
        try:
            return os.stat(self.path).st_ino != self._ino
        except FileNotFoundError:
            return True

    def _read(self) -> bool:
        """Parse what follows the last good line; False when the file ends in :data:`ROTATED` and was
        replaced.

        Bytes a reader has read may change under it in one case: a repair (under the exclusive lock)
        writes zeros over a torn write, and the next records are written in its place. A read that
        straddles the two holds half of each, which parses as damage (or a fragment). So before a line
        is kept as damage, its bytes are read again; when they changed, the parse starts over from the
        last good line (a line followed by a good one is never repaired, so the second read holds)."""
        for _ in range(_MAX_REREADS):
            done = self._parse()
            if done is not None:
                return done
        return True  # the lines in question stay a tail: never read as events, read again next time

    def _parse(self) -> bool | None:
        """:meth:`_read` once; None when bytes it was about to keep as damage changed under it."""
        assert self._fd is not None
        # what followed the last good line is read again: a torn tail may have been cut off (by
        # repair) and written over since
        self._pending.clear()
        self._partial = b""
        base = self._read_end = self._good_end
        data = read_to_zero(self._fd, base)[0]
        if not data:
            return True
        if base == 0 and len(data) >= LAZY_MIN and self._defer(data):
            return True
        return self._take(data, base)

    def _take(self, data: bytes, base: int) -> bool | None:
        """Parse ``data``, read at offset ``base`` (see :meth:`_parse`)."""
        assert self._fd is not None
        end = data.rfind(b"\n") + 1
        self._partial = data[end:]
        offset = base
        unsure = base  # where the lines not yet taken in (pending) start
        records, by_key, intents, pending = self.records, self.by_key, self.intents, self._pending
        for raw in data[:end].split(b"\n")[:-1]:  # every other writer's line passes here: kept tight
            start = offset
            offset += len(raw) + 1
            record = decode(raw)
            fragment = b""
            if record is None:
                if raw == ROTATED:
                    if self._replaced():
                        return False
                    # a rotation killed before its rename: what follows is a tail (repair removes it)
                    self._partial = data[start - base :]
                    break
                fragment, record = split_torn(raw)
                if record is None:
                    if not pending:
                        unsure = start
                    pending.append(raw)
                    continue
            if pending or fragment:  # damage or a torn append before a good record, once read again
                first = unsure if pending else start
                if os.pread(self._fd, offset - first, first) != data[first - base : offset - base]:
                    pending.clear()
                    self._partial = data[first - base :]
                    self._read_end = first
                    return None
                if pending:  # damage followed by a good line: not a torn append
                    self._keep_damaged(pending, start)
                    pending.clear()
                if fragment:
                    self.fragments.append(fragment)
                    self._fragment_ends.append(offset)
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
        return True

    def _defer(self, data: bytes) -> bool:
        """Keep the lines of a large first read unparsed when they end in a good record and hold no
        rotation mark: a new process then parses none of the lines it does not ask for (~4.5 us each;
        a full journal is ~2 000). :meth:`_lookup` searches them for a key instead."""
        end = data.rfind(b"\n") + 1
        last = data[data.rfind(b"\n", 0, max(end - 1, 0)) + 1 : end - 1]
        rotated = data.startswith(ROTATED + b"\n") or b"\n" + ROTATED + b"\n" in data
        if not end or rotated or decode(last) is None:
            return False
        self._lazy, self._lazy_count = data[:end], data.count(b"\n", 0, end)
        self._partial = data[end:]
        self._good_end = self._read_end = end
        return True

    def _lookup(self, key: str) -> tuple[list[bytes], bytes | None] | None:
        """(event lines, intent) of ``key`` among the unparsed lines, or None when there are none:
        never, or no longer, because they were parsed here (when a line naming the key is anything but
        a whole record of it, such as damage or a torn fragment before one, or after
        :data:`LAZY_SEARCHES` keys were searched)."""
        lazy = self._lazy
        if not lazy:
            return None
        found = self._lazy_found.get(key)
        if found is not None:
            return found
        try:
            needle = b" " + key.encode()
        except UnicodeEncodeError:  # a key the journal cannot hold (encode() refuses it)
            return [], None
        self._lazy_left -= 1
        if self._lazy_left < 0:
            self._materialize()
            return None
        lines: list[bytes] = []
        intent = None
        at = lazy.find(needle)
        while at != -1:
            after = at + len(needle)
            if lazy[after : after + 1] not in (b" ", b"\n"):  # a longer name: not this key's field
                at = lazy.find(needle, after)
                continue
            start, stop = at - 8, lazy.find(b"\n", after)
            record = decode(lazy[start:stop]) if start == 0 or (start > 0 and lazy[start - 1] == 10) else None
            if record is None:
                self._materialize()
                return None
            lines.append(record.line)
            intent = record.intent if intent is None else intent  # the first line's, as parsed
            at = lazy.find(needle, stop)
        found = self._lazy_found[key] = (lines, intent)
        return found

    def _materialize(self) -> None:
        """Parse the unparsed lines of the first read, in front of the lines parsed since."""
        lazy = self._lazy
        if not lazy:
            return
        # what was parsed since the first read, and where reading stands: put back behind its lines
        later = (self.records, self.by_key, self.intents, self.damaged, self._damaged_at)
        pieces = (self.fragments, self._fragment_ends)
        position = (self._good_end, self._read_end, self._pending, self._partial)
        data = lazy
        for _ in range(_MAX_REREADS):
            self._reset()
            if self._take(data, 0) is not None:
                break
            assert self._fd is not None  # bytes read changed under this reader (a repair): read again
            data = os.pread(self._fd, len(lazy), 0)
        records, by_key, intents, damaged, damaged_at = later
        before = {key: len(lines) for key, lines in self.by_key.items()}
        self.records += records
        for key, lines in by_key.items():
            self.by_key.setdefault(key, []).extend(lines)
        for key, intent in intents.items():
            self.intents.setdefault(key, intent)
        self.damaged += damaged
        self._damaged_at += [
            (index + before.get(key, 0) if key is not None else 0, end)
            for (key, _), (index, end) in zip(damaged, damaged_at, strict=True)
        ]
        self.fragments += pieces[0]
        self._fragment_ends += pieces[1]
        self._good_end, self._read_end, self._pending, self._partial = position

    def _keep_damaged(self, lines: list[bytes], end: int) -> None:
        """Take in damaged lines (followed by a good one) that end at offset ``end``."""
        for raw in lines:
            key = self._damaged_key(raw)
            self.damaged.append((key, raw))
            self._damaged_at.append((len(self.by_key.get(key, ())) if key is not None else 0, end))

    @staticmethod
    def _damaged_key(raw: bytes) -> str | None:
        parts = raw.split(b" ", 2)
        if len(parts) >= 2 and _KEY.fullmatch(parts[1]):
            return parts[1].decode()
        return None

    def lines(self, key: str) -> list[bytes]:
        """The event lines of ``key`` in the journal's order; its damaged lines are returned, in their
        place, in a form that never parses as an event."""
        if self._lazy and self.damaged:
            self._materialize()
        early = self._lookup(key)
        found = (early[0] if early is not None else []) + self.by_key.get(key, [])
        if not self.damaged:
            return found
        placed = 0
        for (bad_key, raw), (index, _) in zip(self.damaged, self._damaged_at, strict=True):
            if bad_key == key:
                found.insert(index + placed, DAMAGED_PREFIX + raw.replace(b"\t", b" "))
                placed += 1
        return found

    def intent_of(self, key: str) -> bytes | None:
        """The intent record of ``key`` (its first line's), or None when the journal holds none."""
        early = self._lookup(key)
        if early is not None and early[1] is not None:
            return early[1]
        return self.intents.get(key)

    def key_names(self) -> list[str]:
        self._materialize()
        keys = set(self.by_key)
        keys.update(k for k, _ in self.damaged if k is not None)
        return sorted(keys)

    def count(self) -> int:
        return self._lazy_count + len(self.records) + len(self.damaged)

    # -- under the ledger lock -------------------------------------------------------------------

    def repair(self) -> str | None:
        """Move what follows the last good line and is not zeros (a torn tail, leftovers of a power
        cut) to ``gitledger.journal.torn`` and write zeros over it; a notice saying so, or None.
        Whole records found behind zeros there are taken back instead (:meth:`_take_back`).

        Only under the ledger lock held exclusively: without it the tail may be a write in flight.
        """
        self.refresh()
        rest, pieces = self._leftovers()
        end = len(rest.rstrip(b"\0"))
        if not end:
            return None
        records, left = sort_leftovers(pieces)
        if records:
            return self._take_back(records, left, rest[:end].count(0))
        if pieces:
            self.keep_aside(pieces)
        write_at(self.path, bytes(end), self._good_end, sync=self.durable)
        self._read_end = self._good_end
        self._pending.clear()
        self._partial = b""
        if not pieces:  # only the mark of a rotation killed before its rename: nothing was lost
            return None
        torn = sum(len(piece) for piece in pieces)
        return (
            f"gitledger: the ledger journal ended in a torn write ({torn} bytes, from a process killed "
            f"while it wrote, or a power cut; that event was never confirmed to anyone); kept in "
            f"{self.torn_path}"
        )

    def _take_back(self, records: list[bytes], torn: list[bytes], zeros: int) -> str:
        """Put ``records``, found behind ``zeros`` zero bytes after the last good line, right after it
        (the file is replaced, as by a fold: never rewritten in place, where a crash could lose the
        only copy); ``torn``, the rest found there, goes to ``gitledger.journal.torn``."""
        assert self._fd is not None
        if torn:
            self.keep_aside(torn)
        lines = os.pread(self._fd, self._good_end, 0)
        self._replace(lines + b"".join(records), "journal-retaken")
        also = f"; {len(torn)} torn piece(s) there kept in {self.torn_path}" if torn else ""
        return (
            f"gitledger: the ledger journal held {len(records)} record(s) behind {zeros} zero byte(s) in its "
            f"middle (the file was damaged there, or a power cut lost a write); they are read again{also}"
        )

    def keep_aside(self, pieces: list[bytes]) -> None:
        """Append ``pieces`` (torn writes, damaged lines) to ``gitledger.journal.torn``, synced with
        the journal's durability: the journal drops them next (:func:`journal_io.keep_aside`)."""
        keep_aside(self.torn_path, pieces, self.durable)

    def _leftovers(self, *, behind_zeros: bool = False) -> tuple[bytes, list[bytes]]:
        """(what follows the last good line, its runs of bytes other than zeros but the mark of a
        rotation killed before its rename); ``behind_zeros``: only the runs after its first zero (the
        bytes at the last good line may be a write in flight)."""
        if self._fd is None:
            return b"", []
        size = os.fstat(self._fd).st_size
        rest = os.pread(self._fd, size - self._good_end, self._good_end) if size > self._good_end else b""
        start = rest.find(0) if behind_zeros else 0
        if start == -1 or rest == bytes(len(rest)):  # the reserved zeros (~8 us for 256 KiB; a regex ~2 ms)
            return rest, []
        pieces = [run.removeprefix(ROTATED + b"\n") for run in _NONZERO.findall(rest, start)]
        return rest, [piece for piece in pieces if piece]

    def append(self, record: bytes) -> int:
        """Write one encoded record after the last one; return the descriptor to :meth:`sync` once the
        lock is released. Raises :class:`StaleTailError` (nothing written) when the place is not clean.

        The caller holds the ledger lock while writing and may release it before syncing: concurrent
        writers' syncs then overlap (group commit), and nobody acts on an event before its own write
        returned, i.e. before it is durable.
        """
        fd = self._append_fd()
        self._lock_place(fd)  # one writer takes a place and writes at a time
        try:
            at = self._place(fd, len(record))
            if faults.ARMED == "journal-torn":
                os.pwrite(fd, record[: len(record) // 2], at)
                faults.point("journal-torn")
            # one write of the whole line; a short write is a torn one (never confirmed), and the next
            # writer's record is still found behind it (split_torn)
            written = os.pwrite(fd, record, at)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        if written != len(record):
            raise OSError(f"{self.path}: short write ({written} of {len(record)} bytes): disk full?")
        self._appended_end = at + len(record)
        return fd

    def settle(self) -> None:
        """Read again once no record is being written: a tail seen by :meth:`refresh` may be another
        writer's record in flight (its write copied in part), which is whole once that writer lets go
        of the journal's lock. A tail that remains is a torn write, for :meth:`repair`.

        Without this, an appender that met a write in flight took the ledger lock exclusively for a
        repair that found nothing: every other writer waited for it."""
        fd = self._append_fd()
        self._lock_place(fd)
        try:
            self.refresh()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_place(self, fd: int) -> None:
        """Take the journal's ``flock``: held for two system calls, so a wait longer than the lock
        timeout (``GITLEDGER_LOCK_TIMEOUT``, default 60 s) means its holder is stopped in them."""
        if not take_flock(fd, fcntl.LOCK_EX):
            held = held_for(lock_timeout(None))
            raise GitError(
                f"the ledger journal {self.path} {held} by {lock_holders(fd)}, stopped in its write "
                "(Ctrl-Z, SIGSTOP); resume or end it, then try again (GITLEDGER_LOCK_TIMEOUT sets the wait)"
            )

    def _place(self, fd: int, length: int) -> int:
        """Where the next record of ``length`` bytes goes: the first zero byte after the last good line
        this process read (others may have written since), once that byte, the ``length`` after it
        and one more are checked to be zeros; the file is extended by zeros when it is too short."""
        need = length + 1  # the record and a zero after it: it is never joined to leftovers
        data, after = read_to_zero(fd, self._good_end, FIRST_READ + need)
        at = self._good_end + len(data)
        after = after[:need]
        if len(after) < need:
            after += os.pread(fd, need - len(after), at + len(after))
        if after.count(0) != len(after):
            raise StaleTailError(f"{self.path}: bytes other than zeros after the last record")
        if len(after) < need:  # the end of the file: add zeros (synced with the record's own sync)
            write_all(fd, bytes(RESERVE + need - len(after)), at + len(after))
        return at

    def appended(self, record: bytes, decoded: Record | None = None) -> None:
        """Take in a record this process just wrote (as :meth:`refresh` would read it, without
        reading it back when nobody else wrote since this process last looked); ``decoded``: the
        record it encodes, when the caller has it."""
        if self._ino is None or self.tail or self._appended_end != self._good_end + len(record):
            self.refresh()
            return
        if decoded is None:
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
        """A descriptor writing to the file at ``path`` now (kept open while it stays that file)."""
        # under the lock, refresh() has just looked at the file: _ino is the inode at the path now
        same_file = self._ino is not None and self._ino == self._wino
        if self._wfd is not None and self._wpid == current_pid() and same_file:
            return self._wfd
        self._close_wfd()
        try:
            try:
                fd = open_noatime(self.path, os.O_RDWR)
            except FileNotFoundError:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                if self.durable:  # the new file's name is durable before any record in it is
                    sync_dir(self.path)
        except OSError as exc:  # e.g. a symbolic link put at the path, into a folder that is gone
            raise GitError(
                f"cannot write the ledger journal {self.path} ({exc.strerror}); make it a writable file "
                "(or move what is there away), then try again"
            ) from exc
        self._wfd, self._wino, self._wpid = fd, os.fstat(fd).st_ino, current_pid()
        return fd

    def _close_wfd(self) -> None:
        if self._wfd is not None and self._wpid == current_pid():
            sync_left(self._wfd)
            with contextlib.suppress(OSError):
                os.close(self._wfd)
        self._wfd = self._wino = None

    def sync(self, fd: int, now: bool = True) -> None:
        """Make this process's records durable (when the journal is): before this returns, or with
        ``now`` false at the latest at the next sync of the file, a close or this process's exit."""
        if self.durable:
            (sync_now if now else sync_later)(fd)

    def rotate(self, end: int | None = None) -> str | None:
        """Replace the journal by a file holding only what follows offset ``end`` (what was appended
        after a fold read the journal up to ``end``; by default nothing): the lines before it are in
        the notes now. Only under the ledger lock held exclusively (no append in flight).

        A torn tail, and the torn fragments before ``end``, are kept in ``gitledger.journal.torn``:
        a notice saying so, or None."""
        self.refresh()
        self._materialize()
        if end is None:
            end = self._good_end
        fd = self._fd
        keep = b""
        if fd is not None and self._good_end > end:
            keep = os.pread(fd, self._good_end - end, end)
        torn = [f for f, at in zip(self.fragments, self._fragment_ends, strict=True) if at <= end]
        records, left = sort_leftovers(self._leftovers()[1])
        keep += b"".join(records)  # behind zeros: events all the same (see repair)
        torn += left
        # damaged lines that name no key were folded into no note: they are kept here
        nameless = [
            raw
            for (key, raw), (_, at) in zip(self.damaged, self._damaged_at, strict=True)
            if key is None and at <= end
        ]
        notice = None
        if torn or nameless:
            self.keep_aside(torn + nameless)
            held = []
            if torn:
                killed = "from processes killed while they wrote; never confirmed to anyone"
                held.append(f"{len(torn)} torn write(s) ({killed})")
            if nameless:
                held.append(f"{len(nameless)} damaged line(s) naming no readable key")
            notice = f"gitledger: the ledger journal held {' and '.join(held)}; kept in {self.torn_path}"
        # the lines written since; the next writer adds zeros (a flushed journal stays empty)
        self._replace(keep, "fold")
        return notice

    def _replace(self, content: bytes, fault: str) -> None:
        """Replace the file by one holding ``content`` (written and synced aside, then renamed over
        it); the readers that keep this file open learn it by the line :data:`ROTATED` after its
        last good line. Crash points ``<fault>-rotate`` and ``<fault>-marked``."""
        remove_leftovers(self.path)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, content, 0)
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        faults.point(f"{fault}-rotate")
        if self._fd is not None:
            write_at(self.path, ROTATED + b"\n", self._good_end, sync=False)
        faults.point(f"{fault}-marked")
        os.replace(tmp, self.path)
        if self.durable:
            sync_dir(self.path)
        self._close_fd()
        self._reset()

    def close(self) -> None:
        self._close_fd()
        self._close_wfd()
