"""Where the CPU of a step goes with n writers on one ledger: the cost of sharing it (issue 14).

    python benchmarks/bench_writer_parts.py [--writers 1,4,8] [--seconds 3] [--base 10000]
                                            [--rounds 2] [--fold-sizes 1024,4096] [--json OUT]

- **parts**: n writer processes make fresh steps (``durability: fsync``, a ``ledger`` check, a no-op
  action) on their own keys in one ledger, a copy of one of ``--base`` entries, for ``--seconds``,
  started together, as the writers part of ``bench_store.py`` does. In every writer a thread-CPU
  timer and a wall timer wrap parts of the store: reading the journal (``Journal.refresh``), the
  ledger loads (``GitStore.load``), the folds (``GitStore._fold``), the syncs (``Journal.sync``), the
  journal's place lock (``Journal._lock_place``) and the appends (``GitStore.append``). Parts nest
  (an append holds its fold and its sync; a load reads the journal), so they do not add up. Reported
  for each writer count and round: steps/s over the group's wall time, CPU a step of the whole loop
  (``getrusage``: the timers' own cost included) and of each part, each part's wall time a step, and
  the cores kept busy (steps/s times CPU a step).
- **folds**: the CPU of one fold per event, by how many events it folds: fresh steps into a copy of
  the ``--base`` ledger in this process (``durability: none``, folding held off), then one flush
  (after one fold that is not measured: the first in a process also pays for imports and first reads).

The question it answers: which costs of a step grow with the number of writers of one ledger
(benchmarks/README.md, *8 writers, the same work at every count*).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the checkout's root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_store import build_ledger
from benchmarks.build import make_steps
from benchmarks.common import PY, ROOT, bench_env, run_together, use_isolated_git
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult, StepRunner
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore

# (module, class, method): the parts timed in each writer, named "Class.method"
PARTS = (
    ("gitledger.git.journal", "Journal", "refresh"),
    ("gitledger.git.journal", "Journal", "_lock_place"),
    ("gitledger.git.journal", "Journal", "sync"),
    ("gitledger.git.store", "GitStore", "load"),
    ("gitledger.git.store", "GitStore", "append"),
    ("gitledger.git.store", "GitStore", "_fold"),
)

WRITER = """
import importlib, json, resource, sys, time
sys.path.insert(0, sys.argv[5])
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult, StepRunner
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore
path, wid, seconds, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
parts = {}
def timed(cls, name):
    inner = getattr(cls, name)
    cell = parts.setdefault(f"{cls.__name__}.{name}", [0.0, 0.0, 0])  # CPU s, wall s, calls
    def wrapper(*args, **kwargs):
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            cell[0] += time.thread_time() - cpu
            cell[1] += time.perf_counter() - wall
            cell[2] += 1
    setattr(cls, name, wrapper)
for module, cls, name in json.loads(sys.argv[6]):
    timed(getattr(importlib.import_module(module), cls), name)
store = GitStore(GitRepo.discover(path), "fsync")
runner = StepRunner(store)
checks = [LedgerCheck()]
noop = lambda: ActionResult(ok=True)
while time.time() < start_at:
    time.sleep(0.001)
usage = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.time()
done = 0
while time.time() < start_at + seconds:
    assert runner.run(StepKey.derive(f"w{wid}", f"s{done}"), checks, noop).status == "created"
    done += 1
