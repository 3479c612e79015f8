"""The in-process object reader and pack writer against the real git binary."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitledger.git.objects import (
    DamagedRefError,
    LooseRef,
    ObjectReader,
    hash_object,
    read_ref,
    stale_keeps,
    unkeep,
    write_pack,
)
from testing.repos import git, init_repo


def all_objects(repo: Path) -> list[tuple[str, str]]:
    out = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)", cwd=repo)
    return [tuple(line.split()) for line in out.splitlines()]  # type: ignore[misc]


def cat(repo: Path, oid: str) -> bytes:
    return subprocess.run(["git", "cat-file", "-p", oid], cwd=repo, capture_output=True, check=True).stdout


def raw(repo: Path, oid: str, kind: str) -> bytes:
    return subprocess.run(["git", "cat-file", kind, oid], cwd=repo, capture_output=True, check=True).stdout


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_reads_loose_and_packed_objects_with_deltas(tmp_path: Path, object_format: str) -> None:
    repo = tmp_path / "r"
    git("init", "-q", f"--object-format={object_format}", str(repo), cwd=tmp_path)
    text = "".join(f"line {i} of a file that changes a little\n" for i in range(400))
    for i in range(12):  # similar blobs and trees: repack stores most of them as deltas
        (repo / "f.txt").write_text(text + f"edit {i}\n" * i)
        (repo / f"g{i}.txt").write_text(f"{i}\n")
        git("add", "-A", cwd=repo)
        git("commit", "-q", "-m", f"c{i}", cwd=repo)
    reader = ObjectReader(repo / ".git" / "objects", object_format)
    loose = all_objects(repo)
    for oid, kind in loose:
        assert reader.read(oid) == (kind, raw(repo, oid, kind))
    git("repack", "-adf", "-q", "--depth=50", "--window=50", cwd=repo)
    verify = git("verify-pack", "-v", *map(str, (repo / ".git/objects/pack").glob("*.idx")), cwd=repo)
    assert "chain length" in verify  # deltas exist
    fresh = ObjectReader(repo / ".git" / "objects", object_format)
    for oid, kind in all_objects(repo):
        assert fresh.read(oid) == (kind, raw(repo, oid, kind))
    # the first reader had no packs listed and the loose files are gone: it finds them after a rescan
    for oid, kind in loose:
        assert reader.read(oid) == (kind, raw(repo, oid, kind))
    assert fresh.read("0" * len(loose[0][0])) is None


def test_written_pack_is_read_by_git_and_kept_from_gc(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    blobs = [(hash_object("blob", f"note {i}\n".encode()), "blob", f"note {i}\n".encode()) for i in range(50)]
    big = os.urandom(70_000)
    blobs.append((hash_object("blob", big), "blob", big))
    keep = write_pack(repo / ".git" / "objects", blobs)
    assert keep.endswith(".keep") and stale_keeps(repo / ".git" / "objects") == [keep]
    git("fsck", "--no-dangling", cwd=repo)
    for oid, _, data in blobs:
        assert raw(repo, oid, "blob") == data
    git("gc", "--prune=now", "-q", cwd=repo)
    git("repack", "-ad", "-q", cwd=repo)
    for oid, _, data in blobs:  # unreferenced, yet kept
        assert raw(repo, oid, "blob") == data
    assert ObjectReader(repo / ".git" / "objects").read(blobs[-1][0]) == ("blob", big)
    unkeep(keep)
    git("gc", "--prune=now", "-q", cwd=repo)
    missing = subprocess.run(["git", "cat-file", "-e", blobs[0][0]], cwd=repo, check=False)
    assert missing.returncode != 0  # once no longer kept, unreferenced objects go


def test_trees_are_packed_uncompressed_and_read_by_git(tmp_path: Path) -> None:
    """Trees (a leaf, an empty one, a full fan-out level, one past a stored block's 64 KiB) are stored
    as they are; blobs are deflated. git, git gc and our reader read them all back."""
    repo = init_repo(tmp_path / "r")
    blob = b"a note\n" * 40
    blob_oid = hash_object("blob", blob)
    leaf = b"100644 " + b"ab" * 18 + b"\0" + bytes.fromhex(blob_oid)
    empty = b""
    level = b"".join(b"40000 %02x\0" % i + bytes.fromhex(hash_object("tree", leaf)) for i in range(256))
    huge = b"".join(b"100644 n%05d\0" % i + bytes.fromhex(blob_oid) for i in range(2500))  # ~80 KB
    trees = [leaf, empty, level, huge]
    objects = [(blob_oid, "blob", blob)] + [(hash_object("tree", t), "tree", t) for t in trees]
    keep = write_pack(repo / ".git" / "objects", objects)
    (pack,) = (repo / ".git" / "objects" / "pack").glob("*.pack")
    packed = pack.read_bytes()
    assert all(t[:65535] in packed for t in trees) and blob not in packed  # stored as is / deflated
    git("fsck", "--strict", "--no-dangling", cwd=repo)
    git("verify-pack", str(pack.with_suffix(".idx")), cwd=repo)
    reader = ObjectReader(repo / ".git" / "objects")
    for oid, kind, data in objects:
        assert raw(repo, oid, kind) == data and reader.read(oid) == (kind, data)
    unkeep(keep)
    level_commit = git("commit-tree", "-m", "level", hash_object("tree", level), cwd=repo)
    git("update-ref", "refs/keep", level_commit, cwd=repo)
    git("gc", "-q", cwd=repo)  # gc copies a stored tree as it is: readers need not inflate it
    (pack,) = (repo / ".git" / "objects" / "pack").glob("*.pack")
    assert level in pack.read_bytes()


def test_read_ref_loose_packed_and_damaged(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    head = git("rev-parse", "HEAD", cwd=repo)
    git("update-ref", "refs/notes/x", head, cwd=repo)
    common = repo / ".git"
    assert read_ref(common, "refs/notes/x") == head
    git("pack-refs", "--all", cwd=repo)
    assert not (common / "refs/notes/x").exists()
    assert read_ref(common, "refs/notes/x") == head
    assert read_ref(common, "refs/notes/absent") is None
    (common / "refs/notes/x").write_bytes(b"")  # a power loss left an empty loose ref
    with pytest.raises(DamagedRefError, match="is empty"):
        read_ref(common, "refs/notes/x")
    (common / "refs/notes/x").write_bytes(b"garbage\n")
    with pytest.raises(DamagedRefError, match="not an object id"):
        read_ref(common, "refs/notes/x")


def test_a_kept_open_ref_follows_every_way_git_and_people_change_it(tmp_path: Path) -> None:
    """LooseRef keeps the ref's file open and only fstats it: every change git makes (update, delete,
    pack-refs, a new loose file over a packed one), and an in-place rewrite by hand, must show at the
    next lookup, never the id it read before; a symbolic ref made by hand is refused, not followed."""
    repo = init_repo(tmp_path / "r")
    common = repo / ".git"
    first = git("rev-parse", "HEAD", cwd=repo)
    second = git("commit-tree", "-p", first, "-m", "second", f"{first}^{{tree}}", cwd=repo)
    third = git("commit-tree", "-p", second, "-m", "third", f"{first}^{{tree}}", cwd=repo)
    ref = LooseRef(common, "refs/notes/x")
    try:
        assert ref.read() is None
        git("update-ref", "refs/notes/x", first, cwd=repo)
        assert ref.read() == first
        assert ref.read() == first  # answered from the open file
        git("update-ref", "refs/notes/x", second, cwd=repo)  # a new file renamed over the open one
        assert ref.read() == second
        git("pack-refs", "--all", cwd=repo)  # the loose file is unlinked
        assert ref.read() == second
        git("update-ref", "refs/notes/x", third, cwd=repo)  # a loose file over the packed value
        assert ref.read() == third
        (common / "refs/notes/x").write_text(first + "\n")  # in place, by hand: same size, new time
        os.utime(common / "refs/notes/x", ns=(1, 1))
        assert ref.read() == first
        (common / "refs/notes/x").write_text("ref: refs/notes/y\n")
        git("update-ref", "refs/notes/y", second, cwd=repo)
        with pytest.raises(DamagedRefError, match="a symbolic ref \\(to refs/notes/y\\)"):
            ref.read()  # never followed: the ledger is not read from the ref it names (a branch)
        git("update-ref", "--no-deref", "refs/notes/x", first, cwd=repo)
        assert ref.read() == first
        git("update-ref", "-d", "refs/notes/x", cwd=repo)
        assert ref.read() is None
        (common / "refs/notes/x").write_bytes(b"garbage\n")
        with pytest.raises(DamagedRefError, match="not an object id"):
            ref.read()
    finally:
        ref.close()


def test_inflate_reads_streams_longer_than_their_object_and_deltas_of_every_op() -> None:
    """The one-call fast path of a pack entry's inflate, and its fallback (a stream longer than the
    slice it first tries: incompressible data); a delta with copies of every offset and size width."""
    import os
    import zlib

    from gitledger.git.objects import _inflate, apply_delta

    for data in (b"", b"abc" * 1000, os.urandom(5000), os.urandom(40_000)):
        stream = zlib.compress(data, 0) + b"trailing bytes of the next entry"
        assert _inflate(b"xx" + stream, 2, len(data)) == data
    # a stream far longer than its object (a flush after every byte): the first slice is too short
    packer = zlib.compressobj()
    data = os.urandom(100)
    stream = b"".join(packer.compress(data[i : i + 1]) + packer.flush(zlib.Z_FULL_FLUSH) for i in range(100))
    stream += packer.flush()
    assert len(stream) > len(data) + 64
    assert _inflate(stream + b"next", 0, len(data)) == data
    base = bytes(range(256)) * 300  # 76 800 bytes: offsets need three bytes
    # size 5 copy at offset 70 000 (flags 0x01|0x02|0x04 offset, 0x10 size), an insert, and a copy of
    # 0x10000 bytes (size 0: no size bytes) from offset 0
    delta = bytes([0x80 | 0x07 | 0x10, 0x70, 0x11, 0x01, 5, 3]) + b"new" + bytes([0x80])
    header = bytes([0x80 | (len(base) & 0x7F), (len(base) >> 7) & 0x7F | 0x80, len(base) >> 14])
    size = 5 + 3 + 0x10000
    header += bytes([0x80 | (size & 0x7F), (size >> 7) & 0x7F | 0x80, size >> 14])
    out = apply_delta(base, header + delta)
    assert out == base[70_000:70_005] + b"new" + base[:0x10000]


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_large_pack_finds_every_object_and_no_other(tmp_path: Path, object_format: str) -> None:
    """A large pack's index is searched around where an id should be (ids are uniform) and bisected
    when it is not there: every object is found at the offset git's index gives, ids that are not in
    the pack (also ones that sort between two of its ids, and at the ends of a bucket) are not."""
    import random

    from gitledger.git.objects import _Pack

    repo = tmp_path / "r"
    git("init", "-q", f"--object-format={object_format}", str(repo), cwd=tmp_path)
    blobs = [(hash_object("blob", b"%d" % i, object_format), "blob", b"%d" % i) for i in range(40_000)]
    write_pack(repo / ".git" / "objects", blobs, object_format, durable=False)
    (idx,) = (repo / ".git/objects/pack").glob("*.idx")
    listing = subprocess.run(
        ["git", "show-index", f"--object-format={object_format}"],
        stdin=idx.open("rb"), capture_output=True, check=True, text=True,
    ).stdout.split()  # fmt: skip
    offsets = {bytes.fromhex(listing[i + 1]): int(listing[i]) for i in range(0, len(listing), 3)}
    pack = _Pack(str(idx), 32 if object_format == "sha256" else 20)
    try:
        assert pack.count == len(offsets) == 40_000
        for oid, offset in offsets.items():
            assert pack.find(oid) == offset
        rng = random.Random(3)
        ids = sorted(offsets)
        strays = [rng.randbytes(len(ids[0])) for _ in range(3000)]
        strays += [oid[:-1] + bytes([oid[-1] ^ 1]) for oid in rng.sample(ids, 3000)]  # neighbours
        strays += [bytes([b]) + b"\0" * (len(ids[0]) - 1) for b in range(256)]  # each bucket's start
        strays += [bytes([b]) + b"\xff" * (len(ids[0]) - 1) for b in range(256)]  # ... and its end
        for oid in strays:
            if oid not in offsets:
                assert pack.find(oid) is None
    finally:
        pack.close()


def test_an_object_whose_pack_a_repack_replaced_meanwhile_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'git repack -d' writes its pack, then deletes the packs it replaces. A reader that lists the
    pack folder while the old pack is still there and opens it after it is gone does not conclude
    the object is missing: it lists again and finds the replacement (a writer beside 'git gc' in a
    loop once failed with 'the ledger ref points at a missing commit')."""
    import shutil

    import gitledger.git.objects as objects

    repo = init_repo(tmp_path / "r")
    blob = (hash_object("blob", b"note\n"), "blob", b"note\n")
    write_pack(repo / ".git" / "objects", [blob], durable=False)
    pack_dir = repo / ".git" / "objects" / "pack"
    (old_idx,) = pack_dir.glob("*.idx")
    reader = ObjectReader(repo / ".git" / "objects")
    real_listdir = os.listdir
    moved = tmp_path / "moved"
    moved.mkdir()
    stages = {"listed": 0}

    def listdir(path: str) -> list[str]:
        names = real_listdir(path)
        if str(path) == str(pack_dir) and stages["listed"] == 0:
            stages["listed"] = 1
            # the repack happens right after this listing: the old pack goes, a new one holds it
            for f in pack_dir.iterdir():
                shutil.move(str(f), moved / f.name)
            shutil.copy(moved / old_idx.with_suffix(".pack").name, pack_dir / "pack-new.pack")
            shutil.copy(moved / old_idx.name, pack_dir / "pack-new.idx")
        return names

    monkeypatch.setattr(objects.os, "listdir", listdir)
    assert reader.read(blob[0]) == ("blob", b"note\n")
    assert stages["listed"] == 1
