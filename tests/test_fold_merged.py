"""Folding merged histories (several clones' events in one entry) and the Arbiter hook of the protocol.

Pure: in-memory store, no git. The git side of merging is in test_sync.py.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest

from gitledger.core.checks import LedgerCheck
from gitledger.core.errors import GitledgerError
from gitledger.core.events import ATTEMPTING, DONE, FAILED, NONE, Entry, Event, fold
from gitledger.core.keys import Content, StepKey
from gitledger.core.owner import Owner
from gitledger.core.protocol import (
    CREATED,
    IN_PROGRESS,
    SKIPPED,
    ActionResult,
    StepRunner,
    Verdict,
)
from gitledger.core.store import ANY_VERSION, Intent, MemoryStore

STEP = StepKey.derive("T-1", "open-pr", Content.text("x"))
LIVE = Owner("host-a", "boot", os.getpid(), None, "live-session").to_json()
ELSEWHERE = {"host": "other-host", "boot": "b", "pid": 1, "start": None, "session": "s2"}


def ev(ident: str, state: str, owner: dict[str, Any] | None = None, **fields: Any) -> Event:
    return {"id": ident, "state": state, "owner": owner or ELSEWHERE, "at": "2024-01-01T00:00:00Z", **fields}


def claim(ident: str, **fields: Any) -> Event:
    return ev(ident, ATTEMPTING, lease_until="2999-01-01T00:00:00Z", supersedes=[], **fields)


def numbered(events: list[Event]) -> list[Event]:
    return [{**e, "_line": i} for i, e in enumerate(events, start=1)]


def all_orders(events: list[Event]) -> list[list[Event]]:
    return [numbered(list(p)) for p in itertools.permutations(events)]


# -- fold ------------------------------------------------------------------------------------------


def test_both_clones_claimed_one_finished_is_done_in_any_order() -> None:
    events = [claim("a"), claim("b"), ev("d", DONE, outcome=CREATED, ref="pr/1", claim="a")]
    for order in all_orders(events):
        folded = fold(order)
        assert folded.state == DONE
        assert folded.ref == "pr/1"
        assert not folded.duplicate


def test_two_created_outcomes_are_a_duplicate_in_any_order() -> None:
    events = [
        claim("a"),
        claim("b"),
        ev("da", DONE, outcome=CREATED, ref="pr/1", claim="a"),
        ev("db", DONE, outcome=CREATED, ref="pr/2", claim="b"),
    ]
    for order in all_orders(events):
        folded = fold(order)
        assert folded.state == DONE
        assert folded.duplicate
        assert folded.created == 2
        # the entry summary never hides it
        assert Entry(STEP.key, order, "v").summary()["duplicate"] is True


def test_concurrent_claims_from_two_clones_stay_open_together() -> None:
    for order in all_orders([claim("a"), claim("b")]):
        folded = fold(order)
        assert folded.state == ATTEMPTING
        assert sorted(c["id"] for c in folded.claims) == ["a", "b"]


def test_withdrawal_closes_only_its_own_claim_and_is_not_a_failure() -> None:
    events = [claim("a"), claim("b"), ev("w", FAILED, claim="b", withdrawn=True)]
    for order in all_orders(events):
        folded = fold(order)
        assert folded.state == ATTEMPTING
        assert [c["id"] for c in folded.claims] == ["a"]
    assert fold(numbered([claim("b"), ev("w", FAILED, claim="b", withdrawn=True)])).state == NONE


def test_failure_of_one_claim_leaves_the_other_open() -> None:
    events = [claim("a"), claim("b"), ev("f", FAILED, claim="a", exit_code=1)]
    for order in all_orders(events):
        folded = fold(order)
        assert folded.state == ATTEMPTING
        assert [c["id"] for c in folded.claims] == ["b"]
    assert fold(numbered([claim("a"), ev("f", FAILED, claim="a")])).state == FAILED


def test_takeover_closes_exactly_the_superseded_claims() -> None:
    events = [claim("a"), claim("b"), ev("c", ATTEMPTING, supersedes=["a"])]
    assert sorted(c["id"] for c in fold(numbered(events)).claims) == ["b", "c"]


def test_events_without_claim_fields_keep_the_single_clone_meaning() -> None:
    legacy = [
        {"id": "a", "state": ATTEMPTING, "owner": ELSEWHERE},
        {"id": "f", "state": FAILED, "owner": ELSEWHERE},
        {"id": "b", "state": ATTEMPTING, "owner": ELSEWHERE},
    ]
    folded = fold(numbered(legacy))
    assert folded.state == ATTEMPTING and [c["id"] for c in folded.claims] == ["b"]
    assert fold(numbered(legacy[:2])).state == FAILED


# -- the Arbiter hook ------------------------------------------------------------------------------


class FakeArbiter:
    """Scripted arbiter: answers from a list; may inject a rival's events before answering."""

    def __init__(self, store: MemoryStore, answers: list[Verdict | Exception], rival: list[Event]) -> None:
        self.store = store
        self.answers = answers
        self.rival = rival
        self.calls: list[tuple[str | None, str]] = []
        self.published = 0

    def confirm(self, intent: Intent, seen: Entry, claim: Event) -> Verdict:
        self.calls.append((seen.version, claim["id"]))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if not answer.stands:
            for event in self.rival:
                self.store.append(intent, event, ANY_VERSION)
        return answer

    def publish(self) -> str | None:
        self.published += 1
        return "could not push"