t1 = time.time()
after = resource.getrusage(resource.RUSAGE_SELF)
store.close()
cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
print(json.dumps({"span": [t0, t1], "done": done, "cpu": cpu, "parts": parts}))
"""


def parts_run(start: Path, work: Path, n: int, seconds: float) -> dict[str, Any]:
    """One run of ``n`` writers on a copy of the ledger ``start``: steps/s, CPU a step and its parts."""
    path = shutil.copytree(start, work / f"parts-{n}-{time.monotonic_ns()}", symlinks=True)
    try:
        start_at = time.time() + 1.0 + 0.2 * n
        env = bench_env({"PYTHONPATH": str(ROOT)})
        spec = json.dumps(PARTS)
        commands = [
            [PY, "-c", WRITER, str(path), str(w), str(seconds), str(start_at), str(ROOT), spec]
            for w in range(n)
        ]
        got = run_together(commands, env, work, "a writer")
    finally:
        shutil.rmtree(path, ignore_errors=True)
    steps = sum(int(g["done"]) for g in got)
    wall = max(g["span"][1] for g in got) - min(g["span"][0] for g in got)
    cpu_us = sum(float(g["cpu"]) for g in got) * 1e6 / max(steps, 1)
    parts: dict[str, dict[str, float]] = {}
    for g in got:
        for name, (cpu, spent, calls) in g["parts"].items():
            cell = parts.setdefault(name, {"cpu_us": 0.0, "wall_us": 0.0, "calls": 0.0})
            cell["cpu_us"] += cpu
            cell["wall_us"] += spent
            cell["calls"] += calls
    per_step = 1 / max(steps, 1)
    for cell in parts.values():
        cell["cpu_us"] *= 1e6 * per_step
        cell["wall_us"] *= 1e6 * per_step
        cell["calls"] *= per_step
    rate = steps / wall
    return {
        "steps_per_s": rate,
        "steps": steps,
        "cpu_us": cpu_us,
        "cores": rate * cpu_us / 1e6,
        "parts": parts,
    }


def fold_cost(start: Path, work: Path, events: int) -> float:
    """µs of CPU per event of one fold of ``events`` events (fresh steps: two events each)."""
    path = shutil.copytree(start, work / f"fold-{events}-{time.monotonic_ns()}", symlinks=True)
    try:
        with GitRepo.discover(path) as repo:
            store = GitStore(repo, "none", fold_events=1 << 62, fold_bytes=1 << 62)
            runner = StepRunner(store)
            for i in range(max(1, events // 2)):
                runner.run(StepKey.derive("fold", f"s{i}"), [LedgerCheck()], lambda: ActionResult(ok=True))
            cpu = time.process_time()
            folded = store.flush()
            spent = time.process_time() - cpu
            store.close()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return spent / max(folded, 1) * 1e6


def _counts(text: str, what: str, parser: argparse.ArgumentParser) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        parser.error(f"{what}: give whole numbers separated by commas, e.g. 1,4,8 (got {text!r})")
    if any(count < 1 for count in counts):
        parser.error(f"{what}: every count must be 1 or more (got {text!r})")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", default="1,4,8", help="writer counts (default 1,4,8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="how long the writers step (default 3)")
    parser.add_argument(
        "--base", type=int, default=10_000, help="entries of the starting ledger (default 10000)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every writer count (default 2)")
    parser.add_argument(
        "--fold-sizes",
        default="1024,4096",
        help="events a measured fold folds ('' for none; default 1024,4096)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    counts = _counts(args.writers, "--writers", parser)
    folds = _counts(args.fold_sizes, "--fold-sizes", parser) if args.fold_sizes else []
    if args.seconds <= 0 or args.base < 1 or args.rounds < 1:
        parser.error("--seconds must be above 0, --base and --rounds 1 or more")
    use_isolated_git()
    work = Path(tempfile.mkdtemp(prefix="gitledger-bench-parts-"))
    report: dict[str, Any] = {"seconds": args.seconds, "base": args.base, "parts": {}, "folds": {}}
    try:
        start = build_ledger(work / "start", "git", make_steps(args.base))
        if folds:  # the first fold of a process pays for its imports and first reads: not measured
            fold_cost(start, work, min(folds))
        for rnd in range(args.rounds):
            # the folds first: a writers' run may leave a detached `git gc --auto` running for a while
            for events in folds:
                cost = fold_cost(start, work, events)
                report["folds"].setdefault(str(events), []).append(cost)
                print(
                    f"round {rnd + 1}, a fold of {events} events: {cost:.1f} us of CPU an event", flush=True
                )
            for n in counts:
                got = parts_run(start, work, n, args.seconds)
                report["parts"].setdefault(str(n), []).append(got)
                cells = "  ".join(
                    f"{name} {cell['cpu_us']:.0f}/{cell['wall_us']:.0f}"
                    for name, cell in sorted(got["parts"].items())
                )
                print(
                    f"round {rnd + 1}, {n} writer(s): {got['steps_per_s']:,.0f} steps/s, "
                    f"{got['cpu_us']:.0f} us CPU a step, {got['cores']:.2f} cores; "
                    f"parts, us a step CPU/wall: {cells}",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
