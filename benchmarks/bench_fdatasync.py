"""What one ``fdatasync`` of a journal record costs, by how the record reaches the file (issue 14).

    python benchmarks/bench_fdatasync.py [--procs 1,8] [--syncs 600] [--rounds 3] [--json OUT]

Each of ``n`` processes writes ``--syncs`` records of 625 bytes (a fresh step's journal line) to one
file and calls ``fdatasync`` after each, in three ways, interleaved round by round in a rotating order:

- **append**: ``O_APPEND`` writes (the journal before it was written in place): the file grows, so
  every sync also commits the file's new size (metadata) through the filesystem's journal;
- **fallocated**: ``posix_fallocate`` first, then records written in place: the blocks are reserved
  but unwritten, so the first write to each still changes metadata (the extent becomes written);
- **written**: the file is filled with zeros and synced first, then records are written in place: a
  sync writes data only.

Reported per mode and process count: syncs per second over the wall time of the group, the wall time
of one sync in one process, and per sync the CPU (user and system) and the voluntary context
switches (each a block in the kernel), from ``getrusage`` of the writing loop only. The question it
answers: would a journal that overwrote a file written beforehand (what SQLite's WAL does once it is
reused) make a durable step cheaper, and with how many writers?
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RECORD = b"r" * 624 + b"\n"
MODES = ("append", "fallocated", "written")


def _writer(path: str, mode: str, index: int, procs: int, syncs: int, start: float, out: Any) -> None:
    flags = os.O_WRONLY | (os.O_APPEND if mode == "append" else 0)
    fd = os.open(path, flags)
    while time.time() < start:
        time.sleep(0.0005)
    before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for i in range(syncs):
        if mode == "append":
            os.write(fd, RECORD)
        else:  # each process its own slots, interleaved as concurrent appenders' records would be
            os.pwrite(fd, RECORD, (i * procs + index) * len(RECORD))
        os.fdatasync(fd)
    t1, after = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    os.close(fd)
    out.put(
        (
            t0,
            t1,
            after.ru_utime - before.ru_utime,
            after.ru_stime - before.ru_stime,
            after.ru_nvcsw - before.ru_nvcsw,
        )
    )


def prepare(path: Path, mode: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if mode == "fallocated":
            os.posix_fallocate(fd, 0, size)
        elif mode == "written":
            view = memoryview(bytes(size))
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def measure(work: Path, mode: str, procs: int, syncs: int) -> dict[str, float]:
    path = work / f"{mode}-{procs}.journal"
    prepare(path, mode, len(RECORD) * syncs * procs)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start = time.time() + 0.3
    workers = [
        ctx.Process(target=_writer, args=(str(path), mode, i, procs, syncs, start, out)) for i in range(procs)
    ]
    for worker in workers:
        worker.start()
    spans = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError(f"a {mode} writer failed (exit {worker.exitcode})")
    path.unlink()
    total = syncs * procs
    wall = max(s[1] for s in spans) - min(s[0] for s in spans)
    return {
        "syncs_per_s": total / wall,
        "sync_us": statistics.median((s[1] - s[0]) / syncs for s in spans) * 1e6,
        "user_us": sum(s[2] for s in spans) / total * 1e6,
        "system_us": sum(s[3] for s in spans) / total * 1e6,
        "switches": sum(s[4] for s in spans) / total,
    }


def run(work: Path, counts: list[int], syncs: int, rounds: int) -> dict[str, dict[str, Any]]:
    samples: dict[str, list[dict[str, float]]] = {}
    for rnd in range(rounds):
        for procs in counts:
            shift = (rnd + procs) % len(MODES)
            for mode in MODES[shift:] + MODES[:shift]:
                samples.setdefault(f"{mode}@{procs}", []).append(measure(work, mode, procs, syncs))
    return {
        name: {field: statistics.median(r[field] for r in runs) for field in runs[0]} | {"runs": runs}
        for name, runs in samples.items()
    }


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--procs", default="1,8", help="comma-separated process counts")
    parser.add_argument("--syncs", type=int, default=600, help="records (and syncs) per process")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default="", help="where the files go (default: a temporary folder)")
    parser.add_argument("--json", default="", help="write the results here")
    args = parser.parse_args(argv)
    try:
        counts = [int(n) for n in args.procs.split(",")]
    except ValueError:
        parser.error(f"--procs takes comma-separated numbers, not {args.procs!r}")
    if args.syncs < 1 or args.rounds < 1 or min(counts) < 1:
        parser.error("--syncs, --rounds and every --procs count must be at least 1")
    with tempfile.TemporaryDirectory(dir=args.dir or None, prefix="gitledger-fdatasync-") as tmp:
        results = run(Path(tmp), counts, args.syncs, args.rounds)
    print(f"fdatasync after each 625-byte record, medians of {args.rounds} interleaved rounds")
    print(f"{'mode':<16}{'syncs/s':>9}{'µs/sync':>9}{'user µs':>9}{'sys µs':>8}{'blocks':>8}")
    for procs in counts:
        for mode in MODES:
            r = results[f"{mode}@{procs}"]
            print(
                f"{mode + ' x' + str(procs):<16}{r['syncs_per_s']:>9.0f}{r['sync_us']:>9.0f}"
                f"{r['user_us']:>9.0f}{r['system_us']:>8.0f}{r['switches']:>8.1f}"
            )
        append = results[f"append@{procs}"]["syncs_per_s"]
        written = results[f"written@{procs}"]["syncs_per_s"]
        print(f"  {procs} process(es): written in place / append, syncs/s: {written / append:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
