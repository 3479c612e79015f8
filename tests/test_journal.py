"""The write-ahead journal file: checksummed lines, incremental reads, torn tails, rotation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gitledger.git import journal as journal_module
from gitledger.git import journal_io
from gitledger.git.journal import ROTATED, Journal, StaleTailError
from gitledger.git.journal_format import DAMAGED_PREFIX, decode, encode


def rec(key: str, n: int) -> bytes:
    return encode(key, b'{"key":"%s"}' % key.encode(), b'{"id":"%d","state":"attempting"}' % n)


def write(j: Journal, data: bytes) -> None:
    j.sync(j.append(data))


def lines_of(path: str) -> bytes:
    """The journal's lines: what precedes the zeros written ahead of them."""
    return Path(path).read_bytes().partition(b"\0")[0]


def put(path: str, data: bytes, gap: int = 0) -> None:
    """Write ``data`` ``gap`` bytes after the journal's lines, as a writer killed in its write (or
    a power cut) leaves it."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, len(lines_of(path)) + gap)
    finally:
        os.close(fd)


def test_encode_decode_and_checksum(tmp_path: Path) -> None:
    line = rec("a.b.c", 1)
    record = decode(line[:-1])
    assert record is not None and record.key == "a.b.c" and record.line == b'{"id":"1","state":"attempting"}'
    flipped = bytearray(line[:-1])
    flipped[20] ^= 1
    assert decode(bytes(flipped)) is None


def test_incremental_reads_and_rotation(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    writer, reader = Journal(path), Journal(path)
    reader.refresh()
    assert reader.records == []
    write(writer, rec("k1", 1))
    write(writer, rec("k2", 2))
    reader.refresh()
    assert [r.key for r in reader.records] == ["k1", "k2"]
    write(writer, rec("k1", 3))
    reader.refresh()
    assert len(reader.lines("k1")) == 2 and reader.count() == 3
    writer.rotate()
    assert os.path.getsize(path) == 0  # a flushed journal holds no zeros either (not growth)
    reader.refresh()
    assert reader.records == [] and reader.key_names() == []
    write(writer, rec("k3", 4))
    reader.refresh()
    assert reader.key_names() == ["k3"]


def test_torn_tail_is_skipped_then_cut_off_under_the_lock(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    full = rec("k2", 2)
    put(path, full[:-7])  # a writer killed in the middle of its write
    reader = Journal(path)
    reader.refresh()
    assert reader.key_names() == ["k1"] and reader.tail == full[:-7]
    notice = j.repair()
    assert notice is not None and "torn write" in notice
    assert Path(path + ".torn").read_bytes() == full[:-7] + b"\n"
    assert lines_of(path) == rec("k1", 1) and not Path(path).read_bytes()[len(rec("k1", 1)) :].strip(b"\0")
    write(j, rec("k3", 3))  # appends after the repair are whole lines again
    reader.refresh()
    assert reader.key_names() == ["k1", "k3"] and reader.damaged == [] and reader.tail == b""
    assert j.repair() is None


def test_a_complete_line_with_a_bad_checksum_at_the_end_is_a_torn_tail(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    bad = bytearray(rec("k2", 2))
    bad[12:20] = b"\xff" * 8  # a block of an unsynced write that a power cut kept half of
    put(path, bytes(bad))
    j.refresh()
    assert j.key_names() == ["k1"] and j.damaged == []
    assert j.repair() is not None and lines_of(path) == rec("k1", 1)


def test_records_behind_zeros_are_taken_back_never_written_next_to(tmp_path: Path) -> None:
    """Zeros, then a record: a power cut kept the blocks of a later record and lost an earlier one's,
    or the file was damaged in its middle. A reader stops at the zeros; a writer never writes next to
    the record (StaleTailError), and the repair under the lock puts it right after the last good
    line, as an event: moved aside, a confirmed step's lines were lost and the step ran again."""
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    later = rec("k9", 9)
    put(path, later, gap=len(rec("k2", 2)))  # exactly the room for the next record
    reader = Journal(path)
    reader.refresh()
    assert reader.key_names() == ["k1"] and reader.tail == b"" and reader.hidden
    j.refresh()
    with pytest.raises(StaleTailError):
        j.append(rec("k2", 2))
    assert lines_of(path) == rec("k1", 1)  # nothing written
    notice = j.repair()
    assert notice is not None and f"1 record(s) behind {len(rec('k2', 2))} zero byte(s)" in notice, notice
    assert not Path(path + ".torn").exists() and lines_of(path) == rec("k1", 1) + later
    write(j, rec("k2", 2))
    write(j, rec("k3", 3))
    reader.refresh()
    assert reader.key_names() == ["k1", "k2", "k3", "k9"] and not reader.hidden
    assert lines_of(path) == rec("k1", 1) + later + rec("k2", 2) + rec("k3", 3)


