"""git's housekeeping running in a loop beside 8 long-lived writers loses nothing (issue 16, items 4, 8a).

``git gc``, ``git gc --prune=now``, ``git repack -ad``, ``git maintenance run``, ``git notes prune`` and
``git pack-refs --all`` run one after the other, again and again, while 8 processes record steps through
one long-lived store each (the case where a long-lived ``git update-ref`` trusted a stale packed-refs).
The journal is folded every few events so that folds, and their ref updates, race the housekeeping.

Then: no writer failed or printed a traceback; every step it recorded is ``done`` in ``gitledger list``;
after a flush the notes hold exactly two events per step, none twice; ``git fsck`` finds no ref at a
missing object; and every value the notes ref ever had (its reflog) is on its first-parent chain, i.e.
no compare-and-swap was accepted against a stale value. Bounded: 20 s of writing (``GITLEDGER_STRESS=full``:
120 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from testing.repos import git, init_repo, run_gitledger
from tests.faults.audit import audit
from tests.faults.tally import TALLY, full_size

WRITER = """
import sys, time
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult, StepRunner
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore

repo, wid, until = sys.argv[1], sys.argv[2], float(sys.argv[3])
done = 0
with GitRepo.discover(repo) as r:
    runner = StepRunner(GitStore(r, "none"))
    while time.time() < until:
        step = StepKey.derive(f"w{wid}", f"s{done}")
        result = runner.run(step, [LedgerCheck()], lambda: ActionResult(ok=True))
        assert result.status == "created", result
        done += 1
print(done)
"""

HOUSEKEEPING = [
    ["gc", "-q"],
    ["gc", "--prune=now", "-q"],
    ["repack", "-ad", "-q"],
    ["maintenance", "run"],
    ["notes", "--ref=gitledger", "prune"],
    ["pack-refs", "--all"],
]
WRITERS = 8


def test_housekeeping_in_a_loop_beside_writers_loses_nothing(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    seconds = 120.0 if full_size() else 20.0
    until = time.time() + seconds
    env = {**os.environ, "GITLEDGER_FOLD_EVENTS": "6"}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(repo), str(w), str(until)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        for w in range(WRITERS)
    ]
    rounds = 0
    try:
        while any(w.poll() is None for w in writers) and time.time() < until + 60:
            for args in HOUSEKEEPING:
                subprocess.run(["git", *args], cwd=repo, capture_output=True, check=False, timeout=120)
            rounds += 1
    finally:
        outputs = [w.communicate(timeout=120) for w in writers]
    problems = [
        (w.returncode, err[-2000:]) for w, (_, err) in zip(writers, outputs, strict=True) if w.returncode
    ]
    assert not problems, problems
    assert not any("Traceback" in err for _, err in outputs)
    steps = {w: int(out) for w, (out, _) in enumerate(outputs)}
    total = sum(steps.values())
    assert total > 0 and rounds > 0
    TALLY.add("housekeeping.steps", total)
    TALLY.add("housekeeping.rounds", rounds)

    listed = json.loads(run_gitledger("list", "--json", cwd=repo).stdout)
    done = {(e["task"], e["step"]) for e in listed if e["state"] == "done"}
    assert done == {(f"w{w}", f"s{i}") for w, n in steps.items() for i in range(n)}
    assert run_gitledger("flush", cwd=repo).returncode == 0
    for args in HOUSEKEEPING:  # once more, with everything folded
        git(*args, cwd=repo)
    final = audit(repo)
    final.assert_clean()  # fsck: no ref at a missing object; no line twice; history append-only
    assert final.journal_events == 0 and len(final.events) == 2 * total
    chain = set(git("rev-list", "--first-parent", "refs/notes/gitledger", cwd=repo).split())
    logged = [line.split()[1] for line in (repo / ".git/logs/refs/notes/gitledger").read_text().splitlines()]
    assert logged and set(logged) <= chain  # no ref update accepted against a stale old value
    TALLY.add("housekeeping.events_lost", 2 * total - len(final.events))
