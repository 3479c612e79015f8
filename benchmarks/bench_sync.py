"""Benchmark ``gitledger sync`` on two diverged ledgers of N keys each.

Setup (not timed): a bare remote and two clones. Each clone's ledger is written directly with
``git fast-import`` in gitledger's layout (intent blobs under ``refs/gitledger/intents``, JSON Lines
notes fanned out ``ab/cd/<rest>`` under ``refs/notes/gitledger``): N keys per side, of which
``--shared`` (default 10 %) are the same keys with different events on each side, so their notes must
be merged line by line. Clone A pushes its ledger; clone B has never synced.

Timed:

- ``sync`` in clone B through the real CLI (``python -m gitledger sync``): fetch A's N keys, merge N
  vs N, push the merge;
- the same sync in-process on a fresh copy of the setup, split into fetch / merge / push;
- a second ``sync`` in B (nothing to do) and the ``sync`` in A that fast-forwards to the merge.

Usage: ``python benchmarks/bench_sync.py [--sizes 1000 5000 10000] [--shared 0.1]``. Prints a Markdown
table and a JSON document.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gitledger.core.events import encode_event  # noqa: E402
from gitledger.core.keys import Content, StepKey, key_digest  # noqa: E402
from gitledger.core.store import Intent  # noqa: E402
from gitledger.git.repo import GitRepo  # noqa: E402
from gitledger.git.store import NOTES_REF, GitStore, fanout, intent_bytes  # noqa: E402
from gitledger.git.sync import LedgerSync  # noqa: E402


def git(*args: str, cwd: Path, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode().strip()


def blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def events_for(key: StepKey, side: str, n: int) -> bytes:
    owner = {"host": f"host-{side}", "boot": "b", "pid": 1000 + n, "start": "1", "session": f"{side}{n}"}
    base = {"v": 1, "key": key.key, "task": key.task, "step": key.step, "owner": owner}
    claim = {**base, "id": f"{side}c{n:06d}", "state": "attempting", "at": "2024-05-01T10:00:00.000Z",
             "lease_until": "2024-05-01T10:15:00.000Z", "checks": ["ledger"], "supersedes": []}  # fmt: skip
    done = {**base, "id": f"{side}d{n:06d}", "state": "done", "at": "2024-05-01T10:00:01.000Z",
            "outcome": "created", "claim": claim["id"]}  # fmt: skip
    return encode_event(claim) + encode_event(done)


def fast_import(repo: Path, side: str, n: int, shared: int) -> None:
    """Write a ledger of ``n`` keys (the first ``shared`` common to both sides) in one pack."""
    intents: list[bytes] = []
    notes: list[bytes] = []
    for i in range(n):
        task = "shared" if i < shared else f"task-{side}"
        key = StepKey.derive(task, f"step-{i}", Content.empty())
        intent = intent_bytes(Intent.of(key))
        note = events_for(key, side, i)
        path = "/".join(fanout(key_digest(key.key)))
        intents.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(intent), intent))
        notes.append(
            b"M 100644 inline %s\ndata %d\n%s\n"
            % ("/".join(fanout(blob_oid(intent))).encode(), len(note), note)
        )
    header = b"committer bench <bench@localhost> 1714557600 +0000\ndata 12\nbench ledger\n"
    intents_commit = [b"commit refs/gitledger/intents\n", header, *intents, b"\n"]
    notes_commit = [b"commit refs/notes/gitledger\n", header, *notes, b"\n"]
    stream = b"".join([*intents_commit, *notes_commit])
    git("fast-import", "--quiet", cwd=repo, input=stream)


def setup(work: Path, n: int, shared: int) -> tuple[Path, Path]:
    work.mkdir(parents=True)
    remote = work / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=work)
    clones = []
    for side in ("a", "b"):
        clone = work / side
        git("init", "-q", str(clone), cwd=work)
        git("remote", "add", "origin", str(remote), cwd=clone)
        fast_import(clone, side, n, shared)
        clones.append(clone)
    a, b = clones
    git("push", "-q", "origin", "refs/notes/gitledger", "refs/gitledger/intents", cwd=a)
    return a, b


def timed_cli(repo: Path) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gitledger", "sync", "--json"], cwd=repo, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"sync failed: {proc.stderr.decode(errors='replace')}")
    report: dict[str, Any] = json.loads(proc.stdout)
    return elapsed, report


def phases(repo: Path) -> dict[str, float]:
    with GitRepo.discover(repo) as git_repo:
        ledger = LedgerSync(GitStore(git_repo), "origin")
        t0 = time.perf_counter()
        tips = ledger.fetch()
        t1 = time.perf_counter()
        ledger.merge(tips)
        t2 = time.perf_counter()
        if not ledger.push(tips):
            raise SystemExit("push rejected in the benchmark (no one else writes)")
        t3 = time.perf_counter()
    return {"fetch_s": t1 - t0, "merge_s": t2 - t1, "push_s": t3 - t2, "total_s": t3 - t0}


def count_notes(repo: Path) -> int:
    return len(git("ls-tree", "-r", "--name-only", NOTES_REF, cwd=repo).splitlines())


def run(n: int, shared_ratio: float) -> dict[str, Any]:
    shared = int(n * shared_ratio)
    row: dict[str, Any] = {"keys_per_side": n, "shared_keys": shared}
    with tempfile.TemporaryDirectory(prefix="gitledger-bench-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        a, b = setup(work / "cli", n, shared)
        row["setup_s"] = time.perf_counter() - t0
        row["sync_cli_s"], report = timed_cli(b)
        row["notes_merged"] = report["notes_merged"]
        row["noop_sync_cli_s"], again = timed_cli(b)
        assert again["changed"] is False
        row["ff_sync_cli_s"], _ = timed_cli(a)
        row["keys_after"] = count_notes(a)
        assert row["keys_after"] == 2 * n - shared == count_notes(b)
        shutil.rmtree(work / "cli")
        a, b = setup(work / "phases", n, shared)
        row.update({f"inproc_{k}": v for k, v in phases(b).items()})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--shared", type=float, default=0.1, help="fraction of keys on both sides")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gitledger-bench-home-"))
    (home / ".gitconfig").write_text("[user]\n\tname = bench\n\temail = bench@localhost\n")
    os.environ.update(
        {"HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), "GIT_CONFIG_NOSYSTEM": "1"}
    )
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    rows = [run(n, args.shared) for n in args.sizes]
    shutil.rmtree(home)
    git_version = git("--version", cwd=ROOT)
    print(f"`gitledger sync`, two diverged ledgers, {git_version}, {os.cpu_count()} CPUs\n")
    print("| keys per side | shared keys (merged line by line) | keys after | sync (CLI) | fetch | merge "
          "| push | 2nd sync (no-op) | other clone (fast-forward) |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['keys_per_side']} | {r['notes_merged']} | {r['keys_after']} | {r['sync_cli_s']:.2f} s "
            f"| {r['inproc_fetch_s']:.2f} s | {r['inproc_merge_s']:.2f} s | {r['inproc_push_s']:.2f} s "
            f"| {r['noop_sync_cli_s']:.2f} s | {r['ff_sync_cli_s']:.2f} s |"
        )
    print()
    print(json.dumps({"git": git_version, "cpus": os.cpu_count(), "results": rows}, indent=2))


if __name__ == "__main__":
    main()
