"""The crash matrix: every check kind x every crash point, with real processes and real effects.

For each case: run ``gitledger run-step`` with ``GITLEDGER_FAULT=<point>`` (the process SIGKILLs itself
there), count the effect in reality, rerun, and check that the effect exists exactly once and that no
ledger event was lost. Where only the ledger can know (``ledger``), the crash leaves the step
``unconfirmed``; a person then settles it (``resolve --done`` when the effect is there, ``--forget``
when it is not) and the rerun completes it: exactly once again.

``during-effect`` is run twice: ``during-effect`` makes the command wait for a file the test creates
only for the rerun, so the crash deterministically precedes the effect; ``during-effect-racy`` lets the
command go at once, so the effect may or may not have happened (0 or 1 before the rerun, exactly 1
after).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from gitledger.core.crashpoints import POINTS
from tests.faults.audit import audit
from tests.faults.effects import LOCAL_KINDS, wait_for_no_process_with
from tests.faults.harness import KINDS, Workbench
from tests.faults.tally import TALLY

VARIANTS = [*POINTS, "during-effect-racy"]
GITHUB_KINDS = [k for k, v in KINDS.items() if v.github]

# effects that must exist right after the crash, per point (None: either 0 or 1)
EFFECTS_AFTER_CRASH: dict[str, int | None] = {
    "before-claim": 0,
    "after-claim": 0,
    "fork-window": 0,  # the command notices that gitledger died before it could bind to it, and exits
    "during-effect": 0,
    "during-effect-racy": None,
    "after-effect": 1,
    "during-done": 1,
}


def kinds_param() -> list[Any]:
    return [*LOCAL_KINDS, *GITHUB_KINDS]


@pytest.fixture
def bench(request: pytest.FixtureRequest, tmp_path: Path) -> Workbench:
    kind = request.node.callspec.params["kind"]
    github = request.getfixturevalue("github") if KINDS[kind].github else None
    return Workbench(tmp_path, github)


@pytest.mark.parametrize("point", VARIANTS)
@pytest.mark.parametrize("kind", kinds_param())
def test_crash_then_rerun_gives_exactly_one_effect_and_loses_no_event(
    bench: Workbench, kind: str, point: str
) -> None:
    spec = KINDS[kind]
    fault = point.removesuffix("-racy")
    wait = point == "during-effect"
    if not wait:
        bench.go.touch()
    key = bench.step(kind).key

    crashed = bench.run_step(spec, fault=fault, wait=wait)
    assert crashed.returncode == -signal.SIGKILL, (crashed.returncode, crashed.stderr)
    TALLY.add("matrix.crashes")
    wait_for_no_process_with(bench.marker, bench.session)
    before = bench.effects(kind)
    expected_before = EFFECTS_AFTER_CRASH[point]
    if expected_before is None:
        assert before in (0, 1)
    else:
        assert before == expected_before

    mid = audit(bench.repo)
    mid.assert_clean()
    states = [e["state"] for e in mid.by_key().get(key, [])]
    assert states == ([] if fault == "before-claim" else ["attempting"]), states

    bench.go.touch()
    rerun = bench.run_step(spec)
    if spec.queryable or fault == "before-claim":
        expected = "created" if before == 0 else "already_existed"
        assert (rerun.returncode, rerun.status) == (0, expected), rerun.stderr
    else:
        # only the ledger knows: nothing can confirm it, so a person settles it after looking
        assert (rerun.returncode, rerun.status) == (3, "unconfirmed"), rerun.stderr
        reconcile = bench.gitledger("reconcile", "--json")
        assert {"key": key, "result": "unconfirmed", "ref": None} in reconcile.json_list()
        how = "--done" if before else "--forget"
        assert bench.gitledger("resolve", key, how).returncode == 0
        settled = bench.run_step(spec)
        assert settled.status == ("skipped" if before else "created"), settled.stderr

    assert bench.effects(kind) == 1
    again = bench.run_step(spec)
    assert (again.returncode, again.status) == (0, "skipped"), again.stderr
    effects = bench.effects(kind)
    assert effects == 1

    final = audit(bench.repo)
    final.assert_clean()
    lost = mid.ids - final.ids
    assert not lost
    assert final.created_counts()[key] <= 1
    [entry] = bench.gitledger("list", "--json").json_list()
    assert (entry["state"], entry["duplicate"]) == ("done", False)

    TALLY.add("matrix.cases")
    TALLY.add("matrix.effects", effects)
    TALLY.add("matrix.duplicates", max(0, effects - 1))
    TALLY.add("matrix.events_lost", len(lost) + final.lost)
    TALLY.add("matrix.events", len(final.events))
