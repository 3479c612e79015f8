"""The storage engine against bare SQLite and the previous engine, interleaved in one run (issue 14).

    python benchmarks/bench_store.py [--baseline REV] [--large 100000] [--rounds 6] [--reps 150]
                                     [--writers 1,2,4,8] [--writer-seconds 2] [--writer-rounds 1]
                                     [--writer-base 10000]
                                     [--sustained-steps 2048] [--sustained-rounds 3]
                                     [--growth 2000] [--growth-base 10000] [--only PARTS] [--quick]
                                     [--json OUT]

Every measured engine runs in a child process of its own, round by round in a rotating order, so load
on the shared cores hits all alike; read the ratios, not the absolute figures.

- **in process** (``StepRunner.run`` with a ``ledger`` check and a no-op action): *fresh* = a new key
  (load, claim, action, done); *done* = a key already done (one load; each draw a key the process has
  not looked up yet, so no size is favoured by this process's caches: at most as many draws per
  process as the ledger has entries). gitledger's journal is folded between two measuring processes
  (not timed), so none of them folds: a process that folded finds the fan-out levels cached.
  Engines: this gitledger with ``durability: fsync``, ``full`` and ``none``, bare SQLite WAL
  (``synchronous=FULL`` and ``NORMAL``, ``benchmarks/ledgers.py``), and the previous engine
  (``--baseline``, exported with ``git archive``; by default the last commit before the journal).
  Ledgers of 100 and ``--large`` entries each. Each cell keeps each round's median too (``rounds``):
  the report gives the range of the ratios round by round beside the ratio of the medians (a
  durable step is mostly syncs, whose latency drifts during a run).
  SQLite's write-ahead log is measured as a long-running writer keeps it (``SqliteStore.reuse_wal``:
  a log that commits overwrite from its start). A new log grows instead, and then each sync also
  commits the file's new size: that made a durable SQLite step 1.6x slower (500-650 vs 890-1 100 us).
- **sustained**: ``--sustained-steps`` fresh steps one after another in one process at ``--large``
  entries, per engine (gitledger ``fsync``, ``full``, ``none``; SQLite FULL, NORMAL), interleaved over
  ``--sustained-rounds``: the loop's mean per step includes the work an engine leaves for later
  (gitledger's folds: by default the loop writes exactly two folds' worth of events; SQLite's
  checkpoints), which the medians of *in process* leave out.
- **writers**: 1, 2, 4, 8 processes recording fresh steps on their own keys in one ledger for
  ``--writer-seconds``, for gitledger (fsync, full and none), SQLite and the previous engine
  (``--baseline``), interleaved: round by round, every engine in a rotating order. Every run starts
  from a copy of one ledger of ``--writer-base`` entries (10 000, the size of the issue's own
  measurements; the peers from an empty store): each writer count does the same work on the same
  state, folds included. steps/s = the steps done over the wall time of the whole group (the median of
  ``--writer-rounds``); the ledger is counted afterwards (nothing may be lost). SQLite's log is
  reused in place here too (a connection of this process keeps it through the run).
  ``gitledger-fsync-apart``, the machine's ceiling, gives each writer a ledger of its own that folds
  after 1/n of the events: the same work as one shared ledger, nothing shared.
- **growth**: ``--growth`` fresh steps into an empty repository, by this engine and the previous one,
  and by this engine into a ledger of ``--growth-base`` entries (10 000 by default, the size of the
  issue's own measurements): bytes of ``.git`` added per entry as written (after a flush) and after
  ``git gc``, and loose object files per step. A fold rewrites the fan-out levels its keys fall in,
  and those grow with the ledger, so a larger ledger adds more per entry.

``--only in_process,writers,growth`` runs some of the parts. ``benchmarks/run.py`` runs all of them
(``run()``) for ``REPORT.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import peers  # noqa: E402
from benchmarks.ab import export  # noqa: E402
from benchmarks.build import build_git, build_items, make_steps  # noqa: E402
from benchmarks.common import PY, bench_env, init_repo, run_together, use_isolated_git  # noqa: E402
from benchmarks.ledgers import SqliteStore  # noqa: E402
from benchmarks.report import STORE_ENGINES, store_targets  # noqa: E402
from gitledger.git.repo import GitRepo  # noqa: E402
from gitledger.git.store import FOLD_EVENTS, GitStore  # noqa: E402

BASELINE = "c7649aa"  # main before the journal (issue 14)
GROWTH_BASE = 10_000  # the ledger size of the issue's own measurements

# a child's store, opened from ``engine`` and ``path`` (the previous engine's layout too)
OPEN_STORE = """
if engine.startswith("sqlite"):
    from benchmarks.ledgers import SqliteStore
    store = SqliteStore(path, engine.split("-")[1].upper())
    store.reuse_wal()  # as a long-running writer's: overwritten in place, not growing