def test_a_long_stretch_of_zeros_hides_nothing_from_a_new_process(tmp_path: Path) -> None:
    """A stretch of zeros longer than a record (a damaged block) with records, a damaged line and a
    torn piece behind it: a writer would place its record inside the zeros, so a new process looks
    behind them when it opens the file, and the repair takes the records back in order and keeps
    the rest aside."""
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    behind = rec("k2", 2) + b"0badc0de not a record\n" + rec("k3", 3) + b"a torn tail"
    put(path, behind, gap=5000)
    fresh = Journal(path)
    fresh.refresh()
    assert fresh.key_names() == ["k1"] and fresh.hidden
    notice = fresh.repair()
    assert notice is not None and "2 record(s) behind 5000 zero byte(s)" in notice
    assert "2 torn piece(s)" in notice
    assert lines_of(path) == rec("k1", 1) + rec("k2", 2) + rec("k3", 3)
    assert Path(path + ".torn").read_bytes() == b"0badc0de not a record\na torn tail\n"
    j.refresh()  # a reader that kept the old file open follows the replacement
    assert j.key_names() == ["k1", "k2", "k3"]
    write(j, rec("k4", 4))
    again = Journal(path)
    again.refresh()
    assert again.key_names() == ["k1", "k2", "k3", "k4"] and not again.hidden


@pytest.mark.parametrize("point", ["journal-retaken-rotate", "journal-retaken-marked"])
def test_taking_records_back_killed_midway_loses_and_doubles_nothing(tmp_path: Path, point: str) -> None:
    """The repair that takes records back replaces the file (never rewrites it in place): killed
    before the rename, with or without the mark that tells readers, the old file still holds every
    record, and the next repair takes them back once."""
    path = str(tmp_path / "journal")
    write(Journal(path), rec("k1", 1))
    put(path, rec("k2", 2) + rec("k3", 3), gap=3000)
    code = "import sys\nfrom gitledger.git.journal import Journal\nJournal(sys.argv[1]).repair()\n"
    env = {**os.environ, "GITLEDGER_FAULT": point}
    killed = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    reader = Journal(path)
    reader.refresh()
    assert reader.key_names() == ["k1"] and reader.hidden
    assert reader.repair() is not None
    assert lines_of(path) == rec("k1", 1) + rec("k2", 2) + rec("k3", 3)
    assert not Path(path + ".torn").exists() and os.listdir(tmp_path) == ["journal"]


def test_a_fold_keeps_the_records_behind_zeros(tmp_path: Path) -> None:
    """The rotation after a fold reads what follows the last good line too: records behind zeros go
    into the new journal (the fold had not seen them), not aside."""
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    put(path, rec("k2", 2), gap=3000)
    j.refresh()
    assert j.rotate() is None
    assert lines_of(path) == rec("k2", 2) and not Path(path + ".torn").exists()


def test_a_write_in_flight_at_the_end_is_not_behind_zeros(tmp_path: Path) -> None:
    """What lands at the last good line between a new reader's read and its look behind the zeros is
    a record being appended, not one behind zeros."""
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    reader = Journal(path)
    real = journal_module.Journal._read

    def read_then_append(self: Journal) -> bool:
        done = real(self)
        if self is reader:
            put(path, rec("k2", 2))  # another writer's record, right after the lines read
        return done

    journal_module.Journal._read = read_then_append  # type: ignore[method-assign]
    try:
        reader.refresh()
    finally:
        journal_module.Journal._read = real  # type: ignore[method-assign]
    assert reader.key_names() == ["k1"] and not reader.hidden
    reader.refresh()
    assert reader.key_names() == ["k1", "k2"]


