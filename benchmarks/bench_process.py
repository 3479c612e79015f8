"""Whole-process ``gitledger run-step`` latency against this machine's floor.

Variants, measured interleaved (one of each per round, the order rotating), each a fresh process:

- ``python``: ``python -c pass`` (the issue-14 reference: the fast path within 4x);
- ``floor``: ``python -c pass`` followed by one ``git rev-parse`` (what any Python tool over git pays);
- ``skip``: ``gitledger run-step`` on a done key (the fast path, no typer);
- ``skip_typer``: the same call with ``GITLEDGER_NO_FASTPATH=1`` (the full typer command), for reference;
- ``fresh``: ``gitledger run-step ... -- true`` on a new key (claim, run ``true``, done), typer-free
  too since issue 14 (target: within 1.3x of ``skip``).

Each sample records wall time and CPU time (user + system of the process and its children, from
``getrusage``), which other jobs on shared cores disturb far less than wall time.

``gitledger`` is started through a launcher equal to the console script pip writes
(``from gitledger.cli import main; sys.exit(main())``) with this checkout first on ``PYTHONPATH``.
Bytecode is compiled first and ``PYTHONDONTWRITEBYTECODE`` is unset for the measured processes, so
the figures are those of an installed gitledger, not of a recompile on every start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmarks.build import build_git, make_steps
from benchmarks.common import PY, bench_env, compile_bytecode, init_repo, log, summarize, timed_process

LAUNCHER = """\
import sys
from gitledger.cli import main
if __name__ == "__main__":
    sys.exit(main())
"""

VARIANTS = ("python", "floor", "skip", "skip_typer", "fresh")


def write_launcher(folder: Path) -> Path:
    """A ``gitledger`` script like the one ``pip install`` puts on PATH, for this interpreter."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gitledger"
    path.write_text(f"#!{PY}\n{LAUNCHER}")
    path.chmod(0o755)
    return path


def _run(argv: list[str], cwd: Path, env: dict[str, str], expect: int = 0) -> tuple[float, float]:
    """(wall, CPU) seconds of one process and its children."""
    proc, wall, cpu = timed_process(argv, cwd=cwd, env=env)
    if proc.returncode != expect:
        raise RuntimeError(
            f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}"
        )
    return wall, cpu


def prepare(workdir: Path, ledger_size: int) -> tuple[Path, Path, dict[str, str]]:
    """A repository with a ledger of ``ledger_size`` entries plus one done key; the launcher; the env."""
    compiled = compile_bytecode()
    if not compiled:
        log("warning: some modules did not compile to bytecode")
    repo = init_repo(workdir / "repo")
    if ledger_size:
        build_git(repo, make_steps(ledger_size))
    launcher = write_launcher(workdir / "bin")
    env = bench_env()
    _run([str(launcher), "run-step", "--task", "bench", "--step", "done", "--", "true"], repo, env)
    return repo, launcher, env


def argv_for(variant: str, launcher: Path, counter: int) -> tuple[list[list[str]], dict[str, str]]:
    """The processes one sample of ``variant`` runs (in order), and extra environment."""
    if variant == "python":
        return [[PY, "-c", "pass"]], {}
    if variant == "floor":
        return [[PY, "-c", "pass"], ["git", "rev-parse", "--git-dir"]], {}
    done = [str(launcher), "run-step", "--task", "bench", "--step", "done", "--", "true"]
    if variant == "skip":
        return [done], {}
    if variant == "skip_typer":
        return [done], {"GITLEDGER_NO_FASTPATH": "1"}
    if variant == "fresh":
        return [[str(launcher), "run-step", "--task", f"fresh-{counter}", "--step", "s", "--", "true"]], {}
    raise ValueError(variant)


def run(workdir: Path, runs: int = 40, ledger_size: int = 1000, warmup: int = 2) -> dict[str, Any]:
    """Median and p90 of every variant over ``runs`` interleaved rounds."""
    repo, launcher, env = prepare(workdir, ledger_size)
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    counter = 0
    for rnd in range(warmup + runs):
        order = VARIANTS[rnd % len(VARIANTS) :] + VARIANTS[: rnd % len(VARIANTS)]
        for variant in order:
            counter += 1
            argvs, extra = argv_for(variant, launcher, counter)
            run_env = {**env, **extra}
            times = [_run(argv, repo, run_env) for argv in argvs]
            if rnd >= warmup:
                samples[variant].append(sum(t[0] for t in times))
                cpu[variant].append(sum(t[1] for t in times))
    stats = {v: summarize(s) for v, s in samples.items()}
    floor = stats["floor"]["median"]
    for v in VARIANTS:
        stats[v]["x_floor"] = stats[v]["median"] / floor if floor else float("nan")
        stats[v]["cpu_median"] = summarize(cpu[v])["median"]
    ratios = {
        "skip_over_python": stats["skip"]["median"] / stats["python"]["median"],
        "fresh_over_skip": stats["fresh"]["median"] / stats["skip"]["median"],
        "cpu_skip_over_python": stats["skip"]["cpu_median"] / stats["python"]["cpu_median"],
        "cpu_fresh_over_skip": stats["fresh"]["cpu_median"] / stats["skip"]["cpu_median"],
    }
    log(
        "process: "
        + ", ".join(f"{v} {stats[v]['median']:.1f} ms (p90 {stats[v]['p90']:.1f})" for v in VARIANTS)
    )
    return {
        "runs": runs,
        "warmup": warmup,
        "ledger_size": ledger_size,
        "launcher": "console-script equivalent: from gitledger.cli import main; sys.exit(main())",
        "bytecode": "compiled (compileall) before measuring; PYTHONDONTWRITEBYTECODE unset for children",
        "load_average": os.getloadavg()[0],
        "results": stats,
        "ratios": ratios,
    }


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-process-") as tmp:
        rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
        print(json.dumps(run(Path(tmp), runs=rounds), indent=2, default=float))