else:
    try:
        from gitledger.git.repo import GitRepo
        from gitledger.git.store import GitStore
    except ImportError:
        from gitledger.git import GitRepo
        from gitledger.gitstore import GitStore
    repo = GitRepo.discover(path)
    store = GitStore(repo) if engine == "previous" else GitStore(repo, engine.split("-")[1])
"""

CHILD = (
    """
import json, random, sys, time
sys.path.insert(0, sys.argv[6])
engine, path, size, reps, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
try:
    from gitledger.core.checks import LedgerCheck
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import ActionResult, StepRunner
except ImportError:  # the layout before the layers (the previous engine)
    from gitledger.checks import LedgerCheck
    from gitledger.keys import StepKey
    from gitledger.protocol import ActionResult, StepRunner
"""
    + OPEN_STORE
    + """
# each done draw a key this process has not looked up yet (at most ``size`` draws): at 100 entries,
# draws with replacement would repeat ~37 % of keys, answered from this process's caches, while at
# 100 000 none repeat, so the size ratio would compare cached with uncached lookups
drawn = list(range(size))
random.Random(tag).shuffle(drawn)
runner = StepRunner(store)
checks = [LedgerCheck()]
noop = lambda: ActionResult(ok=True)
out = {"fresh": [], "done": []}
runner.run(StepKey.derive("warm-" + tag, "s"), checks, noop)
for i in range(reps):
    step = StepKey.derive(f"bench-{tag}-{i}", "fresh")
    t = time.perf_counter(); r = runner.run(step, checks, noop); out["fresh"].append(time.perf_counter() - t)
    assert r.status == "created", r
    if i < size:
        step = StepKey.derive(f"entry-{drawn[i]}", "step")
        t = time.perf_counter(); r = runner.run(step, checks, noop)
        out["done"].append(time.perf_counter() - t)
        assert r.status == "skipped", r
if hasattr(store, "flush"):
    store.flush()
store.close()
print(json.dumps(out))
"""
)

WRITER = """
import json, sys, time
sys.path.insert(0, sys.argv[6])
try:
    from gitledger.core.checks import LedgerCheck
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import ActionResult, StepRunner
except ImportError:  # the layout before the layers (the previous engine)
    from gitledger.checks import LedgerCheck
    from gitledger.keys import StepKey
    from gitledger.protocol import ActionResult, StepRunner
engine, path, wid = sys.argv[1], sys.argv[2], sys.argv[3]
seconds, start_at = float(sys.argv[4]), float(sys.argv[5])
if engine.startswith("sqlite"):
    from benchmarks.ledgers import SqliteStore
    store = SqliteStore(path, engine.split("-")[1].upper())
else:
    try:
        from gitledger.git.repo import GitRepo
        from gitledger.git.store import GitStore
    except ImportError:
        from gitledger.git import GitRepo
        from gitledger.gitstore import GitStore
    durability = engine.split("-")[1] if "-" in engine else None
    repo = GitRepo.discover(path + f"/w{wid}" if engine.endswith("-apart") else path)
    store = GitStore(repo, durability) if durability else GitStore(repo)
runner = StepRunner(store)
checks = [LedgerCheck()]
noop = lambda: ActionResult(ok=True)
while time.time() < start_at:
    time.sleep(0.001)
t0 = time.time()
done = 0
while time.time() < start_at + seconds:  # a fixed time: every writer runs through the whole window
    assert runner.run(StepKey.derive(f"w{wid}", f"s{done}"), checks, noop).status == "created"
    done += 1