def test_a_rotation_killed_after_its_mark_loses_nothing(tmp_path: Path) -> None:
    """The mark that tells readers a journal is replaced, left by a fold killed before its rename: the
    file is still the journal; its lines stay readable, the mark is removed without a notice."""
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    put(path, ROTATED + b"\n")
    reader = Journal(path)
    reader.refresh()
    assert reader.key_names() == ["k1"] and reader.tail == ROTATED + b"\n"
    assert j.repair() is None and not os.path.exists(path + ".torn")
    write(j, rec("k2", 2))
    reader.refresh()
    assert reader.key_names() == ["k1", "k2"] and reader.tail == b""


def test_a_reader_that_is_up_to_date_never_asks_for_the_files_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a file's times makes Linux stamp its next write finely, and that write's fdatasync then
    commits the inode too: the refresh between two writes reads, nothing more."""
    monkeypatch.setattr(journal_module, "PATH_CHECK_SECONDS", 3600.0)
    path = str(tmp_path / "journal")
    j, reader = Journal(path), Journal(path)
    write(j, rec("k1", 1))
    reader.refresh()

    write(j, rec("k2", 2))  # the writer's descriptors are open
    j.refresh()
    fds = {j._fd, j._wfd, reader._fd}
    asked: list[object] = []
    real_stat, real_fstat = os.stat, os.fstat

    def stat(name: str, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(name) == path:
            asked.append(name)
        return real_stat(name, *args, **kwargs)

    def fstat(fd: int) -> os.stat_result:
        if fd in fds:
            asked.append(fd)
        return real_fstat(fd)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "fstat", fstat)
    for n in range(3, 6):
        j.refresh()
        write(j, rec(f"k{n}", n))
        j.appended(rec(f"k{n}", n))
        reader.refresh()
    assert reader.key_names() == j.key_names() == ["k1", "k2", "k3", "k4", "k5"] and asked == []


def test_a_journal_written_by_an_earlier_build_is_read_then_written_in_place(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    Path(path).write_bytes(rec("k1", 1) + rec("k2", 2))  # appended, no zeros after
    j = Journal(path)
    j.refresh()
    write(j, rec("k3", 3))
    fresh = Journal(path)
    fresh.refresh()
    assert fresh.key_names() == ["k1", "k2", "k3"] and lines_of(path) == rec("k1", 1) + rec("k2", 2) + rec(
        "k3", 3
    )
    assert os.path.getsize(path) > len(lines_of(path))  # zeros written ahead


def test_damage_in_the_middle_is_shown_to_its_key(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    good = rec("k1", 1)
    bad = bytearray(rec("k2", 2))
    bad[-5] ^= 0x20
    Path(path).write_bytes(good + bytes(bad) + rec("k3", 3))
    j = Journal(path)
    j.refresh()
    assert j.key_names() == ["k1", "k2", "k3"]
    assert j.lines("k2")[0].startswith(DAMAGED_PREFIX)
    assert j.repair() is None  # not a torn tail: kept


def test_a_torn_append_followed_by_another_writers_record_loses_neither_reading(tmp_path: Path) -> None:
    """Appenders run concurrently: one killed in its write() leaves a fragment without its newline, and
    the next writer's whole line lands right behind it. The record is found; the fragment is never an
    event, and the rotation after the fold keeps it aside and says so."""
    path = str(tmp_path / "journal")
    j, other = Journal(path), Journal(path)
    write(j, rec("k1", 1))
    other.refresh()  # this writer looked before the fragment was written
    torn = rec("k2", 2)
    put(path, torn[:-7])  # killed in its write
    write(other, rec("k3", 3))
    reader = Journal(path)
    reader.refresh()
    assert reader.key_names() == ["k1", "k3"] and reader.damaged == [] and reader.tail == b""
    assert reader.fragments == [torn[:-7]]
    assert reader.lines("k3") == [decode(rec("k3", 3)[:-1]).line]  # type: ignore[union-attr]
    notice = reader.rotate()
    assert notice is not None and "torn write" in notice
    assert Path(path + ".torn").read_bytes() == torn[:-7] + b"\n"
    # a whole record without its newline is torn too (its append did not return)
    write(j, rec("k4", 4))
    put(path, rec("k5", 5)[:-1])
    write(j, rec("k6", 6))
    reader.refresh()
    assert reader.key_names() == ["k4", "k6"] and reader.fragments == [rec("k5", 5)[:-1]]


def test_damage_without_an_intact_record_behind_it_stays_damage(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    bad = bytearray(rec("k2", 2))
    bad[-5] ^= 0x20  # a flipped bit inside the record: no suffix of the line passes its checksum
    Path(path).write_bytes(rec("k1", 1) + bytes(bad) + rec("k3", 3))
    j = Journal(path)
    j.refresh()
    assert j.fragments == [] and j.lines("k2")[0].startswith(DAMAGED_PREFIX)


def test_an_append_after_other_writers_appends_is_taken_in_at_its_place(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    a, b = Journal(path), Journal(path)
    for n in range(3):
        a.refresh()
        record = rec("ka", n)
        write(a, record)
        a.appended(record)
        write(b, rec("kb", n))  # b appends behind a's back
    record = rec("ka", 9)
    a.refresh()
    write(b, rec("kb", 9))
    write(a, record)
    a.appended(record)  # not at a's last known end: read again
    fresh = Journal(path)
    fresh.refresh()
    assert a.records == fresh.records and a.size == fresh.size == len(lines_of(path))


def test_a_journal_replaced_by_hand_is_noticed_within_the_check_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a ROTATED line (the file deleted or replaced by hand, not by a fold), readers and writers
    that keep the old file open look at the path again every PATH_CHECK_SECONDS."""
    monkeypatch.setattr(journal_module, "PATH_CHECK_SECONDS", 0.0)
    path = str(tmp_path / "journal")
    j, reader = Journal(path), Journal(path)
    write(j, rec("k1", 1))
    reader.refresh()
    assert reader.key_names() == ["k1"]
    Path(path + ".new").write_bytes(rec("k9", 9))
    os.replace(path + ".new", path)
    reader.refresh()
    assert reader.key_names() == ["k9"]
    j.refresh()
    write(j, rec("k2", 2))  # into the file at the path, not the replaced one
    fresh = Journal(path)
    fresh.refresh()
    assert fresh.key_names() == ["k2", "k9"]
    os.unlink(path)
    reader.refresh()
    assert reader.key_names() == []


