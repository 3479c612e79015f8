"""The write-ahead journal file: checksummed lines, incremental reads, torn tails, rotation."""

from __future__ import annotations

import os
from pathlib import Path

from gitledger.git.journal import DAMAGED_PREFIX, Journal, decode, encode


def rec(key: str, n: int) -> bytes:
    return encode(key, b'{"key":"%s"}' % key.encode(), b'{"id":"%d","state":"attempting"}' % n)


def write(j: Journal, data: bytes) -> None:
    j.sync(j.append(data))


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
    with open(path, "ab") as fh:
        fh.write(full[:-7])  # a writer killed in the middle of its append
    reader = Journal(path)
    reader.refresh()
    assert reader.key_names() == ["k1"] and reader.tail == full[:-7]
    notice = j.repair()
    assert notice is not None and "torn write" in notice
    assert Path(path + ".torn").read_bytes() == full[:-7] + b"\n"
    assert Path(path).read_bytes() == rec("k1", 1)
    write(j, rec("k3", 3))  # appends after the repair are whole lines again
    reader.refresh()
    assert reader.key_names() == ["k1", "k3"] and reader.damaged == [] and reader.tail == b""
    assert j.repair() is None


def test_a_complete_line_with_a_bad_checksum_at_the_end_is_a_torn_tail(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    j = Journal(path)
    write(j, rec("k1", 1))
    with open(path, "ab") as fh:
        fh.write(b"\0" * 40 + b"\n")  # zeros after a power loss
    j.refresh()
    assert j.key_names() == ["k1"] and j.damaged == []
    assert j.repair() is not None and os.path.getsize(path) == len(rec("k1", 1))


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
    with open(path, "ab") as fh:
        fh.write(torn[:-7])  # killed in its append
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
    with open(path, "ab") as fh:
        fh.write(rec("k5", 5)[:-1])
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
    assert a.records == fresh.records and a.size == fresh.size == os.path.getsize(path)