t1 = time.time()
store.close()
print(json.dumps([t0, t1, done]))
"""


SUSTAINED = (
    """
import json, statistics, sys, time
sys.path.insert(0, sys.argv[5])
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult, StepRunner
engine, path, n, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
"""
    + OPEN_STORE
    + """
runner = StepRunner(store)
checks = [LedgerCheck()]
noop = lambda: ActionResult(ok=True)
runner.run(StepKey.derive("warm-" + tag, "s"), checks, noop)
if hasattr(store, "flush"):
    store.flush()  # an empty journal: the loop's own events fold in the loop
steps = [StepKey.derive(f"sustained-{tag}-{i}", "fresh") for i in range(n)]
each = []
start = time.perf_counter()
for step in steps:
    t = time.perf_counter(); r = runner.run(step, checks, noop); each.append(time.perf_counter() - t)
    assert r.status == "created", r
total = time.perf_counter() - start
left = store.journal.count() if hasattr(store, "journal") else 0
store.close()
print(json.dumps({"mean": total / n, "median": statistics.median(each), "max": max(each), "left": left}))
"""
)

SUSTAINED_ENGINES = ("gitledger-fsync", "gitledger-full", "gitledger-none", "sqlite-full", "sqlite-normal")


def sustained(work: Path, size: int, rounds: int, steps: int) -> dict[str, Any]:
    """Fresh steps one after another in one process, with the work each engine leaves for later paid
    in the loop: ``steps`` steps write ``2 * steps`` events, so with ``steps`` = FOLD_EVENTS the
    gitledger journal folds twice in the loop (the second fold at its last step) and the mean per step
    carries the folds' share, which the medians of ``in_process`` leave out (one step in 1 024 folds);
    SQLite checkpoints its log as it fills. Per engine: the mean and the median per step (ms) of each
    round, the slowest step, and the events left unfolded at the end (0: every fold was paid)."""
    base = work / f"sustained-{size}"
    git_base, db_base = base / "git", base / "sqlite.db"
    if not git_base.exists():
        base.mkdir(parents=True, exist_ok=True)
        every = make_steps(size)
        build_ledger(git_base, "gitledger", every)
        build_ledger(base / "sqlite", "sqlite", every)
    paths: dict[str, Path] = {}
    for engine in SUSTAINED_ENGINES:
        paths[engine] = base / (f"{engine}.db" if engine.startswith("sqlite") else engine)
        if engine.startswith("sqlite"):
            shutil.copy2(db_base, paths[engine])
        else:
            shutil.copytree(git_base, paths[engine], symlinks=True)
    out: dict[str, Any] = {
        name: {"mean": [], "median": [], "max": 0.0, "left": 0} for name in SUSTAINED_ENGINES
    }
    env = bench_env({"PYTHONPATH": str(ROOT)})
    for rnd in range(rounds):
        shift = rnd % len(SUSTAINED_ENGINES)
        for engine in SUSTAINED_ENGINES[shift:] + SUSTAINED_ENGINES[:shift]:
            argv = [PY, "-c", SUSTAINED, engine, str(paths[engine]), str(steps), f"r{rnd}", str(ROOT)]
            got = json.loads(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)
            cell = out[engine]
            cell["mean"].append(got["mean"] * 1000)
            cell["median"].append(got["median"] * 1000)
            cell["max"] = max(cell["max"], got["max"] * 1000)
            cell["left"] = max(cell["left"], got["left"])
    return {
        name: {
            **cell,
            "mean_ms": statistics.median(cell["mean"]),
            "median_ms": statistics.median(cell["median"]),
        }
        for name, cell in out.items()
    }


def build_ledger(where: Path, engine: str, steps: list[Any]) -> Path:
    """A ledger of ``steps`` (two events each, as a real step leaves) for ``engine``: an SQLite file
    ``where.db``, or a git repository ``where`` (gitledger and the previous engine); its path."""
    if engine.startswith("sqlite"):
        path = where.with_name(where.name + ".db")
        store = SqliteStore(path)
        store.bulk_load(build_items(steps))
        store.close()
        return path
    path = init_repo(where)
    build_git(path, steps)
    return path


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000 if samples else float("nan")


def in_process(
    work: Path, sizes: list[int], rounds: int, reps: int, baseline: Path | None, with_peers: bool = True
) -> dict[str, Any]:
    engines = [e for e in STORE_ENGINES if e != "previous" or baseline is not None]
    ledgers: dict[tuple[str, int], Path] = {}
    for size in sizes:
        steps = make_steps(size)
        for engine in engines:
            ledgers[(engine, size)] = build_ledger(work / f"{engine}-{size}", engine, steps)
    # the peers that are installed, in the same rotation (their ledgers are built in each child)
    extra = [(peer, peers.PEER_SIZE) for peer in (peers.available() if with_peers else [])]
    samples: dict[str, dict[str, list[float]]] = {}
    per_round: dict[str, dict[str, list[float]]] = {}  # each round's median (ms), in round order
    for rnd in range(rounds):
        order = [(e, s) for e in engines for s in sizes] + extra
        shift = rnd % len(order)
        for engine, size in order[shift:] + order[:shift]:
            if engine in peers.PEERS:
                got = peer_in_process(work, engine, reps, f"r{rnd}")
            else:
                got = store_in_process(work, engine, ledgers[(engine, size)], size, reps, f"r{rnd}", baseline)
                if engine.startswith("gitledger"):
                    fold(ledgers[(engine, size)])
            slot = samples.setdefault(f"{engine}@{size}", {"fresh": [], "done": []})
            each = per_round.setdefault(f"{engine}@{size}", {"fresh": [], "done": []})
            for what in ("fresh", "done"):
                slot[what] += got[what]
                each[what].append(median_ms(got[what]))
    medians = {name: {what: median_ms(v) for what, v in s.items()} for name, s in samples.items()}
    return {name: {**cell, "rounds": per_round[name]} for name, cell in medians.items()}


def fold(ledger: Path) -> None:
    """Fold a ledger's journal between two measuring processes (not timed), so that none of them
    folds: a fold reads and rewrites most fan-out levels, and the process that folded finds them
    cached afterwards (its fresh and done steps were ~12 % faster on 100 000 entries), so whether a
    measuring process happened to fold, and after how many of its steps, moved the medians."""
    with GitRepo.discover(ledger) as repo:
        store = GitStore(repo)
        store.flush()
        store.close()


def store_in_process(
    work: Path, engine: str, ledger: Path, size: int, reps: int, tag: str, baseline: Path | None
) -> dict[str, list[float]]:
    """One child's fresh and done samples (s) of a ``Store`` engine on a ledger of ``size`` entries."""
    tree = str(baseline if engine == "previous" else ROOT)
    env = bench_env({"PYTHONPATH": tree})
    # -S for the previous engine: no site-packages, so an editable install of this checkout
    # cannot mix its modules in (the store needs the standard library only)
    flags = ["-S"] if engine == "previous" else []
    argv = [PY, *flags, "-c", CHILD, engine, str(ledger), str(size), str(reps), tag, tree]
    return _samples(argv, env, work, f"{engine} at {size}")


