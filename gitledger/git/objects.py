"""Git objects and refs read and written in-process: loose objects, packs (with deltas), ref files.

The ledger is read on every step, so reading it must not cost a round trip to a git process:

- :class:`ObjectReader` reads loose objects (``objects/ab/cdef...``, zlib) and packs (``.idx`` version 2
  binary search, ``.pack`` entries including ``OFS_DELTA``/``REF_DELTA`` chains), follows
  ``objects/info/alternates`` and notices packs that appear or vanish (``git repack``/``gc``): an object
  not found is looked up again after re-listing the packs, so an object moved from loose into a pack
  between two looks is still found. A pack file deleted while mapped stays readable (its inode lives).
- :func:`read_ref` reads a ref as git's files backend stores it (a loose file, else ``packed-refs``), in
  that order, as git itself does, so a concurrent ``git pack-refs`` is never seen half-done. It never
  caches: a decision must not rest on a stale view (the ``packed-refs`` stat-cache trap of a long-lived
  ``git update-ref``). A ref file that is empty or not an object id raises :class:`DamagedRefError`.
  :class:`LooseRef` reads one ref the same way but keeps its loose file open between lookups and asks
  the kernel whether that file is still the ref's (``fstat``: one system call instead of three).
- :func:`write_pack` writes objects as one pack (``.pack`` + ``.idx`` version 2) guarded by a ``.keep``
  file: ``git gc``, ``git repack -ad`` and ``git prune`` never delete objects of a kept pack, so objects
  written before the ref that references them is moved cannot be pruned in between; the caller removes
  the ``.keep`` once the refs point at them. Notes go in as deltas of one another where that is much
  smaller (:mod:`gitledger.git.delta`).
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import re
import struct
import zlib
from pathlib import Path

from gitledger.git.delta import DELTA_BASES, delta_of, deltifiable, offset_back

_HEX = re.compile(rb"[0-9a-f]+")
TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
TYPE_CODES = {name: code for code, name in TYPES.items()}
OFS_DELTA = 6
REF_DELTA = 7
_CACHE_MAX = 4096  # decoded small objects kept (trees and commits are read again and again)
_CACHE_OBJECT_MAX = 64 * 1024


class DamagedRefError(Exception):
    """A ref file exists but does not hold an object id (a torn write, a power loss)."""

    def __init__(self, ref: str, path: str, content: bytes) -> None:
        self.ref, self.path, self.content = ref, path, content
        text = content.strip()
        if not text:
            what = "empty"
        elif text.startswith(b"ref: "):
            target = text[5:200].decode(errors="replace")
            what = f"a symbolic ref (to {target}), not an object id: a ledger ref is never symbolic"
        else:
            what = f"not an object id ({content[:40]!r})"
        super().__init__(f"{ref} ({path}) is {what}")


class DamagedObjectFileError(Exception):
    """An object file or pack entry exists but cannot be decoded."""


_RESCANS = 5  # listings of the pack folders for one object that is not found, while they change


class _Pack:
    """One ``pack-*.idx`` (version 2) and its ``.pack``, memory-mapped."""

    def __init__(self, idx_path: str, oid_len: int) -> None:
        self.idx_path = idx_path
        self.oid_len = oid_len
        with open(idx_path, "rb") as fh:
            self.idx = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        if self.idx[:8] != b"\377tOc\0\0\0\2":
            raise DamagedObjectFileError(f"{idx_path} is not a version 2 pack index")
        self.fanout = struct.unpack(">256I", self.idx[8 : 8 + 1024])
        self.count = self.fanout[255]
        self.oids_at = 8 + 1024
        self.offsets_at = self.oids_at + self.count * (oid_len + 4)
        self.large_at = self.offsets_at + self.count * 4
        # mapped at once: a pack that 'git repack -d' deletes later stays readable (its inode lives)
        with open(idx_path[:-4] + ".pack", "rb") as fh:
            self.pack = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    def find(self, oid: bytes) -> int | None:
        """The offset of ``oid`` in the pack, or None."""
        n = self.oid_len
        lo = self.fanout[oid[0] - 1] if oid[0] else 0
        hi = self.fanout[oid[0]]
        idx, base = self.idx, self.oids_at
        count = hi - lo
        if count > 64:
            # object ids are uniform: the next bytes tell where in its bucket an id is, give or take
            # a few dozen; a window around there is searched at C speed (one slice and one find)
            # instead of bisecting with a slice per step
            guess = lo + (count * int.from_bytes(oid[1:4], "big") >> 24)
            reach = 8 + 3 * int(count**0.5) // 2
            a, b = max(lo, guess - reach), min(hi, guess + reach)
            window = idx[base + a * n : base + b * n]
            if window[:n] <= oid <= window[-n:]:  # inside the window: here or nowhere
                at = window.find(oid)
                while at != -1 and at % n:
                    at = window.find(oid, at + 1)
                return None if at == -1 else self._offset(a + at // n)
        while lo < hi:
            mid = (lo + hi) // 2
            at = base + mid * n
            here = idx[at : at + n]
            if here < oid:
                lo = mid + 1
            elif here > oid:
                hi = mid
            else:
                return self._offset(mid)
        return None

    def _offset(self, position: int) -> int:
        """The pack offset of the object at ``position`` in the index."""
        at = self.offsets_at + position * 4
        (offset,) = struct.unpack(">I", self.idx[at : at + 4])
        if offset & 0x80000000:
            at = self.large_at + (offset & 0x7FFFFFFF) * 8
            (offset,) = struct.unpack(">Q", self.idx[at : at + 8])
        return int(offset)

    def close(self) -> None:
        for m in (self.idx, self.pack):
            with contextlib.suppress(BufferError, ValueError):
                m.close()


def _inflate(buf: mmap.mmap | bytes, pos: int, size: int) -> bytes:
    """The ``size`` bytes of the zlib stream starting at ``pos``."""
    if size < 16 * 1024:  # the common case, in one call: what follows the stream in the slice is ignored
        try:
            data = zlib.decompress(buf[pos : pos + size + 64])
        except zlib.error:
            pass  # the stream is longer than the slice (incompressible data): read on below
        else:
            if len(data) == size:
                return data
    d = zlib.decompressobj()
    out: list[bytes] = []
    got = 0
    chunk = size + 256
    while not d.eof:
        piece = buf[pos : pos + chunk]
        if not piece:
            raise DamagedObjectFileError("a pack entry ends early")
        pos += len(piece)
        data = d.decompress(piece)
        out.append(data)
        got += len(data)
        if got > size:
            break
        chunk = 64 * 1024
    if got != size:
        raise DamagedObjectFileError(f"a pack entry inflates to {got} bytes or more, not {size}")
    return b"".join(out)


def apply_delta(base: bytes, delta: bytes) -> bytes:
    """Apply a git delta (as stored in packs) to ``base``."""
    pos = 0
    sizes = []
    for _ in range(2):  # the base's size, then the result's: little-endian base-128 varints
        value = shift = 0
        while True:
            byte = delta[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        sizes.append(value)
    src_size, dst_size = sizes
    if src_size != len(base):
        raise DamagedObjectFileError("a delta does not fit its base object")
    out = bytearray()
    end = len(delta)
    while pos < end:
        op = delta[pos]
        pos += 1
        if op & 0x80:  # copy from the base: offset (4 bytes) and size (3 bytes), present as flagged
            offset = size = 0
            if op & 0x01:
                offset = delta[pos]
                pos += 1
            if op & 0x02:
                offset |= delta[pos] << 8
                pos += 1
            if op & 0x04:
                offset |= delta[pos] << 16
                pos += 1
            if op & 0x08:
                offset |= delta[pos] << 24
                pos += 1
            if op & 0x10:
                size = delta[pos]
                pos += 1
            if op & 0x20:
                size |= delta[pos] << 8
                pos += 1
            if op & 0x40:
                size |= delta[pos] << 16
                pos += 1
            out += base[offset : offset + (size or 0x10000)]
        elif op:  # insert the next op bytes
            out += delta[pos : pos + op]
            pos += op
        else:
            raise DamagedObjectFileError("a delta holds a reserved opcode")
    if len(out) != dst_size:
        raise DamagedObjectFileError("a delta gives an object of the wrong size")
    return bytes(out)


class ObjectReader:
    """Reads objects of one repository (and its alternates) without starting git."""

    def __init__(self, objects_dir: Path | str, object_format: str = "sha1") -> None:
        self.objects_dir = str(objects_dir)
        self.oid_len = 32 if object_format == "sha256" else 20
        self.dirs = [self.objects_dir, *self._alternates(self.objects_dir)]
        self._packs: dict[str, _Pack] = {}
        self._cache: dict[str, tuple[str, bytes]] = {}
        self._bases: dict[tuple[str, int], tuple[str, bytes]] = {}
        # git knows the empty tree without storing it (a commit may name it and nothing else has it)
        self._empty_tree = hash_object("tree", b"", object_format)
        self.promisor = False  # a partial clone's pack seen: a missing object may be git's to fetch

    @staticmethod
    def _alternates(objects_dir: str, depth: int = 0) -> list[str]:
        try:
            with open(os.path.join(objects_dir, "info", "alternates"), "rb") as fh:
                lines = os.fsdecode(fh.read()).splitlines()  # a path, in whatever bytes it has
        except OSError:
            return []
        found: list[str] = []
        for line in lines:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            path = os.path.normpath(os.path.join(objects_dir, line))
            found.append(path)
            if depth < 5:
                found += ObjectReader._alternates(path, depth + 1)
        return found

    def rescan(self) -> bool:
        """Re-list the packs (new ones are opened; vanished ones dropped); whether anything changed
        (a pack listed but gone before it could be opened counts: a repack is replacing it)."""
        changed = False
        seen: set[str] = set()
        for folder in self.dirs:
            pack_dir = os.path.join(folder, "pack")
            try:
                names = os.listdir(pack_dir)
            except OSError:
                continue
            for name in names:
                self.promisor = self.promisor or name.endswith(".promisor")
                if name.endswith(".idx") and name.startswith("pack-"):
                    path = os.path.join(pack_dir, name)
                    seen.add(path)
                    if path not in self._packs:
                        changed = True
                        try:
                            self._packs[path] = _Pack(path, self.oid_len)
                        except (OSError, ValueError, DamagedObjectFileError, struct.error):
                            continue  # half-written or just deleted: git sees it the same way
        for path in [p for p in self._packs if p not in seen]:
            self._packs.pop(path).close()
            changed = True
        return changed

    def pack_count(self) -> int:
        """The packs this reader knows of (as of its last look at the pack folders)."""
        return len(self._packs)

    def read(self, oid: str) -> tuple[str, bytes] | None:
        """(type, content) of ``oid``, or None when the repository does not have it.

        Raises :class:`DamagedObjectFileError` for an object that is there but cannot be decoded.
        """
        cached = self._cache.get(oid)
        if cached is not None:
            return cached
        found = self._lookup(oid)
        for _ in range(_RESCANS):
            if found is not None:
                break
            # not in the packs known, nor loose: list the packs again, and again while they change.
            # 'git repack -d' writes its pack before it deletes the ones it replaces, so a listing
            # that met a pack already gone (or a loose object packed and pruned meanwhile) is
            # followed by one that holds the replacement (git itself re-reads its packs so)
            changed = self.rescan()
            found = self._lookup(oid)
            if not changed:
                break
        if found is None and oid == self._empty_tree:
            found = ("tree", b"")
        if found is not None and len(found[1]) <= _CACHE_OBJECT_MAX:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[oid] = found
        return found

    def _lookup(self, oid: str) -> tuple[str, bytes] | None:
        raw = bytes.fromhex(oid)
        for path, pack in list(self._packs.items()):
            offset = pack.find(raw)
            if offset is not None:
                if path != next(iter(self._packs)):  # the pack that answered is asked first next time
                    self._packs = {path: pack, **self._packs}
                try:
                    return self._unpack(pack, offset, 0)
                except (OSError, ValueError, IndexError, zlib.error, struct.error) as exc:
                    raise DamagedObjectFileError(
                        f"object {oid} in {pack.idx_path} is damaged: {exc}"
                    ) from exc
        for folder in self.dirs:
            found = self._loose(folder, oid)
            if found is not None:
                return found
        return None

    def _loose(self, folder: str, oid: str) -> tuple[str, bytes] | None:
        try:
            with open(os.path.join(folder, oid[:2], oid[2:]), "rb") as fh:
                data = fh.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            raw = zlib.decompress(data)
            nul = raw.index(b"\0")
            kind, size = raw[:nul].split(b" ")
            body = raw[nul + 1 :]
        except (zlib.error, ValueError) as exc:
            raise DamagedObjectFileError(f"loose object {oid} is damaged: {exc}") from exc
        if len(body) != int(size):
            raise DamagedObjectFileError(f"loose object {oid} is truncated")
        return kind.decode(), body

    def _unpack(self, pack: _Pack, offset: int, depth: int) -> tuple[str, bytes]:
        if depth > 64:
            raise DamagedObjectFileError("a delta chain is longer than 64")
        buf = pack.pack
        pos = offset
        byte = buf[pos]
        pos += 1
        kind = (byte >> 4) & 7
        size = byte & 15
        shift = 4
        while byte & 0x80:
            byte = buf[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
        if kind in TYPES:
            return TYPES[kind], _inflate(buf, pos, size)
        if kind == OFS_DELTA:
            byte = buf[pos]
            pos += 1
            back = byte & 0x7F
            while byte & 0x80:
                byte = buf[pos]
                pos += 1
                back = ((back + 1) << 7) | (byte & 0x7F)
            key = (pack.idx_path, offset - back)
            cached = self._bases.get(key)
            if cached is None:  # delta chains share their bases: keep the recent ones
                cached = self._unpack(pack, offset - back, depth + 1)
                if len(self._bases) >= 512:
                    self._bases.clear()
                self._bases[key] = cached
            base_kind, base = cached
        elif kind == REF_DELTA:
            base_oid = buf[pos : pos + pack.oid_len].hex()
            pos += pack.oid_len
            found = self.read(base_oid)
            if found is None:
                raise DamagedObjectFileError(f"the delta base {base_oid} is missing")
            base_kind, base = found
        else:
            raise DamagedObjectFileError(f"unknown pack entry type {kind}")
        return base_kind, apply_delta(base, _inflate(buf, pos, size))

    def close(self) -> None:
        for pack in self._packs.values():
            pack.close()
        self._packs.clear()
        self._cache.clear()
        self._bases.clear()


def read_ref(common_dir: Path | str, ref: str, hex_len: int = 40, path: str | None = None) -> str | None:
    """The object id ``ref`` points at (files backend: loose file, else packed-refs), None if absent.
    ``path``: the ref's loose file, when the caller has it joined already.

    Only for gitledger's own refs, which git never makes symbolic: a symbolic one (``ref: ...``, put
    there by hand) raises :class:`DamagedRefError` rather than being followed, so the ledger is never
    read from, nor written through to, a ref it names (a branch)."""
    path = path or os.path.join(common_dir, ref)
    try:
        data = _read_small(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return _packed_ref(common_dir, ref, hex_len)
    oid = _object_id(data, hex_len)
    if oid is not None:
        return oid
    raise DamagedRefError(ref, path, data)


def _object_id(data: bytes, hex_len: int) -> str | None:
    """The object id a ref file holds directly (a symbolic ``ref: ...`` is never one), else None."""
    text = data.strip()
    return text.decode() if len(text) == hex_len and _HEX.fullmatch(text) else None


def _read_small(path: str) -> bytes:
    """A whole (small) file through the os module: half the time of ``open().read()``, which every
    lookup pays for the ledger refs."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, 4096)
        if len(data) < 4096:
            return data
        chunks = [data]
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


