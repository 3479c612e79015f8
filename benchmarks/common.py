"""Shared helpers: statistics, timing loops, isolated git environments, machine facts."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def timed_process(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], input: bytes | None = None
) -> tuple[subprocess.CompletedProcess[bytes], float, float]:
    """Run one process to its end: (the result, wall seconds, CPU seconds). CPU is the user + system
    time of the process and its children (``getrusage``), which other jobs on shared cores disturb
    far less than wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=dict(env), input=input, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def summarize(samples: list[float], scale: float = 1000.0) -> dict[str, float | int]:
    """median / p90 / mean / min / max of ``samples`` (seconds), multiplied by ``scale`` (ms)."""
    if not samples:
        return {"n": 0, "median": float("nan"), "p90": float("nan"), "mean": float("nan")}
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median": statistics.median(ordered) * scale,
        "p90": percentile(ordered, 90) * scale,
        "mean": statistics.fmean(ordered) * scale,
        "min": ordered[0] * scale,
        "max": ordered[-1] * scale,
    }


def percentile(ordered: list[float], pct: float) -> float:
    """The ``pct`` percentile of sorted values by linear interpolation (numpy's default)."""
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * pct / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


_GITCONFIG = "[user]\n\tname = Bench\n\temail = bench@example.invalid\n[init]\n\tdefaultBranch = main\n"
_HOME: Path | None = None


def isolated_home() -> Path:
    """A HOME with a pinned git identity, so no user or system config changes what is measured."""
    global _HOME
    if _HOME is None:
        _HOME = Path(tempfile.mkdtemp(prefix="gitledger-bench-home-"))
        (_HOME / ".gitconfig").write_text(_GITCONFIG)
    return _HOME


def bench_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every measured child: this checkout first on the path, isolated git config.

    ``PYTHONDONTWRITEBYTECODE`` is removed: whole-process timings are taken with compiled bytecode
    (see :func:`compile_bytecode`), as after a normal ``pip install``.
    """
    home = isolated_home()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for var in ("GITLEDGER_NO_FASTPATH", "GITLEDGER_FAULT", "GITHUB_TOKEN", "GH_TOKEN", "GIT_DIR"):
        env.pop(var, None)
    env.update(
        {
            "HOME": str(home),
            "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    if extra:
        env.update(extra)
    return env


def use_isolated_git() -> None:
    """Point this process's own git children at the isolated config too."""
    home = isolated_home()
    os.environ["GIT_CONFIG_GLOBAL"] = str(home / ".gitconfig")
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ["GIT_TERMINAL_PROMPT"] = "0"


def compile_bytecode() -> bool:
    """Compile gitledger (and these benchmarks) to ``__pycache__``; True when every module compiled."""
    import compileall

    ok = compileall.compile_dir(str(ROOT / "gitledger"), quiet=1)
    return bool(ok)


def git(*args: str, cwd: Path, input: bytes | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, env=bench_env(), check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode().strip()


def init_repo(path: Path) -> Path:
    """A fresh repository with one commit, as an agent's checkout would be."""
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main", str(path), cwd=path)
    (path / "README").write_text("bench\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "initial", cwd=path)
    return path


def run_together(commands: list[list[str]], env: Mapping[str, str], cwd: Path, what: str) -> list[Any]:
    """Start every command at once (concurrent writers); the JSON each printed on its last line, in
    order. A command that fails raises RuntimeError with ``what`` and the end of its stderr."""
    procs = [
        subprocess.Popen(
            command, env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for command in commands
    ]
    got = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{what} failed: {err[-2000:]}")
        got.append(json.loads(out.strip().splitlines()[-1]))
    return got


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False)
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import sqlite3

    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "git": git_version.stdout.strip(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "loadavg_at_start": [round(x, 2) for x in load],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": _commit(),
    }


def _commit() -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "gitledger"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
