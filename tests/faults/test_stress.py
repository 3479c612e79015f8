"""Concurrency stress with random crashes, then reconcile, rerun and an invariant check of everything.

Default: 8 worker processes x 50 keys (about a minute on two cores). ``GITLEDGER_STRESS=full``: 16 x 200.
``GITLEDGER_STRESS_SEED=N`` replays one random schedule (the seed is printed on failure).

Every worker goes through *all* keys: half of them in one random order and half in the reverse order,
so every key is raced for by several workers at once and met later by the others. Each ``gitledger
run-step`` is a real process; half of them get a random ``GITLEDGER_FAULT`` (SIGKILL at that point,
if the run gets there) and one in ten is SIGKILLed from outside at a random moment. Then: stale git
lock files left by killed git processes are removed (as an operator would), ``gitledger reconcile``
runs, every worker reruns every key, ledger-only steps left unconfirmed are settled by hand from the
effect files (``resolve --done`` if the effect is there, ``--forget`` if not) and rerun.

Invariants over the whole ledger: every key is done, ``created`` at most once and never a duplicate;
every effect exists exactly once in reality; no event recorded after the chaos phase is lost; the notes
history is append-only, one event per commit; every line parses; ``git fsck`` is clean.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitledger.core.crashpoints import POINTS
from gitledger.core.keys import StepKey
from tests.faults.audit import audit
from tests.faults.harness import KINDS, Workbench
from tests.faults.tally import TALLY, full_size

STRESS_KINDS = ["branch", "trailer", "file", "cmd", "ledger"]
FAULT_RATE = 0.5
OUTSIDE_KILL_RATE = 0.1


@dataclass
class Result:
    task: str
    kind: str
    fault: str | None
    killed_from_outside: bool
    returncode: int
    stdout: str
    stderr: str

    @property
    def status(self) -> str:
        if self.returncode == -signal.SIGKILL:
            return "killed"
        try:
            return str(json.loads(self.stdout)["status"])
        except (ValueError, KeyError):
            return f"error:{self.returncode}"


def sizes() -> tuple[int, int]:
    return (16, 200) if full_size() else (8, 50)


def run_worker(bench: Workbench, order: list[tuple[str, str]], seed: int, chaos: bool) -> list[Result]:
    rng = random.Random(seed)
    results = []
    for task, kind in order:
        fault = rng.choice(POINTS) if chaos and rng.random() < FAULT_RATE else None
        kill_after = rng.uniform(0.0, 0.5) if chaos and rng.random() < OUTSIDE_KILL_RATE else None
        proc = subprocess.Popen(
            bench.argv(KINDS[kind], task),
            cwd=bench.repo,
            env=bench.env(fault),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        killed = False
        if kill_after is not None:
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                killed = True
        out, err = proc.communicate(timeout=300)
        results.append(Result(task, kind, fault, killed, proc.returncode, out, err))
    return results


def run_all(
    bench: Workbench, keys: list[tuple[str, str]], workers: int, seed: int, chaos: bool
) -> list[Result]:
    """Every worker takes the keys in the same random order, so they race for each key (as restarted
    agents running the same plan do); every other worker walks that order backwards, so the ones that
    meet a key late find it done, half-done or claimed by a dead owner."""
    order = list(keys)
    random.Random(seed).shuffle(order)
    with ThreadPoolExecutor(workers) as pool:
        futures = [
            pool.submit(run_worker, bench, order if w % 2 == 0 else order[::-1], seed * 1000 + w, chaos)
            for w in range(workers)
        ]
        return [r for f in futures for r in f.result()]


def remove_stale_locks(repo: Path) -> list[str]:
    """git lock files left by git processes that were killed (gitledger.lock is a flock file, kept)."""
    removed = []
    for path in (repo / ".git").rglob("*.lock"):
        if path.name != "gitledger.lock" and path.is_file():
            path.unlink()
            removed.append(str(path.relative_to(repo)))
    return removed


def check_runs(results: list[Result]) -> None:
    """Every run ended in a documented way: a status, or SIGKILL; never a traceback."""
    allowed = {"created", "skipped", "already_existed", "in_progress", "unconfirmed", "failed", "killed"}
    odd = [r for r in results if r.status not in allowed or "Traceback" in r.stderr]
    assert not odd, [(r.task, r.kind, r.fault, r.returncode, r.stderr[-400:]) for r in odd[:5]]


def test_stress_random_crashes_then_reconcile_and_rerun(tmp_path: Path) -> None:
    workers, nkeys = sizes()
    seed = int(os.environ.get("GITLEDGER_STRESS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"GITLEDGER_STRESS_SEED={seed} workers={workers} keys={nkeys}")
    bench = Workbench(tmp_path, effect_prefix="sleep 0.05; ")  # the effect takes a moment
    bench.go.touch()
    keys = [(f"S-{i}", STRESS_KINDS[i % len(STRESS_KINDS)]) for i in range(nkeys)]

    chaos = run_all(bench, keys, workers, seed, chaos=True)
    check_runs(chaos)
    crashes = sum(r.status == "killed" for r in chaos)
    stale = remove_stale_locks(bench.repo)
    after_chaos = audit(bench.repo, fsck=False)
    after_chaos.assert_clean()

    reconcile = bench.gitledger("reconcile", "--json")
    assert reconcile.returncode == 0, reconcile.stderr
    rerun = run_all(bench, keys, workers, seed + 1, chaos=False)
    check_runs(rerun)
    assert not [r for r in rerun if r.status == "killed"]

    # settle what only the ledger can know, as a person would, then rerun whatever is not done yet
    steps = {task: StepKey.derive(task, kind) for task, kind in keys}
    kinds = dict(keys)
    settled = 0
    for _round in range(3):
        listed = {e["key"]: e for e in bench.gitledger("list", "--json").json_list()}
        pending = [t for t in steps if listed.get(steps[t].key, {}).get("state") != "done"]
        if not pending:
            break
        for task in pending:
            step, kind = steps[task], kinds[task]
            result = bench.run_step(KINDS[kind], task=task)
            if result.status == "unconfirmed":
                how = "--done" if bench.effects(kind, task) else "--forget"
                assert bench.gitledger("resolve", step.key, how).returncode == 0
                settled += 1
                bench.run_step(KINDS[kind], task=task)

    listed = {e["key"]: e for e in bench.gitledger("list", "--json").json_list()}
    assert len(listed) == nkeys
    not_done = {k: e["state"] for k, e in listed.items() if e["state"] != "done" or e["duplicate"]}
    assert not not_done, not_done

    final = audit(bench.repo)
    final.assert_clean()
    lost = after_chaos.ids - final.ids
    assert not lost, sorted(lost)[:5]
    created = final.created_counts()
    assert all(created[s.key] <= 1 for s in steps.values()), {k: n for k, n in created.items() if n > 1}

    effects: dict[str, int] = {}
    for kind in STRESS_KINDS:
        pairs = [(steps[t].key, steps[t].branch) for t, k in keys if k == kind]
        effects.update(bench.reality.counts(kind, pairs))
    wrong = {k: n for k, n in effects.items() if n != 1}
    assert not wrong, wrong

    statuses = Counter(r.status for r in chaos)
    print(f"chaos: {dict(statuses)}; rerun: {dict(Counter(r.status for r in rerun))}")
    print(f"stale locks removed: {stale}; settled by hand: {settled}; events: {len(final.events)}")
    TALLY.set_max("stress.processes", workers)
    TALLY.set_max("stress.keys", nkeys)
    TALLY.add("stress.runs", len(chaos) + len(rerun))
    TALLY.add("stress.crashes", crashes)
    TALLY.add("stress.effects", sum(effects.values()))
    TALLY.add("stress.duplicates", sum(max(0, n - 1) for n in effects.values()))
    TALLY.add("stress.events_lost", len(lost) + final.lost)
    TALLY.add("stress.events", len(final.events))
    TALLY.add("stress.stale_locks", len(stale))


@pytest.mark.skipif(not full_size(), reason="only with GITLEDGER_STRESS=full")
def test_full_size_is_what_the_issue_asks_for() -> None:
    assert sizes() == (16, 200)