def acting(acted: list[int]) -> ActionResult:
    acted.append(1)
    return ActionResult(ok=True, ref="r")


def runner_with(answers: list[Verdict | Exception], rival: list[Event]) -> tuple[StepRunner, FakeArbiter]:
    store = MemoryStore()
    arbiter = FakeArbiter(store, answers, rival)
    return StepRunner(store, arbiter=arbiter), arbiter


def test_a_claim_that_stands_acts_and_publishes_the_outcome() -> None:
    runner, arbiter = runner_with([Verdict(True, "offline")], [])
    acted: list[int] = []
    result = runner.run(STEP, [LedgerCheck()], lambda: acting(acted))
    assert result.status == CREATED and acted == [1]
    assert arbiter.published == 1
    assert result.to_json()["warnings"] == ["offline", "could not push"]
    entry = runner.store.load(Intent.of(STEP))
    done = entry.folded.done
    assert done is not None and done["claim"] == arbiter.calls[0][1]
    assert arbiter.calls[0][0] is None  # the decision was made on the empty entry


def test_a_beaten_claim_is_withdrawn_and_the_step_decided_again() -> None:
    winner = {**claim("w"), "owner": LIVE}
    runner, _ = runner_with([Verdict(False)], [winner])
    acted: list[int] = []
    result = runner.run(STEP, [LedgerCheck()], lambda: acting(acted))
    assert result.status == IN_PROGRESS and acted == []
    events = runner.store.load(Intent.of(STEP)).events
    ours = next(e for e in events if e["state"] == ATTEMPTING and e["id"] != "w")
    assert any(e.get("withdrawn") and e.get("claim") == ours["id"] for e in events)


def test_beaten_by_a_finished_winner_is_skipped() -> None:
    rival = [claim("w"), ev("d", DONE, outcome=CREATED, ref="pr/9", claim="w")]
    runner, _ = runner_with([Verdict(False)], rival)
    result = runner.run(STEP, [LedgerCheck()], lambda: ActionResult(ok=True))
    assert result.status == SKIPPED and result.ref == "pr/9"


def test_an_arbiter_error_withdraws_the_claim_and_fails_closed() -> None:
    runner, _ = runner_with([GitledgerError("cannot reach remote 'origin'")], [])
    acted: list[int] = []
    with pytest.raises(GitledgerError, match="cannot reach"):
        runner.run(STEP, [LedgerCheck()], lambda: acting(acted))
    assert acted == []
    folded = runner.store.load(Intent.of(STEP)).folded
    assert folded.state == NONE and folded.claims == []
