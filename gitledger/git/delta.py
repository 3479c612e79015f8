"""Git deltas for the notes of one fold: :func:`encode_delta`, read back by ``objects.apply_delta``.

The notes a fold writes are JSON lines of the same shape, and mostly of the same process: field
names, the owner (boot id, machine id, session: ~250 B of hex), timestamps to the second are shared,
and what differs is a few short values (ids, the task, milliseconds). A note deflated on its own is
~310 B; as a delta of another note of the fold, ~100 B. :func:`write_pack` stores a note as a delta
(``OFS_DELTA``) of an earlier note of the same pack stored whole, so chains are one deep, and ``git
gc`` keeps such deltas as they are (it does not deltify two whole objects of one pack against each
other: it takes the pack's writer to have tried).

The encoder is a greedy one for data that is mostly the base with values changed: it looks for a
block of the target in the base (first where the last copy ended, then anywhere), extends the match
both ways, and copies it; bytes that match nothing are inserted. Where a block matches nothing, it
looks next at the following quote (in JSON, where a changed value ends) instead of every byte.
"""

from __future__ import annotations

BLOCK = 12  # bytes a match starts from
_INSERT_MAX = 0x7F  # bytes one insert instruction carries
_COPY_MAX = 0xFFFFFF  # bytes one copy instruction carries (3 size bytes; git reads 0 as 0x10000)


def _size(value: int) -> bytes:
    """A delta header's size: little-endian base-128."""
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def _copy(offset: int, size: int) -> bytes:
    op = 0x80
    args = bytearray()
    for i in range(4):
        byte = (offset >> (8 * i)) & 0xFF
        if byte:
            op |= 1 << i
            args.append(byte)
    for i in range(3):
        byte = (size >> (8 * i)) & 0xFF
        if byte:
            op |= 0x10 << i
            args.append(byte)
    return bytes((op,)) + bytes(args)


def _insert(data: bytes) -> bytes:
    return b"".join(
        bytes((len(data[at : at + _INSERT_MAX]),)) + data[at : at + _INSERT_MAX]
        for at in range(0, len(data), _INSERT_MAX)
    )


def encode_delta(base: bytes, target: bytes, limit: int) -> bytes | None:
    """A git delta that turns ``base`` into ``target``, or None when it would reach ``limit`` bytes
    (then the target is better stored whole)."""
    n, m = len(target), len(base)
    out = [_size(m), _size(n)]
    size = len(out[0]) + len(out[1])
    i = literal = 0  # the target's next byte; where the bytes not copied yet start
    expected = 0  # where in the base the target's next bytes are likeliest (after the last copy)
    while i + BLOCK <= n:
        probe = target[i : i + BLOCK]
        at = base.find(probe, expected)
        if at < 0:
            at = base.find(probe)
            if at < 0:
                quote = target.find(b'"', i + 1, i + 33)
                i = quote if quote > 0 else i + 32
                continue
        while i > literal and at > 0 and target[i - 1] == base[at - 1]:  # the match, backwards
            i -= 1
            at -= 1
        span = min(n - i, m - at, _COPY_MAX)  # and forwards: the first differing byte, by one XOR
        differ = int.from_bytes(target[i : i + span], "big") ^ int.from_bytes(base[at : at + span], "big")
        length = span - (differ.bit_length() + 7) // 8
        if i > literal:
            out.append(_insert(target[literal:i]))
            size += len(out[-1])
        out.append(_copy(at, length))
        size += len(out[-1])
        if size >= limit:
            return None
        i += length
        expected = at + length
        literal = i
    if literal < n:
        out.append(_insert(target[literal:]))
        size += len(out[-1])
    return None if size >= limit else b"".join(out)


# a blob of at least DELTA_MIN bytes (a note; intents are ~150 B) is stored as a delta of one of the
# last DELTA_BASES blobs of its pack stored whole, when the delta is under a quarter of its size, else
# whole, and it becomes a base (see the module docstring). Notes of one process come out ~18 % of
# their size (their owner is the same), of another process ~27 %: those start a base of their own
DELTA_MIN = 256
DELTA_BASES = 4


def delta_of(data: bytes, bases: list[tuple[bytes, int]]) -> tuple[int, bytes] | None:
    """(the offset of the base, the delta) for the first of ``bases`` (latest first) that ``data``
    is a delta of under a quarter of its size, or None."""
    for base, offset in reversed(bases):
        patch = encode_delta(base, data, len(data) // 4)
        if patch is not None:
            return offset, patch
    return None


def offset_back(distance: int) -> bytes:
    """An ``OFS_DELTA`` entry's distance back to its base: big-endian base-128, each byte but the
    last one less than its value (git's encoding)."""
    out = [distance & 0x7F]
    distance >>= 7
    while distance:
        distance -= 1
        out.append(0x80 | (distance & 0x7F))
        distance >>= 7
    return bytes(reversed(out))