class LooseRef:
    """One ref, read as :func:`read_ref` does, whose loose file is kept open between lookups.

    git never writes a ref file in place: an update writes ``<ref>.lock`` and renames it over the ref,
    a deletion or ``git pack-refs`` unlinks it. Either leaves the file this holds open with no name
    (``st_nlink`` 0), and an open file's inode cannot be reused meanwhile, so ``fstat`` of the open
    file tells whether it still names the ref: then the id read from it is still the ref's value. Its
    size and modification time are compared too, so a tool that rewrites the file in place is noticed
    as well (unless it keeps the size within one tick of the file system's clock). A ref only in
    ``packed-refs`` or missing is read anew at every lookup, as :func:`read_ref`; a symbolic or
    damaged one raises :class:`DamagedRefError`.
    On a network file system a client may answer ``fstat`` from its attribute cache; the ledger needs
    a local file system anyway (docs/design.md)."""

    __slots__ = ("_common_dir", "_fd", "_hex_len", "_oid", "_path", "_ref", "_seen")

    def __init__(self, common_dir: Path | str, ref: str, hex_len: int = 40) -> None:
        self._common_dir = common_dir
        self._ref = ref
        self._hex_len = hex_len
        self._path = os.path.join(common_dir, ref)
        self._fd: int | None = None
        self._seen = (0, 0)  # (size, modification time in ns) of the open file when it was read
        self._oid = ""

    def read(self) -> str | None:
        """The object id the ref points at, None if it does not exist."""
        fd = self._fd
        if fd is not None:
            st = os.fstat(fd)
            if st.st_nlink and (st.st_size, st.st_mtime_ns) == self._seen:
                return self._oid
            self.close()
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return _packed_ref(self._common_dir, self._ref, self._hex_len)
        try:
            st = os.fstat(fd)
            oid = _object_id(os.read(fd, 4096), self._hex_len)
            if oid is not None:
                self._fd, fd = fd, None
                self._seen = (st.st_size, st.st_mtime_ns)
                self._oid = oid
                return oid
        finally:
            if fd is not None:
                os.close(fd)
        return read_ref(self._common_dir, self._ref, self._hex_len, self._path)  # raises: symbolic or damaged

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)


