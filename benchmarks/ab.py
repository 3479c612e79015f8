"""Before/after comparison of two gitledger revisions, interleaved in one run.

    python benchmarks/ab.py BEFORE_REV AFTER_REV [--rounds 20] [--size 10000]

Each revision's ``gitledger/`` is exported with ``git archive`` (nothing in the repository changes) and
compiled to bytecode. Then, round by round, alternating A and B:

- whole process: ``gitledger run-step`` skip (done key) and fresh (``-- true``), and the floor;
- in process: a child that runs ``StepRunner.run`` on skip and fresh keys against a ledger of
  ``--size`` entries and reports its per-step times.

Each revision has its own copy of the ledgers (built once), and its journal is folded between two
children (not timed), so no child folds: a process that folded finds the fan-out levels cached (its
steps after the fold were ~12 % faster on 100 000 entries), and on one shared ledger the revision
that folds more often did the folding, inside its own measured children.

Prints medians, p90 and the B/A ratio (what the fix commits quote); ``cpu_*`` rows are the processes'
own CPU time (user + system, from ``getrusage``), which shared cores disturb far less than wall time.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.build import build_git, make_steps  # noqa: E402
from benchmarks.common import PY, bench_env, init_repo, summarize, timed_process, use_isolated_git  # noqa: E402

CHILD = """
import json, random, sys, time
try:  # the layered package (core/, git/)
    from gitledger.core.checks import LedgerCheck
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import ActionResult, StepRunner
    from gitledger.git.repo import GitRepo
    from gitledger.git.store import GitStore
except ImportError:  # a revision before the layout
    from gitledger.checks import LedgerCheck
    from gitledger.git import GitRepo
    from gitledger.gitstore import GitStore
    from gitledger.keys import StepKey
    from gitledger.protocol import ActionResult, StepRunner
repo_path, size, reps, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(tag)
checks = [LedgerCheck()]
out = {"skip": [], "fresh": []}
with GitRepo.discover(repo_path) as repo:
    runner = StepRunner(GitStore(repo))
    noop = lambda: ActionResult(ok=True)
    runner.run(StepKey.derive("warm-" + tag, "s"), checks, noop)
    for i in range(reps):
        step = StepKey.derive(f"entry-{rng.randrange(size)}", "step")
        t = time.perf_counter(); r = runner.run(step, checks, noop)
        out["skip"].append(time.perf_counter() - t)
        assert r.status == "skipped", r
        step = StepKey.derive(f"ab-{tag}-{i}", "fresh")
        t = time.perf_counter(); r = runner.run(step, checks, noop)
        out["fresh"].append(time.perf_counter() - t)
        assert r.status == "created", r