def test_a_read_that_straddles_a_repair_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers take no lock. One reads the first 8 KiB of a journal that ends in a torn write (a writer
    killed in it); before its next read, the torn write is repaired (zeros, under the exclusive lock)
    and two records are written in its place. The bytes it holds are half the torn write and half a
    record: it reads them again, sees they changed, and ends with both records and no damage. Without
    that, the record would be missing from its view, and a fold of that view would drop it."""
    path = str(tmp_path / "journal")
    writer = Journal(path, durable=False)
    n = 0
    while writer.size < journal_io.FIRST_READ - 400:
        record = encode(f"k{n}", b"{}", b'{"state":"attempting","pad":"%s"}' % (b"x" * 100))
        write(writer, record)
        writer.appended(record)
        n += 1
    torn = encode("victim", b"{}", b'{"pad":"%s"}' % (b"y" * 900))[:700]  # crosses the first 8 KiB
    put(path, torn)
    real_pread = os.pread
    reads = []

    def pread(fd: int, size: int, at: int) -> bytes:
        data = real_pread(fd, size, at)
        reads.append(at)
        if len(reads) == 1:  # between the reader's first and second read: a repair and two appends
            monkeypatch.setattr(os, "pread", real_pread)
            repairer = Journal(path, durable=False)
            assert repairer.repair() is not None
            for key in ("a", "b"):
                repairer.refresh()
                write(repairer, encode(key, b"{}", b'{"state":"attempting","pad":"%s"}' % (b"z" * 600)))
            monkeypatch.setattr(os, "pread", pread)
        return data

    reader = Journal(path, durable=False)
    monkeypatch.setattr(os, "pread", pread)
    reader.refresh()
    monkeypatch.setattr(os, "pread", real_pread)
    assert len(reads) > 2  # it did read the changed bytes again
    assert "a" in reader.key_names() and "b" in reader.key_names()
    assert reader.damaged == [] and reader.fragments == [] and reader.tail == b""
    assert reader.count() == n + 2
    truth = Journal(path, durable=False)
    truth.refresh()
    assert truth.key_names() == reader.key_names() and truth.size == reader.size


def test_damaged_lines_stay_in_their_place_among_their_keys_lines(tmp_path: Path) -> None:
    """A damaged line is returned where it was written, so the merged note (and its version) is the
    same before and after a fold, and a line appended after it goes after it."""
    path = str(tmp_path / "journal")
    bad = bytearray(rec("k1", 2))
    bad[-5] ^= 0x20
    Path(path).write_bytes(rec("k1", 1) + bytes(bad) + rec("k1", 3) + rec("k2", 4))
    j = Journal(path)
    j.refresh()
    lines = j.lines("k1")
    assert len(lines) == 3 and lines[1].startswith(DAMAGED_PREFIX)
    assert [decode(rec("k1", i)[:-1]).line for i in (1, 3)] == [lines[0], lines[2]]  # type: ignore[union-attr]


def test_damaged_lines_that_name_no_key_are_kept_when_the_journal_is_replaced(tmp_path: Path) -> None:
    """No note takes a damaged line whose key field is unreadable: the rotation keeps it aside, says so."""
    path = str(tmp_path / "journal")
    Path(path).write_bytes(rec("k1", 1) + b"garbage !not-a-key!\n" + rec("k3", 3))
    j = Journal(path)
    j.refresh()
    assert j.damaged == [(None, b"garbage !not-a-key!")]
    notice = j.rotate()
    assert notice is not None and "1 damaged line(s) naming no readable key" in notice
    assert Path(path + ".torn").read_bytes() == b"garbage !not-a-key!\n"


def test_a_writer_stopped_inside_the_journal_lock_is_waited_for_at_most_the_lock_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal's own lock is held for two system calls; a process stopped in them (Ctrl-Z) holds
    it. An appender waits at most ``GITLEDGER_LOCK_TIMEOUT``, then fails saying why, having written
    nothing; once the lock is free, it appends."""
    import subprocess
    import sys
    import time

    from gitledger.core.errors import GitError

    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n",
            path,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setenv("GITLEDGER_LOCK_TIMEOUT", "0.5")
        j.refresh()
        started = time.monotonic()
        with pytest.raises(GitError, match=rf"held for 0\.5 s by process {holder.pid}, stopped in its write"):
            j.append(rec("k2", 2))
        assert 0.4 < time.monotonic() - started < 10
        assert lines_of(path) == rec("k1", 1)
    finally:
        holder.kill()
        holder.wait()
    write(j, rec("k2", 2))
    assert lines_of(path) == rec("k1", 1) + rec("k2", 2)