def _packed_ref(common_dir: Path | str, ref: str, hex_len: int) -> str | None:
    try:
        with open(os.path.join(common_dir, "packed-refs"), "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    needle = b" " + ref.encode() + b"\n"
    at = data.find(needle)
    while at != -1:
        start = data.rfind(b"\n", 0, at) + 1
        if at - start == hex_len:
            return data[start:at].decode()
        at = data.find(needle, at + 1)
    if data.endswith(b" " + ref.encode()):  # the last line without its newline
        start = data.rfind(b"\n") + 1
        line = data[start:]
        if len(line) == hex_len + 1 + len(ref):
            return line[:hex_len].decode()
    return None


def uses_files_backend(common_dir: Path | str) -> bool:
    """False for a repository whose refs are in a reftable (then ask git)."""
    return not os.path.isdir(os.path.join(common_dir, "reftable"))


def hash_object(kind: str, data: bytes, object_format: str = "sha1") -> str:
    algo = hashlib.sha256 if object_format == "sha256" else hashlib.sha1
    h = algo(f"{kind} {len(data)}\0".encode())
    h.update(data)
    return h.hexdigest()


KEEP_TEXT = b"gitledger: objects not yet referenced by the ledger refs\n"


def _varint_header(kind: int, size: int) -> bytes:
    out = bytearray()
    byte = (kind << 4) | (size & 15)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


# trees are stored in a pack uncompressed (a zlib stream of "stored" blocks); blobs and commits are
# deflated (level 1). Two thirds of a tree's bytes are binary object ids, which deflate cannot shrink:
# a leaf of the ledger (~64 B) came out of zlib 2-3 bytes *larger*, for ~10 us of zlib set-up each,
# and a full fan-out level (256 subtrees, 7.4 KB) only 18 % smaller, for ~16 us of inflating on every
# lookup that reads it (the one object whose size grows with the ledger). 'git gc' keeps a stored
# object as it is (it copies pack entries it does not deltify; older versions become deltas of it)
def _zlib_stored(data: bytes) -> bytes:
    """``data`` as a zlib stream of stored (uncompressed) blocks, which every zlib reader inflates."""
    out = bytearray(b"\x78\x01")  # deflate with a 32 KB window, "fastest"; the check bits are right
    view = memoryview(data)
    for start in range(0, max(len(data), 1), 0xFFFF):
        block = view[start : start + 0xFFFF]
        last = start + 0xFFFF >= len(data)
        out += struct.pack("<BHH", last, len(block), len(block) ^ 0xFFFF)
        out += block
    out += struct.pack(">I", zlib.adler32(data))
    return bytes(out)


def _write_file(path: str, data: bytes, durable: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_pack(
    objects_dir: Path | str,
    objects: list[tuple[str, str, bytes]],
    object_format: str = "sha1",
    durable: bool = True,
) -> str:
    """Write ``objects`` [(oid, type, content)] as one kept pack; return the ``.keep`` file's path.

    The ``.keep`` is written first and the ``.idx`` last (git sees a pack once its index exists), so
    from the moment git can see the objects, no ``git gc``/``repack``/``prune`` removes them. Remove the
    ``.keep`` (:func:`unkeep`) once refs reference the objects.
    """
    algo = hashlib.sha256 if object_format == "sha256" else hashlib.sha1
    unique: dict[str, tuple[str, bytes]] = {}
    for oid, kind, data in objects:
        unique.setdefault(oid, (kind, data))
    body = bytearray(b"PACK" + struct.pack(">II", 2, len(unique)))
    entries: list[tuple[bytes, int, int]] = []
    bases: list[tuple[bytes, int]] = []  # blobs stored whole, the latest last: (data, offset)
    for oid, (kind, data) in unique.items():
        start = len(body)
        candidate = deltifiable(kind, data)
        delta = delta_of(data, bases) if candidate else None
        if delta is not None:
            base_at, patch = delta
            body += _varint_header(OFS_DELTA, len(patch)) + offset_back(start - base_at)
            body += zlib.compress(patch, 1)
        else:
            body += _varint_header(TYPE_CODES[kind], len(data))
            body += _zlib_stored(data) if kind == "tree" else zlib.compress(data, 1)
            if candidate:
                bases.append((data, start))
                del bases[:-DELTA_BASES]
        entries.append((bytes.fromhex(oid), zlib.crc32(body[start:]) & 0xFFFFFFFF, start))
    checksum = algo(body).digest()
    body += checksum
    entries.sort()
    fanout = [0] * 256
    for raw, _, _ in entries:
        fanout[raw[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    idx = bytearray(b"\377tOc\0\0\0\2" + struct.pack(">256I", *fanout))
    for raw, _, _ in entries:
        idx += raw
    for _, crc, _ in entries:
        idx += struct.pack(">I", crc)
    large: list[int] = []
    for _, _, offset in entries:
        if offset < 0x80000000:
            idx += struct.pack(">I", offset)
        else:
            idx += struct.pack(">I", 0x80000000 | len(large))
            large.append(offset)
    for offset in large:
        idx += struct.pack(">Q", offset)
    idx += checksum
    idx += algo(idx).digest()
    pack_dir = os.path.join(objects_dir, "pack")
    os.makedirs(pack_dir, exist_ok=True)
    base = os.path.join(pack_dir, f"pack-{checksum.hex()}")
    keep = base + ".keep"
    tmp = os.path.join(pack_dir, f".gitledger-{os.getpid()}-{os.urandom(4).hex()}")
    with contextlib.suppress(FileExistsError):
        _write_file(keep, KEEP_TEXT, False)  # lost in a power cut: then no ref points at the pack either
    if os.path.exists(base + ".idx"):  # the same objects were packed before (a fold done again)
        return keep
    try:
        _write_file(tmp + ".pack", bytes(body), durable)
        _write_file(tmp + ".idx", bytes(idx), durable)
        os.replace(tmp + ".pack", base + ".pack")
        os.replace(tmp + ".idx", base + ".idx")
    finally:
        for leftover in (tmp + ".pack", tmp + ".idx"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
    if durable:
        fsync_dir(pack_dir)
    return keep


def unkeep(keep: str) -> None:
    """Remove a ``.keep`` written by :func:`write_pack` (only ours: its text is checked)."""
    try:
        with open(keep, "rb") as fh:
            if fh.read() != KEEP_TEXT:
                return
        os.unlink(keep)
    except FileNotFoundError:
        pass


def stale_keeps(objects_dir: Path | str) -> list[str]:
    """``.keep`` files that gitledger wrote (a fold that died before removing its own)."""
    pack_dir = os.path.join(objects_dir, "pack")
    try:
        names = os.listdir(pack_dir)
    except OSError:
        return []
    found = []
    for name in names:
        if name.endswith(".keep"):
            path = os.path.join(pack_dir, name)
            try:
                with open(path, "rb") as fh:
                    if fh.read(len(KEEP_TEXT) + 1) == KEEP_TEXT:
                        found.append(path)
            except OSError:
                continue
    return found