def peer_in_process(work: Path, engine: str, reps: int, tag: str) -> dict[str, list[float]]:
    """One child's fresh and done samples (s) of a peer (``benchmarks/peers.py``) on a new store of
    :data:`peers.PEER_SIZE` entries."""
    with peers.peer_store(work / f"{engine}-{tag}", engine) as where:
        argv = [PY, "-c", peers.CHILD, engine, where, str(peers.PEER_SIZE), str(reps), tag]
        return _samples(argv, bench_env({"PYTHONPATH": str(ROOT)}), work, engine)


def _samples(argv: list[str], env: dict[str, str], work: Path, what: str) -> dict[str, list[float]]:
    """Run one measuring child; the fresh and done samples (s) on the last line of its output."""
    child = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, check=False)
    if child.returncode != 0:
        raise RuntimeError(f"{what} failed: {child.stderr[-2000:]}")
    got: dict[str, list[float]] = json.loads(child.stdout.strip().splitlines()[-1])
    return got


def writers(
    work: Path,
    counts: list[int],
    seconds: float,
    base: int,
    rounds: int = 1,
    baseline: Path | None = None,
    with_peers: bool = True,
) -> dict[str, Any]:
    """steps/s of ``n`` concurrent writer processes per engine, interleaved: round by round, for each
    writer count, every engine in a rotating order (the previous engine too, with ``--baseline``, and
    the peers that are installed and run concurrent writers, ``peers.WRITER_PEERS``).

    Every run starts from a copy of one ledger of ``base`` entries (the peers from an empty store) and
    its writers step for ``seconds``: each writer count does the same work on the same state (a fixed
    number of steps a writer, on an empty ledger, folded at 8 writers and never at 1)."""
    # gitledger-fsync-apart: each writer on a ledger of its own, nothing shared: what the machine allows
    engines = [
        "gitledger-fsync",
        "gitledger-full",
        "gitledger-none",
        "sqlite-normal",
        "sqlite-full",
        "gitledger-fsync-apart",
    ]
    if baseline is not None:  # an engine before the durability setting is measured once, as it is
        engines += ["previous-fsync", "previous-none"] if has_durability(baseline) else ["previous"]
    if with_peers:
        engines += [peer for peer in peers.available() if peer in peers.WRITER_PEERS]
    steps = make_steps(base)
    origin = work / "writers-start"
    start = {
        "git": build_ledger(origin, "git", steps) if base else init_repo(origin),
        "sqlite": build_ledger(origin, "sqlite", steps),
    }
    rates: dict[str, list[float]] = {}
    lost: dict[str, int] = {}
    runs = 0
    for rnd in range(rounds):
        for n in counts:
            shift = (rnd + n) % len(engines)
            for engine in engines[shift:] + engines[:shift]:
                runs += 1
                if engine in peers.PEERS:
                    with peers.peer_store(work / f"w-{engine}-{n}-{runs}", engine) as where:
                        wall, done = _run_writers(work, peers.WRITER, engine, where, n, seconds, ROOT, [])
                        added = peers.key_count(int(where))
                else:
                    wall, done, added = _store_writers(work, engine, n, seconds, runs, baseline, start, base)
                name = f"{engine}@{n}"
                rates.setdefault(name, []).append(done / wall)
                lost[name] = lost.get(name, 0) + done - added
    return {
        name: {"steps_per_s": statistics.median(rate), "runs": rate, "lost": lost[name]}
        for name, rate in sorted(rates.items())
    }


