"""Concurrent throughput: P processes, each recording fresh steps on its own keys, on one ledger.

Each worker process opens the ledger, reports ready, waits for a shared start file, then runs
``StepRunner.run`` on ``steps`` new keys (no-op action, ledger-only check) and reports its own start
and end times (``time.monotonic``, system-wide on Linux). Throughput = all steps / (last end - first
start).

Retries are counted inside the worker by wrapping the store's own calls, without changing what they
do: for gitledger, ``GitRepo.update_refs`` returning False (the notes ref moved under us: the store
rebuilds its commit on the new tip and tries again) and the time spent waiting for the advisory lock;
for every ledger, ``Store.append`` returning None (the key's own version changed: the protocol
re-decides; it stays 0 on distinct keys). A step whose store gives up (``ConflictError`` after its
ref CAS tries) is counted in ``gave_up`` and the worker goes on.

There is no ablation without the advisory lock any more: since the journal (issue 14) the lock is what
makes the ledger correct (a fold replaces the journal under it exclusively), not only fast; with it
replaced by a no-op, 4 writers lost 2 of 400 steps (2026-12-04, the last run with the ablation).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import PY, ROOT, bench_env, init_repo, log

LEDGERS = ("gitledger", "sqlite", "json")


def _worker(kind: str, location: Path, worker: int, steps: int, go: Path) -> dict[str, Any]:
    from benchmarks.ledgers import JsonFileStore, SqliteStore
    from gitledger.core.checks import LedgerCheck
    from gitledger.core.errors import ConflictError
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import CREATED, ActionResult, StepRunner
    from gitledger.core.store import Store
    from gitledger.git.repo import GitRepo
    from gitledger.git.store import GitStore

    counts = {"ref_cas_retries": 0, "key_cas_losses": 0, "lock_wait_s": 0.0}
    store: Store
    if kind.startswith("gitledger"):
        repo = GitRepo.discover(location)
        git_store = GitStore(repo)
        update_refs = repo.update_refs

        def counted_update(updates: Any) -> bool:
            ok = update_refs(updates)
            if not ok:
                counts["ref_cas_retries"] += 1
            return ok

        repo.update_refs = counted_update  # type: ignore[method-assign]
        lock = repo.lock

        @contextlib.contextmanager
        def timed_lock(name: str = "gitledger.lock", *args: Any, **kwargs: Any) -> Iterator[None]:
            t0 = time.perf_counter()
            with lock(name, *args, **kwargs):  # the ledger lock (shared or not) and key stripes
                counts["lock_wait_s"] += time.perf_counter() - t0
                yield

        repo.lock = timed_lock  # type: ignore[method-assign]
        store = git_store
    elif kind == "sqlite":
        store = SqliteStore(location)
    elif kind == "json":
        store = JsonFileStore(location)
    else:
        raise ValueError(kind)
    append: Callable[..., str | None] = store.append

    def counted_append(intent: Any, event: Any, expected: Any) -> str | None:
        version = append(intent, event, expected)
        if version is None:
            counts["key_cas_losses"] += 1
        return version

    store.append = counted_append  # type: ignore[method-assign]
    runner = StepRunner(store)
    keys = [StepKey.derive(f"w{worker}-{i}", "step") for i in range(steps)]
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    gave_up = 0
    start = time.monotonic()
    for step in keys:
        try:
            result = runner.run(step, [LedgerCheck()], lambda: ActionResult(ok=True))
        except ConflictError:  # the store's retries ran out
            gave_up += 1
            continue
        if result.status != CREATED:
            raise RuntimeError(f"worker {worker}: {step.key} {result.status}")
    end = time.monotonic()
    store.close()
    return {"start": start, "end": end, "steps": steps, "gave_up": gave_up, **counts}


def measure(kind: str, folder: Path, processes: int, steps: int) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    if kind.startswith("gitledger"):
        location = init_repo(folder / "repo")
    elif kind == "sqlite":
        location = folder / "ledger.sqlite"
        from benchmarks.ledgers import SqliteStore

        SqliteStore(location).close()  # create the table before the race
    else:
        location = folder / "ledger.json"
    go = folder / "go"
    env = bench_env()
    procs = [
        subprocess.Popen(
            [
                PY,
                "-m",
                "benchmarks.bench_concurrency",
                "worker",
                kind,
                str(location),
                str(w),
                str(steps),
                str(go),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(processes)
    ]
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        if line.strip() != "ready":
            err = p.stderr.read() if p.stderr else ""
            raise RuntimeError(f"{kind} worker did not start: {line!r} {err[-800:]}")
    go.write_text("go")
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"{kind} worker failed ({p.returncode}): {err[-800:]}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    total = sum(r["steps"] for r in reports)
    transitions = 2 * total
    return {
        "processes": processes,
        "steps": total,
        "wall_s": round(wall, 4),
        "steps_per_s": total / wall if wall else float("nan"),
        "ref_cas_retries": sum(r["ref_cas_retries"] for r in reports),
        "ref_cas_retries_per_write": sum(r["ref_cas_retries"] for r in reports) / transitions,
        "key_cas_losses": sum(r["key_cas_losses"] for r in reports),
        "gave_up": sum(r["gave_up"] for r in reports),
        "lock_wait_share": sum(r["lock_wait_s"] for r in reports) / (wall * processes) if wall else 0.0,
    }


def verify(kind: str, folder: Path, expected: int, gave_up: int = 0) -> int:
    """Entries in the ledger after the race: every step that did not give up must have landed."""
    from benchmarks.ledgers import JsonFileStore, SqliteStore

    if kind.startswith("gitledger"):
        from benchmarks.build import git_ledger_count

        count = git_ledger_count(folder / "repo")["notes"]
    elif kind == "sqlite":
        store = SqliteStore(folder / "ledger.sqlite")
        count = store.count()
        store.close()
    else:
        count = JsonFileStore(folder / "ledger.json").count()
    if not expected - gave_up <= count <= expected:
        raise RuntimeError(f"{kind}: {count} entries after the race, expected {expected} ({gave_up} gave up)")
    return count


def run(
    workdir: Path,
    processes: list[int],
    steps: int = 40,
    ledgers: tuple[str, ...] = LEDGERS,
) -> dict[str, Any]:
    """Throughput for every ledger and process count; each worker records ``steps`` fresh steps."""
    results: dict[str, dict[str, Any]] = {k: {} for k in ledgers}
    for count in processes:
        for kind in ledgers:
            folder = workdir / f"conc-{kind}-{count}"
            cell = measure(kind, folder, count, steps)
            cell["verified_entries"] = verify(kind, folder, cell["steps"], cell["gave_up"])
            results[kind][str(count)] = cell
            log(
                f"concurrency {kind:<17} P={count}: {cell['steps_per_s']:.0f} steps/s, "
                f"ref retries {cell['ref_cas_retries']}, key CAS losses {cell['key_cas_losses']}, "
                f"gave up {cell['gave_up']}"
            )
    return {"processes": processes, "steps_per_worker": steps, "ledgers": list(ledgers), "results": results}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["worker"])
    parser.add_argument("kind")
    parser.add_argument("location", type=Path)
    parser.add_argument("worker", type=int)
    parser.add_argument("steps", type=int)
    parser.add_argument("go", type=Path)
    args = parser.parse_args(argv)
    report = _worker(args.kind, args.location, args.worker, args.steps, args.go)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GIT_TERMINAL_PROMPT", "0")
    sys.exit(main(sys.argv[1:]))
