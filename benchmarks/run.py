"""Run every gitledger benchmark and write report.md, report.json and the overhead plot.

    python benchmarks/run.py [--quick] [--out benchmarks/results] [--only overhead,process,...]

``--quick`` (under ~3 minutes) uses smaller ledgers and fewer repeats; the default (full) mode is the
one the committed ``benchmarks/REPORT.md`` comes from. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import (  # noqa: E402  (the checkout must be importable first)
    bench_concurrency,
    bench_overhead,
    bench_process,
    bench_profile,
    bench_store,
    plot,
    report,
)
from benchmarks.common import PY, bench_env, isolated_home, log, machine, use_isolated_git  # noqa: E402

SECTIONS = ("overhead", "process", "concurrency", "sync", "audit", "profile", "store")

CONFIGS: dict[str, dict[str, Any]] = {
    "full": {
        "overhead": {"sizes": [100, 1_000, 10_000, 100_000], "reps": 300, "min_reps": 8, "budget_s": 6.0},
        "process": {"runs": 40, "ledger_size": 1_000},
        "concurrency": {"processes": [1, 2, 4, 8], "steps": 100},
        "profile": {"size": 10_000, "reps": 300, "import_runs": 15},
        "sync": {"sizes": [1_000, 10_000]},
        "audit": {"runs": 10, "prs": 300},
        "store": {
            "baseline": bench_store.BASELINE,
            "large": 100_000,
            "rounds": 5,  # in process: the spread of a round drifts with the disk (0.99 to 1.37x in three)
            "reps": 100,
            "writer_seconds": 3.0,
            "writer_base": 10_000,
            "writer_rounds": 3,
            "growth_steps": 3_072,  # three folds of 2 048 events: one would flatter the as-written bytes
            "growth_base": 10_000,
            "sustained_steps": 2_048,  # 4 096 events: two folds, the second at the last step
            "sustained_rounds": 3,
        },
    },
    "quick": {
        "overhead": {"sizes": [100, 1_000, 10_000], "reps": 60, "min_reps": 4, "budget_s": 1.0},
        "process": {"runs": 10, "ledger_size": 1_000},
        "concurrency": {"processes": [1, 2, 4], "steps": 10},
        "profile": {"size": 1_000, "reps": 50, "import_runs": 5},
        "sync": {"sizes": [1_000]},
        "audit": {"runs": 3, "prs": 50},
        "store": {
            "baseline": "",
            "large": 10_000,
            "rounds": 2,
            "reps": 50,
            "writer_seconds": 0.5,
            "writer_base": 1_000,
            "growth_steps": 300,
            "growth_base": 10_000,
            "sustained_steps": 300,
            "sustained_rounds": 1,
        },
    },
    # the smallest configuration of everything: what tests/test_benchmarks_smoke.py runs
    "smoke": {
        "overhead": {"sizes": [20, 50], "reps": 3, "min_reps": 2, "budget_s": 0.2},
        "process": {"runs": 1, "ledger_size": 10},
        "concurrency": {"processes": [1, 2], "steps": 2},
        "profile": {"size": 20, "reps": 3, "import_runs": 1},
        "sync": {"sizes": [50]},
        "audit": {"runs": 1, "prs": 5},
        "store": {
            "baseline": "",
            "large": 200,
            "rounds": 1,
            "reps": 3,
            "writer_counts": [1, 2],
            "writer_seconds": 0.2,
            "writer_base": 20,
            "growth_steps": 5,
            "growth_base": 50,
            "sustained_steps": 5,
            "sustained_rounds": 1,
        },
    },
}


def _call_with_known(func: Any, **kwargs: Any) -> Any:
    """Call ``func`` with the keyword arguments it declares (hooks written on other branches)."""
    params = inspect.signature(func).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return func(**kwargs)
    return func(**{k: v for k, v in kwargs.items() if k in params})


def run_sync(workdir: Path, sizes: list[int]) -> dict[str, Any]:
    """Hook: ``benchmarks/bench_sync.py`` (branch ``sync``) when it has landed; its ``run()`` rows."""
    if not (ROOT / "benchmarks" / "bench_sync.py").exists():
        return {
            "status": "pending",
            "note": "benchmarks/bench_sync.py is not on this branch yet (hook ready)",
        }
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved.get("PYTHONPATH")]))
    os.environ["HOME"] = str(isolated_home())
    try:
        module = importlib.import_module("benchmarks.bench_sync")
        func = getattr(module, "run", None)
        if func is None:
            return {"status": "error", "note": "benchmarks/bench_sync.py has no run()"}
        params = inspect.signature(func).parameters
        if "n" in params:  # run(n, shared_ratio) -> one row per size
            rows = [func(n, 0.1) if "shared_ratio" in params else func(n) for n in sizes]
        else:
            rows = [_call_with_known(func, workdir=workdir / "sync", sizes=sizes)]
    except Exception as exc:  # a hook into someone else's module must not lose the other results
        return {"status": "error", "note": f"{type(exc).__name__}: {exc}"}
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {
        "status": "measured",
        "note": "benchmarks/bench_sync.py run(n, 0.1): two diverged ledgers of n keys, 10% shared",
        "figures": rows,
    }


def run_audit(workdir: Path, runs: int, prs: int, source: Path = ROOT) -> dict[str, Any]:
    """Hook: time ``gitledger audit --json`` against the local fake GitHub when both exist.

    ``source`` is the checkout whose gitledger is measured (this one by default).
    """
    env = bench_env({"PYTHONPATH": str(source)})
    probe = subprocess.run(
        [PY, "-m", "gitledger", "audit", "--help"], cwd=workdir, env=env, capture_output=True, check=False
    )
    if probe.returncode != 0:
        return {"status": "pending", "note": "'gitledger audit' is not on this branch yet (hook ready)"}
    try:
        from testing.fakegithub import FakeGitHub
    except ImportError:
        return {"status": "pending", "note": "testing/fakegithub/ is missing: no local GitHub to audit"}
    from benchmarks.common import summarize

    repo, launcher, _ = bench_process.prepare(workdir / "audit", 1_000)
    samples = []
    last = None
    with FakeGitHub(tokens=["bench-token"]) as server:
        server.add_repo("acme/bench")
        server.seed_prs(prs, "acme/bench")
        run_env = {**env, "GITHUB_API_URL": server.url, "GITHUB_TOKEN": "bench-token"}
        argv = [str(launcher), "audit", "--github-repo", "acme/bench", "--json"]
        for _ in range(runs):
            start = time.perf_counter()
            last = subprocess.run(argv, cwd=repo, env=run_env, capture_output=True, text=True, check=False)
            samples.append(time.perf_counter() - start)
    assert last is not None
    return {
        "status": "measured" if last.returncode == 0 else "error",
        "note": (
            f"gitledger audit --json: ledger of 1,000 entries, {prs} PRs on the local fake GitHub; "
            f"exit {last.returncode} {last.stderr.strip()[-300:]}"
        ),
        "figures": {"ms": summarize(samples), "prs": prs, "ledger_entries": 1_000},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes and repeats (under ~3 minutes)")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results", help="report folder")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch folder (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch repositories")
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    config = CONFIGS[mode]
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    use_isolated_git()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gitledger-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    try:
        if "overhead" in only:
            results["overhead"] = bench_overhead.run(workdir / "overhead", **config["overhead"])
        if "process" in only:
            results["process"] = bench_process.run(workdir / "process", **config["process"])
        if "concurrency" in only:
            results["concurrency"] = bench_concurrency.run(workdir / "concurrency", **config["concurrency"])
        if "sync" in only:
            results["sync"] = run_sync(workdir, **config["sync"])
        if "audit" in only:
            results["audit"] = run_audit(workdir, **config["audit"])
        if "profile" in only:
            results["profile"] = bench_profile.run(workdir / "profile", out=out, **config["profile"])
        if "store" in only:
            results["store"] = bench_store.run(workdir / "store", **config["store"])
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    command = "python benchmarks/run.py" + (
        " --quick" if mode == "quick" else " --smoke" if mode == "smoke" else ""
    )
    results["meta"] = {
        "mode": mode,
        "command": command,
        "config": config,
        "duration_s": time.perf_counter() - started,
        "machine": machine(),
        "bytecode": (
            "gitledger is compiled with compileall before the whole-process runs and "
            "PYTHONDONTWRITEBYTECODE is unset for the measured processes (this environment sets it), so "
            "no measured process recompiles gitledger; in-process figures do not depend on it."
        ),
        "python": PY,
    }
    png = None
    if "overhead" in results:
        png = plot.plot_overhead(results["overhead"], out / "overhead.png")
        if png is None:
            log("matplotlib is not installed: no plot (pip install '.[bench]')")
    md, js = report.write(results, out, png)
    log(f"wrote {md}, {js}" + (f", {png}" if png else "") + f" in {results['meta']['duration_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