def _store_writers(
    work: Path,
    engine: str,
    n: int,
    seconds: float,
    runs: int,
    baseline: Path | None,
    start: dict[str, Path],
    base: int,
) -> tuple[float, int, int]:
    """(wall time, steps the writers did, entries the ledger gained) of ``n`` writers of a ``Store``
    engine, on a copy of the starting ledger of its kind (``start``: "git", "sqlite") of ``base``
    entries."""
    keeper = None
    env: dict[str, str] = {}
    if engine.startswith("sqlite"):
        path = work / f"w-{engine}-{n}-{runs}.db"
        shutil.copyfile(start["sqlite"], path)
        # a connection open through the run keeps the log the writers reuse in place
        keeper = SqliteStore(path)
        keeper.reuse_wal()
    elif engine.endswith("-apart"):  # one repository per writer, w0 ... (the writer adds /w<id>)
        path = work / f"w-{engine}-{n}-{runs}"
        ledgers = [shutil.copytree(start["git"], path / f"w{w}", symlinks=True) for w in range(n)]
        # each ledger folds after 1/n of the events, so the n of them fold as often as one shared
        # ledger would: the same work, nothing shared (a fold costs per event, not per fold)
        env = {"GITLEDGER_FOLD_EVENTS": str(max(1, FOLD_EVENTS // n))}
    else:
        path = shutil.copytree(start["git"], work / f"w-{engine}-{n}-{runs}", symlinks=True)
        ledgers = [path]
    tree = baseline if engine.startswith("previous") and baseline is not None else ROOT
    flags = ["-S"] if engine.startswith("previous") else []
    wall, done = _run_writers(work, WRITER, engine, str(path), n, seconds, tree, flags, env)
    if keeper is not None:  # SQLite: counted on the connection that kept the log
        count = keeper.count()
        keeper.close()
        path.unlink()
        return wall, done, count - base
    # counted by this checkout's reader (it reads the previous engine's ledgers too)
    count = 0
    for ledger in ledgers:
        listed = subprocess.run(
            [PY, "-m", "gitledger", "list", "--json"],
            cwd=ledger,
            env=bench_env({"PYTHONPATH": str(ROOT)}),
            capture_output=True,
            check=True,
        )
        count += len(json.loads(listed.stdout)) - base
    shutil.rmtree(path)
    return wall, done, count


def _run_writers(
    work: Path,
    script: str,
    engine: str,
    where: str,
    n: int,
    seconds: float,
    tree: Path,
    flags: list[str],
    extra: dict[str, str] | None = None,
) -> tuple[float, int]:
    """Start ``n`` writer processes of ``script`` together, each stepping for ``seconds``: (the wall
    time from the first one's start to the last one's end, the steps they did in all); ``extra``:
    more of their environment."""
    start_at = time.time() + 1.0 + 0.2 * n
    env = bench_env({"PYTHONPATH": str(tree), **(extra or {})})
    commands = [
        [PY, *flags, "-c", script, engine, where, str(w), str(seconds), str(start_at), str(tree)]
        for w in range(n)
    ]
    spans = run_together(commands, env, work, f"{engine} writer")
    return float(max(s[1] for s in spans) - min(s[0] for s in spans)), sum(int(s[2]) for s in spans)


def has_durability(tree: Path) -> bool:
    """Whether the engine in ``tree`` has the ``durability`` setting (``fsync`` / ``none``)."""
    store = tree / "gitledger" / "git" / "store.py"
    return store.exists() and "durability" in store.read_text()


def disk_bytes(path: Path) -> tuple[int, int]:
    """(bytes in files below path, loose object files)."""
    total = loose = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
            if len(name) == 38 and os.path.basename(root) != "pack" and "objects" in root:
                loose += 1
    return total, loose


GROWER = """
import sys
sys.path.insert(0, sys.argv[3])
try:
    from gitledger.core.checks import LedgerCheck
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import ActionResult, StepRunner
    from gitledger.git.repo import GitRepo
    from gitledger.git.store import GitStore
except ImportError:  # the layout before the layers (the previous engine)
    from gitledger.checks import LedgerCheck
    from gitledger.keys import StepKey
    from gitledger.protocol import ActionResult, StepRunner
    from gitledger.git import GitRepo
    from gitledger.gitstore import GitStore
store = GitStore(GitRepo.discover(sys.argv[1]))
runner = StepRunner(store)
for i in range(int(sys.argv[2])):
    runner.run(StepKey.derive(f"g{i}", "s"), [LedgerCheck()], lambda: ActionResult(ok=True))
store.close()
if sys.argv[4] == "flush" and hasattr(GitStore, "flush"):  # (an engine without a journal has none)
    store = GitStore(GitRepo.discover(sys.argv[1]))
    store.flush()
    store.close()
"""


def growth(work: Path, n: int, tree: Path = ROOT, tag: str = "", base: int = 0) -> dict[str, Any]:
    """Bytes added to ``.git`` by ``n`` fresh steps (durable, the default), as written (after a flush)
    and after ``git gc``; ``tree``: the checkout whose engine writes them (the baseline too); ``base``:
    entries the ledger holds before (built as one pack, then ``git gc``): a fold rewrites fan-out levels
    that grow with the ledger, so the bytes per entry do too."""
    repo = init_repo(work / f"growth{tag}")
    env = bench_env({"PYTHONPATH": str(tree)})
    if base:
        build_git(repo, make_steps(base))
        subprocess.run(["git", "gc", "-q"], cwd=repo, env=env, check=True)
    flags = ["-S"] if tree != ROOT else []
    before, loose_before = disk_bytes(repo / ".git")
    run = [PY, *flags, "-c", GROWER, str(repo)]
    subprocess.run([*run, str(n), str(tree), "-"], env=env, cwd=work, check=True)
    journaled, _ = disk_bytes(repo / ".git")
    subprocess.run([*run, "0", str(tree), "flush"], env=env, cwd=work, check=True)
    written, loose = disk_bytes(repo / ".git")
    subprocess.run(["git", "gc", "-q"], cwd=repo, env=env, check=True)
    after_gc, _ = disk_bytes(repo / ".git")
    return {
        "entries": n,
        "ledger_before": base,
        "bytes_per_entry_written": (written - before) / n,
        "bytes_per_entry_before_flush": (journaled - before) / n,
        "bytes_per_entry_after_gc": (after_gc - before) / n,
        "loose_objects_per_step": (loose - loose_before) / n,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default=BASELINE, help="previous engine's revision ('' to skip)")
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--reps", type=int, default=150)
    parser.add_argument("--writers", default="1,2,4,8")
    parser.add_argument(
        "--writer-seconds", type=float, default=2.0, help="how long the writers of a run step (default 2)"
    )
    parser.add_argument(
        "--writer-base",
        type=int,
        default=GROWTH_BASE,
        help=f"entries of the ledger every writers' run starts from (default {GROWTH_BASE})",
    )
    parser.add_argument("--writer-rounds", type=int, default=1, help="interleaved rounds of the writers")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated parts to run: in_process, sustained, writers, growth (default all)",
    )
    parser.add_argument(
        "--sustained-steps",
        type=int,
        default=FOLD_EVENTS,
        help=f"fresh steps a sustained run makes in one process (default {FOLD_EVENTS}: two folds)",
    )
    parser.add_argument("--sustained-rounds", type=int, default=3, help="interleaved rounds of them")
    parser.add_argument("--growth", type=int, default=2000)
    parser.add_argument(
        "--growth-base",
        type=int,
        default=GROWTH_BASE,
        help="entries of the ledger the growth is measured on too, besides an empty one (0: only empty)",
    )
    parser.add_argument("--quick", action="store_true", help="10 000 entries, 3 rounds, fewer steps")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--no-peers", action="store_true", help="leave out the peers even if installed (benchmarks/peers.py)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.large, args.rounds, args.reps, args.writer_seconds, args.growth = 10_000, 3, 80, 1.0, 500
        args.sustained_steps, args.sustained_rounds = 200, 1
    use_isolated_git()
    work = Path(tempfile.mkdtemp(prefix="gitledger-bench-store-"))
    try:
        report = run(
            work,
            baseline=args.baseline,
            large=args.large,
            rounds=args.rounds,
            reps=args.reps,
            writer_counts=[int(n) for n in args.writers.split(",")],
            writer_seconds=args.writer_seconds,
            writer_base=args.writer_base,
            writer_rounds=args.writer_rounds,
            growth_steps=args.growth,
            growth_base=args.growth_base,
            parts=args.only.split(",") if args.only else PARTS,
            with_peers=not args.no_peers,
            sustained_steps=args.sustained_steps,
            sustained_rounds=args.sustained_rounds,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_report(report, args.large)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


PARTS = ("in_process", "sustained", "writers", "growth")


def run(
    work: Path,
    baseline: str = BASELINE,
    large: int = 100_000,
    rounds: int = 6,
    reps: int = 150,
    writer_counts: list[int] | tuple[int, ...] = (1, 2, 4, 8),
    writer_seconds: float = 2.0,
    writer_base: int = GROWTH_BASE,
    writer_rounds: int = 1,
    growth_steps: int = 2000,
    growth_base: int = GROWTH_BASE,
    parts: list[str] | tuple[str, ...] = PARTS,
    with_peers: bool = True,
    sustained_steps: int = FOLD_EVENTS,
    sustained_rounds: int = 3,
) -> dict[str, Any]:
    """Every part in ``work``: the figures ``print_report`` prints and ``benchmarks/report.py`` renders.
    ``baseline``: a revision of the previous engine ('' for none); ``with_peers``: the installed peers
    too (``benchmarks/peers.py``)."""
    work.mkdir(parents=True, exist_ok=True)
    tree = export(baseline, work / "previous") if baseline else None
    sizes = [100, large]
    report: dict[str, Any] = {"baseline": baseline, "sizes": sizes, "rounds": rounds, "reps": reps}
    if "in_process" in parts:
        report["in_process"] = in_process(work, sizes, rounds, reps, tree, with_peers)
    if "sustained" in parts:
        report["sustained"] = sustained(work, large, sustained_rounds, sustained_steps)
        report["sustained_steps"], report["sustained_rounds"] = sustained_steps, sustained_rounds
    if "writers" in parts:
        report["writers"] = writers(
            work, list(writer_counts), writer_seconds, writer_base, writer_rounds, tree, with_peers
        )
        report["writer_seconds"], report["writer_base"] = writer_seconds, writer_base
        report["writer_rounds"] = writer_rounds
    if "growth" in parts:
        report["growth"] = growth(work, growth_steps)
        if growth_base:
            report["growth_large"] = growth(work, growth_steps, tag=f"-{growth_base}", base=growth_base)
        if tree is not None:
            try:
                report["growth_previous"] = growth(work, growth_steps, tree, "-previous")
            except subprocess.CalledProcessError:  # an engine without the layers or a flush
                print("(the previous engine's growth was not measured)", file=sys.stderr)
        found = peers.available() if with_peers else []
        if found:
            env = bench_env({"PYTHONPATH": str(ROOT)})
            report["growth_peers"] = {peer: peers.growth(work, peer, growth_steps, PY, env) for peer in found}
    return report


def print_report(report: dict[str, Any], large: int) -> None:
    inp, wr = report.get("in_process", {}), report.get("writers", {})
    if inp:
        print_in_process(report, inp, large)
    su = report.get("sustained", {})
    if su:
        print(
            f"sustained, {report['sustained_steps']} fresh steps in one process at {large} entries "
            f"(median of {report['sustained_rounds']} rounds, ms a step): mean (folds included), median, "
            "slowest"
        )
        for name, cell in su.items():
            print(f"  {name:<18} {cell['mean_ms']:>7.3f} {cell['median_ms']:>7.3f} {cell['max']:>9.1f}")
    if wr:
        print("writers: steps/s, median of the rounds (lost)")
        for name, row in wr.items():
            print(f"  {name:<22} {row['steps_per_s']:>8.0f}  ({row['lost']})")
    for name in ("growth", "growth_large", "growth_previous"):
        gr = report.get(name)
        if gr:
            print(
                f"{name} over {gr['entries']} entries (ledger of {gr.get('ledger_before', 0)} before): "
                f"{gr['bytes_per_entry_written']:.0f} B/entry written, "
                f"{gr['bytes_per_entry_after_gc']:.0f} B/entry after git gc, "
                f"{gr['loose_objects_per_step']:.2f} loose objects per step"
            )
    for peer, gr in report.get("growth_peers", {}).items():
        written = gr["bytes_per_entry_written"]
        print(
            f"growth of {peer} over {gr['entries']} entries: "
            + ("nothing written per step" if written is None else f"{written:.0f} B/entry written")
            + f", {gr['bytes_per_entry_compacted']:.0f} B/entry compacted"
        )
    print("targets (as in REPORT.md):")
    for row in store_targets(report):
        met = "n/a   " if row["met"] is None else "met   " if row["met"] else "MISSED"
        print(f"  {met} {row['target']}: {row['measured']}")


def print_in_process(report: dict[str, Any], inp: dict[str, Any], large: int) -> None:
    print(f"in process, medians in ms ({report['rounds']} interleaved rounds x {report['reps']} steps)")
    print(f"{'engine':<20} {'fresh@100':>10} {f'fresh@{large}':>13} {'done@100':>10} {f'done@{large}':>12}")
    for engine in (*STORE_ENGINES, *peers.PEERS):
        if f"{engine}@100" not in inp:
            continue
        a, b = inp[f"{engine}@100"], inp.get(f"{engine}@{large}", {})
        cells = [f"{b[what]:.3f}" if what in b else "-" for what in ("fresh", "done")]
        print(f"{engine:<20} {a['fresh']:>10.3f} {cells[0]:>13} {a['done']:>10.3f} {cells[1]:>12}")
    if f"previous@{large}" in inp:
        for what in ("fresh", "done"):
            value = inp[f"gitledger-fsync@{large}"][what] / inp[f"previous@{large}"][what]
            print(f"  {what} fsync / previous engine at {large}: {value:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