print(json.dumps(out))
"""


def export(rev: str, dest: Path) -> Path:
    """``gitledger/`` of ``rev`` into ``dest`` (compiled), leaving the repository untouched."""
    data = subprocess.run(
        ["git", "archive", "--format=tar", rev, "gitledger"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    import compileall

    compileall.compile_dir(str(dest / "gitledger"), quiet=1)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=100, help="in-process steps per child")
    args = parser.parse_args(argv)
    use_isolated_git()
    work = Path(tempfile.mkdtemp(prefix="gitledger-ab-"))
    try:
        compare(args, work)
    finally:  # two exports and two copies of the ledgers (~200 MB at 100 000 entries)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def compare(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The interleaved rounds in ``work``; prints the table and returns its figures."""
    trees = {"A": export(args.before, work / "A"), "B": export(args.after, work / "B")}
    built = init_repo(work / "ledger")
    build_git(built, make_steps(args.size))
    launcher = work / "gitledger"
    launcher.write_text(f"#!{PY}\nimport sys\nfrom gitledger.cli import main\nsys.exit(main())\n")
    launcher.chmod(0o755)
    built_small = init_repo(work / "small")
    build_git(built_small, make_steps(1000))
    ledgers = {name: shutil.copytree(built, work / f"ledger-{name}", symlinks=True) for name in trees}
    smalls = {name: shutil.copytree(built_small, work / f"small-{name}", symlinks=True) for name in trees}
    envs = {name: bench_env({"PYTHONPATH": str(tree)}) for name, tree in trees.items()}
    done = [str(launcher), "run-step", "--task", "bench", "--step", "done", "--", "true"]
    for name, env in envs.items():
        subprocess.run(done, cwd=smalls[name], env=env, check=True, capture_output=True)
    samples: dict[str, dict[str, list[float]]] = {
        n: {"floor": [], "skip": [], "fresh": [], "in_skip": [], "in_fresh": []} for n in trees
    }

    cpu: dict[str, dict[str, list[float]]] = {n: {"floor": [], "skip": [], "fresh": []} for n in trees}

    def timed(argv: list[str], env: dict[str, str], cwd: Path, cpu_into: list[float] | None = None) -> float:
        """Wall time of one process; its CPU time (user + sys, less sensitive to load) into cpu_into."""
        proc, elapsed, cpu = timed_process(argv, cwd=cwd, env=env)
        proc.check_returncode()
        if cpu_into is not None:
            cpu_into.append(cpu)
        return elapsed

    for rnd in range(args.rounds):
        for name in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
            env = envs[name]
            c = cpu[name]
            floor_cpu: list[float] = []
            small = smalls[name]
            floor = timed([PY, "-c", "pass"], env, small, floor_cpu)
            floor += timed(["git", "rev-parse", "--git-dir"], env, small, floor_cpu)
            c["floor"].append(sum(floor_cpu))
            samples[name]["floor"].append(floor)
            samples[name]["skip"].append(timed(done, env, small, c["skip"]))
            fresh = [str(launcher), "run-step", "--task", f"ab-{name}-{rnd}", "--step", "s", "--", "true"]
            samples[name]["fresh"].append(timed(fresh, env, small, c["fresh"]))
            child = subprocess.run(
                [PY, "-c", CHILD, str(ledgers[name]), str(args.size), str(args.reps), f"{name}{rnd}"],
                env=env,
                cwd=work,  # not this checkout: '' comes first on sys.path with -c
                capture_output=True,
                text=True,
                check=True,
            )
            got = json.loads(child.stdout)
            # not timed; a revision before the journal has no 'flush' (and folds nothing)
            subprocess.run([str(launcher), "flush"], cwd=ledgers[name], env=env, capture_output=True)
            samples[name]["in_skip"] += got["skip"]
            samples[name]["in_fresh"] += got["fresh"]
    result: dict[str, Any] = {"before": args.before, "after": args.after, "rounds": args.rounds}
    print(f"A = {args.before}, B = {args.after}; {args.rounds} interleaved rounds, ledger {args.size:,}")
    print(f"{'metric':<10} {'A median':>10} {'B median':>10} {'A p90':>9} {'B p90':>9} {'B/A':>6}  (ms)")
    for metric in ("floor", "skip", "fresh", "in_skip", "in_fresh"):
        a, b = summarize(samples["A"][metric]), summarize(samples["B"][metric])
        result[metric] = {"A": a, "B": b, "ratio": b["median"] / a["median"]}
        digits = 3 if metric.startswith("in_") else 1
        print(
            f"{metric:<10} {a['median']:>10.{digits}f} {b['median']:>10.{digits}f} {a['p90']:>9.{digits}f} "
            f"{b['p90']:>9.{digits}f} {b['median'] / a['median']:>6.2f}"
        )
    for metric in ("floor", "skip", "fresh"):
        a, b = summarize(cpu["A"][metric]), summarize(cpu["B"][metric])
        result[f"cpu_{metric}"] = {"A": a, "B": b, "ratio": b["median"] / a["median"]}
        print(
            f"{'cpu_' + metric:<10} {a['median']:>10.1f} {b['median']:>10.1f} {a['p90']:>9.1f} "
            f"{b['p90']:>9.1f} {b['median'] / a['median']:>6.2f}"
        )
    for name in ("A", "B"):
        floor = summarize(samples[name]["floor"])["median"]
        print(f"{name}: skip = {summarize(samples[name]['skip'])['median'] / floor:.2f}x floor")
    return result


if __name__ == "__main__":
    sys.exit(main())
