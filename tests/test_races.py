"""Real processes racing on one ledger: exactly one acts, no event is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testing.repos import gitledger_argv, run_json

WORKERS = 8


def start_all(
    argvs: list[list[str]], cwd: Path, env: dict[str, str]
) -> list[subprocess.CompletedProcess[str]]:
    """Start every process before waiting for any, behind a shared start file to line them up."""
    go = cwd.parent / "go"
    full_env = {**os.environ, **env, "GO_FILE": str(go)}
    procs = [
        subprocess.Popen(a, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for a in argvs
    ]
    go.write_text("go")
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results


@pytest.mark.parametrize("check", ["ledger", "file:effect.txt"])
def test_same_step_in_parallel_acts_once(repo: Path, tmp_path: Path, check: str):
    count = tmp_path / "count"
    script = (
        'while [ ! -e "$GO_FILE" ]; do sleep 0.01; done; '
        'echo x >> "$COUNT"; echo made > effect.txt; sleep 0.5'
    )
    argv = gitledger_argv(
        "run-step", "-t", "race", "-s", "one", "-c", check, "--json", "--", "sh", "-c", script
    )
    # the command waits for GO_FILE, so every gitledger has decided before the winner's effect exists
    results = start_all([argv] * WORKERS, repo, {"COUNT": str(count)})
    statuses = sorted(json.loads(r.stdout)["status"] for r in results)
    assert count.read_text().count("x") == 1, statuses
    assert statuses.count("created") == 1
    assert set(statuses) <= {"created", "in_progress", "skipped", "already_existed"}
    assert all(r.returncode in (0, 75) for r in results), [r.stderr for r in results]
    entry = run_json("list", cwd=repo)[0]
    assert entry["state"] == "done" and not entry["duplicate"]


DRIVER = textwrap.dedent(
    """
    import os, sys, time
    from gitledger.git.repo import GitRepo
    from gitledger.git.store import GitStore
    from gitledger.core.checks import LedgerCheck
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import ActionResult, StepRunner
    while not os.path.exists(os.environ["GO_FILE"]):
        time.sleep(0.005)
    worker = sys.argv[1]
    with GitRepo.discover(".") as repo:
        runner = StepRunner(GitStore(repo))
        for i in range(int(sys.argv[2])):
            step = StepKey.derive(f"w{worker}", f"k{i}")
            result = runner.run(step, [LedgerCheck()], lambda: ActionResult(ok=True, ref=f"{worker}-{i}"))
            assert result.status == "created", result
    """
)


def test_many_processes_many_keys_lose_nothing(repo: Path):
    keys = 50
    argvs = [[sys.executable, "-c", DRIVER, str(w), str(keys)] for w in range(WORKERS)]
    results = start_all(argvs, repo, {})
    assert all(r.returncode == 0 for r in results), [r.stderr[-500:] for r in results]
    listed = run_json("list", cwd=repo)
    assert len(listed) == WORKERS * keys
    assert all(e["state"] == "done" and e["events"] == 2 for e in listed)
