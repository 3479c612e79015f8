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
    """A copy instruction: the opcode flags which of the offset's 4 and the size's 3 little-endian
    bytes follow; zero bytes are left out."""
    raw = (offset | size << 32).to_bytes(7, "little")
    op = 0x80
    for k in range(7):
        if raw[k]:
            op |= 1 << k
    return bytes((op,)) + raw.replace(b"\0", b"")


def _insert(data: bytes) -> bytes:
    if len(data) <= _INSERT_MAX:
        return bytes((len(data),)) + data
    return b"".join(
        bytes((len(data[at : at + _INSERT_MAX]),)) + data[at : at + _INSERT_MAX]
        for at in range(0, len(data), _INSERT_MAX)
    )


def _match(target: bytes, i: int, base: bytes, at: int, most: int) -> int:
    """How many bytes from ``target[i]`` and ``base[at]`` on are equal (at most ``most``): chunks
    compared at C speed, each twice the last, then the first differing byte of the chunk that differs
    by one XOR. The work is in proportion to the match, not to what follows it."""
    length, chunk = 0, 64
    while length < most:
        end = min(length + chunk, most)
        ours, theirs = target[i + length : i + end], base[at + length : at + end]
        if ours != theirs:
            differ = int.from_bytes(ours, "big") ^ int.from_bytes(theirs, "big")
            return end - (differ.bit_length() + 7) // 8
        length, chunk = end, min(chunk * 2, 1 << 16)
    return length


def encode_delta(base: bytes, target: bytes, limit: int) -> bytes | None:
    """A git delta that turns ``base`` into ``target``, or None when it would reach ``limit`` bytes
    (then the target is better stored whole).

    The work is bounded by ``limit``: bytes that match nothing count towards it as they are
    skipped, a probe that fails moves on by 4 bytes at least (a match found later is extended back
    over them), and each probe searches the base once."""
    n, m = len(target), len(base)
    out = [_size(m), _size(n)]
    size = len(out[0]) + len(out[1])
    i = literal = 0  # the target's next byte; where the bytes not copied yet start
    expected = 0  # where in the base the target's next bytes are likeliest (after the last copy)
    while i + BLOCK <= n:
        probe = target[i : i + BLOCK]
        at = base.find(probe, expected)
        if at < 0:
            at = base.find(probe, 0, expected + BLOCK - 1)
            if at < 0:
                quote = target.find(b'"', i + 4, i + 33)
                i = quote if quote > 0 else i + 32
                if size + i - literal >= limit:  # the bytes skipped will be inserted
                    return None
                continue
        while i > literal and at > 0 and target[i - 1] == base[at - 1]:  # the match, backwards
            i -= 1
            at -= 1
        length = _match(target, i, base, at, min(n - i, m - at, _COPY_MAX))  # and forwards
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


# a blob of DELTA_MIN to DELTA_MAX bytes (a note; intents are ~150 B) is stored as a delta of one of the
# last DELTA_BASES blobs of its pack stored whole, when the delta is under a quarter of its size, else
# whole, and it becomes a base (see the module docstring). Notes of one process come out ~18 % of
# their size (their owner is the same), of another process ~27 %: those start a base of their own
DELTA_MIN = 256
DELTA_MAX = 8 * 1024  # larger blobs are stored whole and are no base (a note of ~12 events is ~4 KB)
DELTA_BASES = 4


def deltifiable(kind: str, data: bytes) -> bool:
    """Whether an object may be stored as a delta, or be the base of one."""
    return kind == "blob" and DELTA_MIN <= len(data) <= DELTA_MAX


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
