"""Per-step protocol overhead, in process, against the ledger's size: gitledger vs JSON file vs SQLite.

The three ledgers are built at every size with the same entries (all ``done``) and verified; then all
of them, every size, are measured *interleaved* (round robin, the order rotating each round), so a
change in machine load hits every size and every ledger alike. The JSON file ledger, which parses
megabytes a step from 10 000 entries up, takes its rounds after the others': interleaved with them,
it slowed whichever cell came next (gitledger's skip at 10 000 entries read 1.40 to 1.93 times the
100-entry ledger's over three full runs).

- ``skip``: ``StepRunner.run`` on an existing done key (one ledger read) → ``skipped``;
- ``fresh``: ``StepRunner.run`` on a new key → claim (CAS append) + no-op action + done (append).

The action is a no-op and the only check is ``ledger``, so what is timed is the protocol and the
store. Each (ledger, path) cell stops after ``reps`` samples or when it has used its time budget
(the JSON file ledger gets slow on purpose: it rewrites the whole file on every transition).

Each skip looks up a key its ledger was not asked for before in this process, so a 100-entry ledger
gives at most 97 skip samples. Drawn with replacement, 300 draws from 100 keys were answered two
thirds from the store's caches and 300 draws from 10 000 keys mostly not: the size ratio compared
cached lookups with uncached ones (``bench_store.py`` draws its done keys the same way).
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.build import (
    build_git,
    build_items,
    make_steps,
    verify_git,
    verify_sample,
)
from benchmarks.common import init_repo, log, summarize
from benchmarks.ledgers import JsonFileStore, SqliteStore
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import CREATED, SKIPPED, ActionResult, StepRunner
from gitledger.core.store import Store
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore

LEDGERS = ("gitledger", "sqlite", "json")
CHECKS = [LedgerCheck()]


def noop() -> ActionResult:
    return ActionResult(ok=True)


@dataclass
class Opened:
    kind: str
    store: Store
    runner: StepRunner
    build_s: float
    verified: dict[str, Any]
    close: Callable[[], None]
    samples: dict[str, list[float]] = field(default_factory=lambda: {"skip": [], "fresh": []})
    spent: dict[str, float] = field(default_factory=lambda: {"skip": 0.0, "fresh": 0.0})


def open_ledger(kind: str, folder: Path, steps: list[StepKey], verify: int) -> Opened:
    """Build a ``kind`` ledger holding ``steps`` in ``folder``, verify it, and open it."""
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    store: Store
    if kind == "gitledger":
        path = init_repo(folder / "repo")
        build_git(path, steps)
        build_s = time.perf_counter() - start
        verified = verify_git(path, steps, verify)
        repo = GitRepo.discover(path)
        store = GitStore(repo)
        close = repo.close
    elif kind == "json":
        json_store = JsonFileStore(folder / "ledger.json")
        json_store.bulk_load(build_items(steps))
        build_s = time.perf_counter() - start
        verified = {**verify_sample(json_store, steps, verify), "count": json_store.count()}
        store, close = json_store, json_store.close
    elif kind == "sqlite":
        sql_store = SqliteStore(folder / "ledger.sqlite")
        sql_store.bulk_load(build_items(steps))
        build_s = time.perf_counter() - start
        verified = {**verify_sample(sql_store, steps, verify), "count": sql_store.count()}
        store, close = sql_store, sql_store.close
    else:
        raise ValueError(f"unknown ledger {kind!r}")
    if verified["count"] != len(steps):
        raise RuntimeError(f"{kind} ledger holds {verified['count']} entries, expected {len(steps)}")
    runner = StepRunner(store)
    return Opened(kind, store, runner, build_s, verified, close)


def measure_all(
    workdir: Path,
    sizes: list[int],
    reps: int,
    min_reps: int,
    budget_s: float,
    verify: int,
    ledgers: tuple[str, ...] = LEDGERS,
    seed: int = 1,
) -> dict[str, dict[str, Any]]:
    """Build every ledger at every size, then measure skip and fresh steps interleaved across all.

    Every (size, ledger) cell takes one step per round, the order rotating each round, so a change
    in machine load hits every size and every ledger alike: the ratios between sizes (flatness) and
    between ledgers come from the same rounds.
    """
    rng = random.Random(seed)
    cells: list[tuple[int, list[StepKey], Opened]] = []
    try:
        for size in sizes:
            steps = make_steps(size)
            for kind in ledgers:
                log(f"overhead: building {kind} ledger of {size} entries")
                cells.append((size, steps, open_ledger(kind, workdir / f"{kind}-{size}", steps, verify)))
        # warm up: spawn readers, fill caches the way a long-running agent would have them
        unseen: dict[int, list[StepKey]] = {}  # per cell, the keys a skip has not looked up yet
        for _size, steps, o in cells:
            warm = rng.sample(steps, min(3, len(steps)))
            for step in warm:
                assert o.runner.run(step, CHECKS, noop).status == SKIPPED
            assert o.runner.run(StepKey.derive("warm", o.kind), CHECKS, noop).status == CREATED
            pool = [step for step in rng.sample(steps, min(len(steps), reps + 3)) if step not in warm]
            unseen[id(o)] = pool[:reps]
        counter = 0
        # the JSON file ledger (up to a second a step, parsing megabytes) in rounds of its own, after
        # the others: interleaved, it slowed the cells measured after it by a swinging amount
        groups = [[c for c in cells if c[2].kind != "json"], [c for c in cells if c[2].kind == "json"]]
        for path, expect in (("skip", SKIPPED), ("fresh", CREATED)):
            for group in filter(None, groups):
                for rnd in range(reps):
                    shift = rnd % len(group)
                    active = [
                        c
                        for c in group[shift:] + group[:shift]
                        if (len(c[2].samples[path]) < min_reps or c[2].spent[path] < budget_s)
                        and (path != "skip" or unseen[id(c[2])])
                    ]
                    if not active:
                        break
                    for _size, _steps, o in active:
                        if path == "skip":
                            step = unseen[id(o)].pop()
                        else:
                            counter += 1
                            step = StepKey.derive(f"fresh-{counter}", "step")
                        t0 = time.perf_counter()
                        result = o.runner.run(step, CHECKS, noop)
                        elapsed = time.perf_counter() - t0
                        if result.status != expect:
                            raise RuntimeError(f"{o.kind} {path}: got {result.status}, expected {expect}")
                        o.samples[path].append(elapsed)
                        o.spent[path] += elapsed
        results: dict[str, dict[str, Any]] = {str(size): {} for size in sizes}
        for size, _steps, o in cells:
            results[str(size)][o.kind] = {
                "build_s": round(o.build_s, 3),
                "verified": o.verified,
                "skip": summarize(o.samples["skip"]),
                "fresh": summarize(o.samples["fresh"]),
            }
        return results
    finally:
        for _size, _steps, o in cells:
            o.close()


def run(
    workdir: Path,
    sizes: list[int],
    reps: int = 200,
    min_reps: int = 10,
    budget_s: float = 5.0,
    verify: int = 100,
    ledgers: tuple[str, ...] = LEDGERS,
    keep: bool = False,
) -> dict[str, Any]:
    """Per-step overhead at every size; returns {"sizes": [...], "results": {size: {ledger: ...}}}."""
    folder = workdir / "overhead"
    try:
        results = measure_all(folder, sizes, reps, min_reps, budget_s, verify, ledgers)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    for size in sizes:
        for kind, cell in results[str(size)].items():
            log(
                f"overhead {size:>7} {kind:<9} skip {cell['skip']['median']:.3f} ms "
                f"fresh {cell['fresh']['median']:.3f} ms (n={cell['skip']['n']}/{cell['fresh']['n']})"
            )
    return {
        "sizes": sizes,
        "ledgers": list(ledgers),
        "reps": reps,
        "min_reps": min_reps,
        "budget_s": budget_s,
        "interleaved": "every size and ledger in the same rounds",
        "results": results,
    }
