"""Git deltas written for the notes of a fold: exact, read by git and by gitledger, kept by git gc."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

from gitledger.git.delta import encode_delta
from gitledger.git.objects import ObjectReader, apply_delta, hash_object, unkeep, write_pack
from testing.repos import git, init_repo


def note(rng: random.Random, owner: dict[str, str], task: str) -> bytes:
    """Two event lines as a fresh step's note holds them."""
    at = f"2026-12-05T03:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z"
    claim = {"at": at, "checks": ["ledger"], "id": f"{rng.getrandbits(48):012x}", "owner": owner}
    claim |= {"state": "attempting", "step": "s", "task": task, "v": 1}
    done = {"at": at, "claim": claim["id"], "id": f"{rng.getrandbits(48):012x}", "outcome": "created"}
    done |= {"owner": owner, "state": "done", "step": "s", "task": task, "v": 1}
    return b"".join(
        json.dumps(e, sort_keys=True, separators=(",", ":")).encode() + b"\n" for e in (claim, done)
    )


def owner(rng: random.Random) -> dict[str, str]:
    """An owner as a real process has one: ids of its boot, machine and session."""
    boot = f"{rng.getrandbits(128):032x}"
    return {
        "boot": f"{boot[:8]}-{boot[8:12]}-{boot[12:16]}-{boot[16:20]}-{boot[20:]}",
        "host": "vm",
        "machine": f"{rng.getrandbits(128):032x}",
        "pid": str(rng.randrange(1 << 22)),
        "pidns": f"pid:[{rng.randrange(1 << 32)}]",
        "session": f"{rng.getrandbits(64):016x}",
        "start": str(rng.randrange(1 << 24)),
    }


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randrange(0, 12)):
        at = rng.randrange(len(out) + 1)
        what = rng.randrange(3)
        if what == 0:
            out[at:at] = rng.randbytes(rng.randrange(1, 40))
        elif what == 1:
            del out[at : at + rng.randrange(1, 40)]
        else:
            out[at : at + 5] = rng.randbytes(5)
    return bytes(out)


def test_a_delta_gives_its_target_exactly() -> None:
    rng = random.Random(14)
    cases = [
        (b"", b""),
        (b"abc", b""),
        (b"", b"x" * 300),
        (b"a" * 200, b"a" * 200),
        (b"a" * 70000, b"a" * 70000 + b"b"),
    ]
    for _ in range(400):
        base = rng.randbytes(rng.randrange(0, 600)) if rng.random() < 0.3 else note(rng, owner(rng), "t")
        cases.append((base, mutate(rng, base)))
    cases.append((b"q" * 20 + b"0123456789abcdef" * 5000, b"0123456789abcdef" * 5000))  # copies past 64 KiB
    for base, target in cases:
        delta = encode_delta(base, target, 1 << 30)
        assert delta is not None and apply_delta(base, delta) == target
    shared = owner(rng)
    a, b = note(rng, shared, "t1"), note(rng, shared, "t2")
    delta = encode_delta(a, b, len(b) // 2)
    assert delta is not None and len(delta) < len(b) // 5  # the notes of one process: a few values
    assert encode_delta(rng.randbytes(500), rng.randbytes(500), 250) is None  # nothing in common
    values = [b'"%s"' % rng.randbytes(6).hex().encode() for _ in range(1000)]
    one, two = b"[" + b",".join(values[:500]) + b"]", b"[" + b",".join(values[500:]) + b"]"
    assert encode_delta(one, two, len(two) // 4) is None  # nothing in common, quotes everywhere


def test_notes_are_packed_as_deltas_that_git_reads_and_gc_keeps(tmp_path: Path) -> None:
    """The notes of two processes, interleaved: each is a delta of a whole note of its own process
    (one deep; a delta of the other process's note is not small enough); random blobs, small ones and
    large ones are stored whole. git fsck, cat-file and our reader read
    every object back; after git gc the pack is no larger."""
    repo = init_repo(tmp_path / "r")
    rng = random.Random(3)
    owners = [owner(rng), owner(rng)]
    blobs = [note(rng, owners[i % 2], f"task-{i}") for i in range(60)]
    large = note(rng, owners[0], "x" * 9000)  # over DELTA_MAX: stored whole, and no base
    blobs += [rng.randbytes(400), b"small " * 10, large, large.replace(b"x", b"y")]
    objects = [(hash_object("blob", data), "blob", data) for data in blobs]
    keep = write_pack(repo / ".git" / "objects", objects)
    (pack,) = (repo / ".git" / "objects" / "pack").glob("*.pack")
    verify = git("verify-pack", "-v", str(pack.with_suffix(".idx")), cwd=repo)
    chains = {
        line.split(":")[0].strip(): int(line.split(":")[1].split()[0])
        for line in verify.splitlines()
        if "chain length" in line
    }
    assert chains == {"chain length = 1": 58}  # every note but the first of each process
    git("fsck", "--strict", "--no-dangling", cwd=repo)
    reader = ObjectReader(repo / ".git" / "objects")
    for oid, kind, data in objects:
        assert reader.read(oid) == (kind, data)
        shown = subprocess.run(["git", "cat-file", "blob", oid], cwd=repo, capture_output=True, check=True)
        assert shown.stdout == data
    whole = sum(len(data) for data in blobs)
    written = pack.stat().st_size
    assert written < whole / 3
    unkeep(keep)
    tree = git(
        "mktree",
        cwd=repo,
        input="".join(f"100644 blob {oid}\tb{i}\n" for i, (oid, _, _) in enumerate(objects)),
    )
    git("update-ref", "refs/keep", git("commit-tree", "-m", "notes", tree, cwd=repo), cwd=repo)
    git("gc", "-q", cwd=repo)
    (pack,) = (repo / ".git" / "objects" / "pack").glob("*.pack")
    assert pack.stat().st_size < written + 2000  # + the tree and the commit