def test_a_repair_killed_after_keeping_the_torn_write_keeps_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repair that dies after copying the torn write to gitledger.journal.torn and before writing
    zeros over it leaves the torn write in the journal: the next repair finds the same bytes and must
    not copy them a second time. A different torn write later is kept after it."""
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    full = rec("k2", 2)
    put(path, full[:-7])

    def killed(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt  # the process ends here: nothing after this runs

    with monkeypatch.context() as patch:
        patch.setattr(journal_module, "write_at", killed)
        with pytest.raises(KeyboardInterrupt):
            Journal(path).repair()
    assert Path(path + ".torn").read_bytes() == full[:-7] + b"\n"
    assert Journal(path).repair() is not None  # the torn write is still in the journal
    assert Path(path + ".torn").read_bytes() == full[:-7] + b"\n"
    write(j, rec("k3", 3))
    other = rec("k4", 4)
    put(path, other[:-9])
    assert Journal(path).repair() is not None
    assert Path(path + ".torn").read_bytes() == full[:-7] + b"\n" + other[:-9] + b"\n"


def big_journal(path: str, writer: Journal) -> list[str]:
    """A journal over :data:`LAZY_MIN` with every kind of line a reader meets, written by ``writer``;
    the keys it holds."""
    pad = b"p" * 150
    keys = [f"k{n}" for n in range(40)] + ["kp", "kp2", "dam", "frag", "text", "nl", "both", "empty"]
    for n in range(500):
        key = keys[n % 40]
        write(writer, encode(key, b'{"key":"%s"}' % key.encode(), b'{"n":%d,"pad":"%s"}' % (n, pad)))
    write(writer, rec("kp", 1))
    write(writer, rec("kp2", 2))
    write(writer, encode("empty", b"", b'{"n":1}'))  # its intent is its first line's, empty or not
    write(writer, encode("empty", b"{}", b'{"n":2}'))
    write(writer, rec("dam", 3))
    bad = bytearray(rec("dam", 4))
    bad[-5] ^= 0x20  # damage followed by good lines: kept, shown to its key
    put(path, bytes(bad))
    write(writer, rec("dam", 5))
    write(writer, rec("both", 6))
    put(path, rec("k9", 7)[:-9])  # a writer killed in its write, then another's record right behind
    write(writer, rec("frag", 8))
    write(writer, encode("k1", b"{}", b'{"message":"retry text now","n":9}'))  # " text " in a value
    put(path, b"0123abcd nl\n")  # damage whose key field is the last thing on its line
    write(writer, rec("k2", 10))
    put(path, b"garbage !not-a-key!\n")
    write(writer, rec("k3", 11))
    return keys


def views(lazy: Journal, eager: Journal, keys: list[str]) -> None:
    for key in keys:  # lookups first: on the lazy reader they search before anything is parsed
        assert lazy.lines(key) == eager.lines(key), key
        assert lazy.intent_of(key) == eager.intent_of(key), key
        assert lazy.count() == eager.count() and lazy.size == eager.size and lazy.tail == eager.tail
    assert lazy.key_names() == eager.key_names()
    assert lazy.records == eager.records and lazy.damaged == eager.damaged
    assert lazy.fragments == eager.fragments


@pytest.mark.parametrize("late_damage", [False, True])
@pytest.mark.parametrize("order", ["plain-first", "prefix-first", "damage-first", "reversed"])
def test_a_large_first_read_is_searched_then_parsed_and_reads_as_a_full_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str, late_damage: bool
) -> None:
    """A new reader of a large journal parses none of it at first; a lookup searches its bytes for the
    key. Whatever is looked up in whatever order — keys with damage, a torn fragment before their
    record, a name that is a prefix of another's, a name inside another line's value — and whatever
    is appended afterwards (damage too), it answers exactly what a reader that parsed everything does."""
    path = str(tmp_path / "journal")
    writer = Journal(path)
    keys = big_journal(path, writer)
    assert len(lines_of(path)) > journal_module.LAZY_MIN
    if order == "prefix-first":
        keys = ["kp", "both", "kp2", *keys]
    elif order == "damage-first":
        keys = ["dam", "frag", "nl", *keys]
    elif order == "reversed":
        keys = keys[::-1]
    lazy = Journal(path)
    lazy.refresh()
    assert lazy.records == [] and lazy.count() > 500  # nothing parsed yet, every line counted
    write(writer, rec("both", 12))  # after the lazy reader's first read
    if late_damage:  # a reader with damage among its parsed lines parses the others before a lookup
        bad = bytearray(rec("both", 13))
        bad[-5] ^= 0x20
        put(path, bytes(bad))
    write(writer, rec("late", 14))
    lazy.refresh()
    with monkeypatch.context() as m:
        m.setattr(journal_module, "LAZY_MIN", 1 << 40)
        eager = Journal(path)
        eager.refresh()
    views(lazy, eager, [*keys, "late", "absent"])
    copy = str(tmp_path / "copy")
    Path(copy).write_bytes(Path(path).read_bytes())
    with monkeypatch.context() as m:
        m.setattr(journal_module, "LAZY_MIN", 1 << 40)
        eager = Journal(copy)
        eager.refresh()
    lazy = Journal(path)
    lazy.refresh()
    # the rotation of a fold keeps the fragment and the nameless garbage aside, as a full parse does
    notice = lazy.rotate()
    assert notice is not None and notice.replace(path, copy) == eager.rotate()
    assert Path(path + ".torn").read_bytes() == Path(copy + ".torn").read_bytes() != b""


def test_a_new_reader_parses_only_the_lines_of_the_keys_it_looks_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "journal")
    writer = Journal(path)
    for n in range(600):
        write(writer, encode(f"k{n % 60}", b"{}", b'{"n":%d,"pad":"%s"}' % (n, b"p" * 150)))
    decoded = []
    real = journal_module.decode

    def counting(raw: bytes) -> Any:
        decoded.append(raw)
        return real(raw)

    monkeypatch.setattr(journal_module, "decode", counting)
    reader = Journal(path)
    reader.refresh()
    assert len(reader.lines("k7")) == 10 and reader.intent_of("k7") == b"{}" and reader.count() == 600
    assert len(decoded) == 1 + 10  # the last line (a good record: the read can wait), then k7's lines
    # an append by this reader goes after the unparsed lines, and in order among its key's lines
    record = encode("k7", b"{}", b'{"n":600}')
    reader.refresh()
    write(reader, record)
    reader.appended(record)
    assert reader.lines("k7")[-1] == b'{"n":600}' and reader.count() == 601
    for n in range(journal_module.LAZY_SEARCHES):  # a long-lived reader stops searching: it parses
        reader.lines(f"k{20 + n}")
    assert len(reader.records) == 601 and len(reader.lines("k7")) == 11


def test_a_torn_tail_behind_a_large_unparsed_journal_is_still_a_tail(tmp_path: Path) -> None:
    """A writer killed in its write behind a journal a new reader does not parse yet: the torn bytes
    are its tail (never an event, never a key's line), a repair cuts them off, and the reader's next
    append and lookups read as a full parse."""
    path = str(tmp_path / "journal")
    writer = Journal(path)
    for n in range(500):
        write(writer, encode(f"k{n % 50}", b"{}", b'{"n":%d,"pad":"%s"}' % (n, b"p" * 150)))
    torn = rec("k3", 999)[:-20]
    put(path, torn)
    reader = Journal(path)
    reader.refresh()
    assert reader.tail == torn and reader.records == [] and reader.count() == 500
    assert len(reader.lines("k3")) == 10 and b"999" not in b"".join(reader.lines("k3"))
    notice = reader.repair()
    assert notice is not None and "torn write" in notice
    record = rec("k3", 1000)
    reader.refresh()
    write(reader, record)
    reader.appended(record)
    fresh = Journal(path)
    fresh.refresh()
    assert reader.lines("k3") == fresh.lines("k3") and reader.lines("k3")[-1] == decode(record[:-1]).line  # type: ignore[union-attr]
    assert reader.key_names() == fresh.key_names() and reader.count() == fresh.count() == 501


@pytest.mark.parametrize("seed", range(16))
def test_random_large_journals_read_the_same_searched_or_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Random journals over :data:`LAZY_MIN` — keys whose names prefix one another or appear in other
    lines' values, damage, torn fragments before records, nameless garbage, appends and damage after
    the first read — and random lookups (repeated, sometimes past :data:`LAZY_SEARCHES` keys): a new
    reader that searches answers every lookup as a reader that parsed everything."""
    import random

    rng = random.Random(seed)
    path = str(tmp_path / "journal")
    writer = Journal(path, durable=False)
    names = ["a", "a1", "a.b", "b", "b-2", "c:3", "d", "e_e"]

    odd_rate, mention_rate = rng.choice([0, 0.002, 0.01]), rng.choice([0, 0.005, 0.05])

    def record(key: str, n: int) -> bytes:
        mention = rng.choice(names).encode() if rng.random() < mention_rate else b"-"
        pad = b"p" * rng.randrange(50, 300)
        value = b'{"n":%d,"note":"see %s x","pad":"%s"}' % (n, mention, pad)
        return encode(key, b'{"key":"%s"}' % key.encode() if rng.random() < 0.9 else b"{}", value)

    def some_lines(count: int, start: int) -> None:
        for n in range(start, start + count):
            data = record(rng.choice(names), n)
            odd = rng.random() / odd_rate if odd_rate else 1.0
            if odd < 0.4:  # damage followed by good lines
                bad = bytearray(data)
                bad[rng.randrange(9, len(bad) - 1)] ^= 0x20
                put(path, bytes(bad))
            elif odd < 0.8:  # a writer killed in its write, another's record right behind it
                put(path, data[: rng.randrange(1, len(data) - 1)])
            elif odd < 1.0:
                put(path, b"garbage !not a key! %d\n" % n)
            else:
                write(writer, data)
                continue
            write(writer, record(rng.choice(names), n + 100_000))

    some_lines(rng.randrange(450, 700), 0)
    assert len(lines_of(path)) >= journal_module.LAZY_MIN
    lazy = Journal(path)
    lazy.refresh()
    some_lines(rng.randrange(0, 30), 200_000)  # after the first read
    lazy.refresh()
    with monkeypatch.context() as m:
        m.setattr(journal_module, "LAZY_MIN", 1 << 40)
        eager = Journal(path)
        eager.refresh()
    for _ in range(rng.randrange(1, 16)):
        key = rng.choice([*names, "absent"])
        assert lazy.lines(key) == eager.lines(key), (seed, key)
        assert lazy.intent_of(key) == eager.intent_of(key), (seed, key)
        assert (lazy.count(), lazy.size, lazy.tail) == (eager.count(), eager.size, eager.tail)
    assert lazy.key_names() == eager.key_names() and lazy.records == eager.records
    assert lazy.damaged == eager.damaged and lazy.fragments == eager.fragments
    assert [lazy.lines(k) for k in names] == [eager.lines(k) for k in names]
