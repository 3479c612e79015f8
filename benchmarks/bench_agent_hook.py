"""Whole-process latency of ``gitledger agent-hook claude`` against ``python -c pass`` (one interleaved run).

Variants, one fresh process each per round, the order rotating:

- ``floor``: ``python -c pass``;
- ``unrecognised``: the hook on a PreToolUse of ``pytest -q && git status`` (no typer, no PyGithub, no
  git, no ledger read); target at most 2.5 times floor;
- ``known``: the hook on a reworded ``gh pr create`` whose task's PR the ledger records as done (the
  refusal needs no GitHub call); target ≤ ``skip``;
- ``skip``: ``gitledger run-step`` on a done key (the run-step fast path), for reference.

Usage: ``python -m benchmarks.bench_agent_hook [ROUNDS]``; prints medians (wall time, and CPU time of the
process and its git children) and the ratios as JSON.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import timed_process
from gitledger.cli.agent_hook import run
from testing.fakegithub import FakeGitHub
from tests.agent_support import agent_repo, bash

PY = sys.executable


def _time(argv: list[str], stdin: str, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one process (CPU: its own and its children's, from getrusage)."""
    proc, wall, cpu = timed_process(argv, cwd=cwd, env=env, input=stdin.encode())
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.decode(errors='replace')}")
    return wall, cpu


def main(rounds: int = 30) -> dict[str, object]:
    import io

    from github import Auth, Github

    tmp = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    server = FakeGitHub(tokens=["t"])
    server.add_repo("acme/widgets")
    server.start()
    try:
        workdir = agent_repo(tmp / "agent", server.bare_path("acme/widgets"), ["agent/T1"])
        env = {
            **os.environ,
            "GITHUB_TOKEN": "t",
            "GITHUB_API_URL": server.url,
            "GITLEDGER_TASK": "T1",
            "GITLEDGER_AGENT_PID": str(os.getpid()),
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ.update({k: env[k] for k in ("GITHUB_TOKEN", "GITHUB_API_URL", "GITLEDGER_TASK")})
        command = "gh pr create --head agent/T1 --base main --title 'Add paging' --body 'x'"
        out, err = io.StringIO(), io.StringIO()
        assert (
            run(["claude"], io.StringIO(json.dumps(bash("PreToolUse", command, workdir))), out, err, env) == 0
        )
        pr = (
            Github(auth=Auth.Token("t"), **server.pygithub_kwargs())
            .get_repo("acme/widgets")
            .create_pull(title="Add paging", body="x", head="agent/T1", base="main")
        )
        post = bash("PostToolUse", command, workdir)
        post["tool_response"] = {"stdout": pr.html_url + "\n"}
        assert run(["claude"], io.StringIO(json.dumps(post)), out, err, env) == 0
        subprocess.run(
            [PY, "-m", "gitledger", "run-step", "-t", "T1", "-s", "s", "--", "true"],
            cwd=workdir,
            env=env,
            capture_output=True,
            check=True,
        )
        server.stop()  # the measured calls must not need GitHub
        hook = [PY, "-m", "gitledger", "agent-hook", "claude"]
        reworded = json.dumps(bash("PreToolUse", "gh pr create --head agent/T1 --title 'Paginate'", workdir))
        variants = {
            "floor": ([PY, "-c", "pass"], ""),
            "unrecognised": (hook, json.dumps(bash("PreToolUse", "pytest -q && git status", workdir))),
            "known": (hook, reworded),
            "skip": ([PY, "-m", "gitledger", "run-step", "-t", "T1", "-s", "s", "--", "true"], ""),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        cpus: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for r in range(rounds + 2):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                argv, stdin = variants[name]
                elapsed, cpu = _time(argv, stdin, workdir, env)
                if r >= 2:  # warm-up rounds
                    times[name].append(elapsed)
                    cpus[name].append(cpu)
        med = {name: statistics.median(values) * 1000 for name, values in times.items()}
        cpu_med = {name: statistics.median(values) * 1000 for name, values in cpus.items()}
        result: dict[str, object] = {
            "rounds": rounds,
            "load_average": round(os.getloadavg()[0], 2),
            "median_ms": {k: round(v, 1) for k, v in med.items()},
            "median_cpu_ms": {k: round(v, 1) for k, v in cpu_med.items()},
            "unrecognised_over_floor": round(med["unrecognised"] / med["floor"], 2),
            "known_over_skip": round(med["known"] / med["skip"], 2),
            "cpu_unrecognised_over_floor": round(cpu_med["unrecognised"] / cpu_med["floor"], 2),
            "cpu_known_over_skip": round(cpu_med["known"] / cpu_med["skip"], 2),
        }
        return result
    finally:
        server.stop()


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30), indent=2))
