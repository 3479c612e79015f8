"""The journal's line format: ``<crc32 8 hex> <key> <intent JSON>\t<event JSON>``, one checksummed
record a line (:mod:`gitledger.git.journal` keeps the file). The checksum covers everything between
the first space and the newline; JSON text never holds a raw tab or newline, so the fields split
unambiguously."""

import re
import zlib
from typing import NamedTuple

DAMAGED_PREFIX = b"#damaged-journal-line "  # a damaged line as its key's lines show it: never an event
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


def sort_leftovers(pieces: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """(the whole records, each with its newline; the rest, each line without it) in runs of bytes
    found after zeros that follow a journal's last good line. A record there was written behind a
    stretch of zeros (an earlier write a power cut lost, or the file damaged in its middle): it is an
    event. A line without its newline is a torn write, whatever its checksum says."""
    records: list[bytes] = []
    rest: list[bytes] = []
    for piece in pieces:
        *whole, last = piece.split(b"\n")
        for line in whole:
            if not line:
                continue
            fragment, record = b"", decode(line)
            if record is None:
                fragment, record = split_torn(line)
            if fragment:
                rest.append(fragment)
            if record is not None:
                records.append(line[len(fragment) :] + b"\n")
        if last:
            rest.append(last)
    return records, rest
