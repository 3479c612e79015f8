"""Where the time goes: in-process profiles of the skip and fresh paths, and import times.

- In process: ``StepRunner.run`` on done keys (skip) and on new keys (fresh) against a gitledger
  ledger, under cProfile (top functions by own and cumulative time, in the JSON report) and, when
  installed, pyinstrument (a call tree, written next to the report).
- Whole process: ``python -X importtime`` of ``gitledger run-step`` on a done key (the fast path),
  repeated; the median self and cumulative import time of each module, and the total.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.bench_process import prepare
from benchmarks.build import build_git, make_steps
from benchmarks.common import PY, init_repo, log
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult, StepRunner
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore

_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def _top(profile: cProfile.Profile, key: str, limit: int) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile)
    rows = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{_short(filename)}:{line}({func})",
                "calls": nc,
                "own_ms": tt * 1000,
                "cum_ms": ct * 1000,
            }
        )
    rows.sort(key=lambda r: r[key], reverse=True)
    return rows[:limit]


def _short(filename: str) -> str:
    for marker in ("/gitledger/", "/benchmarks/", "/lib/python3"):
        if marker in filename:
            return marker.strip("/") + "/" + filename.split(marker, 1)[1]
    return filename


def profile_in_process(workdir: Path, size: int, reps: int, out: Path | None) -> dict[str, Any]:
    repo_path = init_repo(workdir / "profile-repo")
    steps = make_steps(size)
    build_git(repo_path, steps)
    result: dict[str, Any] = {"ledger_size": size, "reps": reps}
    with GitRepo.discover(repo_path) as repo:
        runner = StepRunner(GitStore(repo))
        checks = [LedgerCheck()]

        def noop() -> ActionResult:
            return ActionResult(ok=True)

        runner.run(StepKey.derive("warm", "up"), checks, noop)
        workloads = {
            "skip": [steps[(i * 7919) % size] for i in range(reps)],
            "fresh": [StepKey.derive(f"profile-{i}", "fresh") for i in range(reps)],
        }
        for path, keys in workloads.items():
            profile = cProfile.Profile()
            profile.enable()
            for step in keys:
                runner.run(step, checks, noop)
            profile.disable()
            total = sum(row["own_ms"] for row in _top(profile, "own_ms", 10_000))
            result[path] = {
                "per_step_ms": total / reps,
                "top_own": _top(profile, "own_ms", 12),
                "top_cum": _top(profile, "cum_ms", 12),
            }
            if out is not None:
                text = io.StringIO()
                pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(30)
                (out / f"profile-{path}-cprofile.txt").write_text(text.getvalue())
                tree = _pyinstrument(runner, checks, noop, path, reps, size, steps)
                if tree is not None:
                    (out / f"profile-{path}-pyinstrument.txt").write_text(tree)
    return result


def _pyinstrument(
    runner: StepRunner,
    checks: list[LedgerCheck],
    noop: Any,
    path: str,
    reps: int,
    size: int,
    steps: list[StepKey],
) -> str | None:
    try:
        from pyinstrument import Profiler
    except ImportError:
        return None
    keys = (
        [steps[(i * 104729) % size] for i in range(reps)]
        if path == "skip"
        else [StepKey.derive(f"pyinstrument-{i}", "fresh") for i in range(reps)]
    )
    profiler = Profiler(interval=0.0002)
    profiler.start()
    for step in keys:
        runner.run(step, checks, noop)
    profiler.stop()
    return str(profiler.output_text(unicode=False, color=False, show_all=False))


def import_times(workdir: Path, runs: int, out: Path | None) -> dict[str, Any]:
    """Median ``-X importtime`` figures of a fast-path skip, per module (microseconds → ms)."""
    repo, launcher, env = prepare(workdir / "importtime", 0)
    self_us: dict[str, list[int]] = defaultdict(list)
    cum_us: dict[str, list[int]] = defaultdict(list)
    top_level: dict[str, list[int]] = defaultdict(list)
    totals = []
    raw = ""
    for _ in range(runs):
        proc = subprocess.run(
            [
                PY,
                "-X",
                "importtime",
                str(launcher),
                "run-step",
                "--task",
                "bench",
                "--step",
                "done",
                "--",
                "true",
            ],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        raw = proc.stderr
        total = 0
        for line in proc.stderr.splitlines():
            m = _IMPORT_LINE.match(line)
            if not m:
                continue
            own, cum, indent, name = int(m[1]), int(m[2]), len(m[3]), m[4]
            self_us[name].append(own)
            cum_us[name].append(cum)
            if indent == 1:
                top_level[name].append(cum)
                total += cum
        totals.append(total)
    if out is not None:
        (out / "importtime-skip.txt").write_text(raw)

    def med(values: list[int]) -> float:
        return statistics.median(values) / 1000.0

    gitledger_mods = sorted(
        ((name, med(v)) for name, v in cum_us.items() if name.startswith("gitledger")),
        key=lambda x: -x[1],
    )
    result = {
        "runs": runs,
        "total_import_ms": statistics.median(totals) / 1000.0,
        "top_self": [
            {"module": n, "self_ms": med(v)}
            for n, v in sorted(self_us.items(), key=lambda x: -med(x[1]))[:15]
        ],
        "top_level": [
            {"module": n, "cum_ms": med(v)}
            for n, v in sorted(top_level.items(), key=lambda x: -med(x[1]))[:15]
        ],
        "gitledger_cum": [{"module": n, "cum_ms": c} for n, c in gitledger_mods[:15]],
        "modules": len(self_us),
    }
    log(
        f"importtime: {result['total_import_ms']:.1f} ms of imports in a fast-path skip "
        f"({len(self_us)} modules)"
    )
    return result


def run(
    workdir: Path, size: int = 1000, reps: int = 200, import_runs: int = 9, out: Path | None = None
) -> dict[str, Any]:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    in_process = profile_in_process(workdir, size, reps, out)
    log(
        f"profile: skip {in_process['skip']['per_step_ms']:.3f} ms/step, "
        f"fresh {in_process['fresh']['per_step_ms']:.3f} ms/step under cProfile"
    )
    return {"in_process": in_process, "importtime": import_times(workdir, import_runs, out)}
