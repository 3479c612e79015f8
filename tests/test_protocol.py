"""The step state machine against the in-memory store: every branch of the protocol, in milliseconds."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitledger.core.checks import CallableCheck, LedgerCheck
from gitledger.core.errors import CheckError, CorruptLedgerError
from gitledger.core.events import ATTEMPTING, DONE, FORGOTTEN, fold
from gitledger.core.keys import Content, StepKey
from gitledger.core.owner import Owner
from gitledger.core.protocol import (
    ActionResult,
    Claim,
    PayloadMismatchError,
    StepPolicy,
    StepResult,
    StepRunner,
    iso,
)
from gitledger.core.store import ANY_VERSION, Intent, MemoryStore

STEP = StepKey.derive("T-1", "open-pr", Content.text("body"))


class Effects:
    """A fake external system: counts effects, answers existence queries."""

    def __init__(self) -> None:
        self.count = 0

    def act(self) -> ActionResult:
        self.count += 1
        return ActionResult(ok=True, ref=f"effect-{self.count}")

    def check(self) -> CallableCheck:
        return CallableCheck(lambda step: f"effect-{self.count}" if self.count else None, spec="fake")


def other_host(lease_until: str | None) -> dict[str, object]:
    owner = Owner("elsewhere", "b", 1, "1", "s").to_json()
    event: dict[str, object] = {"state": ATTEMPTING, "key": STEP.key, "owner": owner, "at": iso(0)}
    if lease_until is not None:
        event["lease_until"] = lease_until
    return event


def dead_local_claim() -> dict[str, object]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    here = Owner.current()
    owner = replace(here, pid=proc.pid, start="0", session="dead")
    return {"state": ATTEMPTING, "key": STEP.key, "owner": owner.to_json(), "lease_until": iso(2e9)}


def test_fresh_then_skipped():
    store, fx = MemoryStore(), Effects()
    runner = StepRunner(store)
    first = runner.run(STEP, [fx.check()], fx.act)
    second = runner.run(STEP, [fx.check()], fx.act)
    assert (first.status, first.ref) == ("created", "effect-1")
    assert (second.status, second.ref) == ("skipped", "effect-1")
    assert fx.count == 1


def test_reality_is_queried_before_the_first_action():
    store, fx = MemoryStore(), Effects()
    fx.count = 1  # the effect exists although the ledger is empty (fresh clone, lost ledger)
    result = StepRunner(store).run(STEP, [fx.check()], fx.act)
    assert result.status == "already_existed" and fx.count == 1
    assert store.load(STEP.key).folded.done["outcome"] == "already_existed"


def test_live_owner_elsewhere_holds_the_step():
    store, fx = MemoryStore(), Effects()
    store.append(Intent.of(STEP), other_host(iso(2e9)), None)
    result = StepRunner(store).run(STEP, [fx.check()], fx.act)
    assert result.status == "in_progress" and result.exit_code == 75 and fx.count == 0


def test_missing_deadline_means_locked_not_expired():
    store, fx = MemoryStore(), Effects()
    store.append(Intent.of(STEP), other_host(None), None)
    assert StepRunner(store).run(STEP, [fx.check()], fx.act).status == "in_progress"


def test_expired_lease_queries_reality_then_acts():
    store, fx = MemoryStore(), Effects()
    store.append(Intent.of(STEP), other_host(iso(1)), None)
    assert StepRunner(store).run(STEP, [fx.check()], fx.act).status == "created"
    assert fx.count == 1


def test_dead_local_owner_is_detected_at_once():
    store, fx = MemoryStore(), Effects()
    store.append(Intent.of(STEP), dead_local_claim(), None)
    fx.count = 1  # the dead owner did produce the effect
    result = StepRunner(store).run(STEP, [fx.check()], fx.act)
    assert result.status == "already_existed" and fx.count == 1


@pytest.mark.parametrize(
    "policy,status,effects", [("fail", "unconfirmed", 0), ("retry", "created", 1), ("skip", "skipped", 0)]
)
def test_unconfirmed_ledger_only_step_follows_policy(policy, status, effects):
    store, fx = MemoryStore(), Effects()
    store.append(Intent.of(STEP), dead_local_claim(), None)
    result = StepRunner(store).run(STEP, [LedgerCheck()], fx.act, StepPolicy(on_unconfirmed=policy))
    assert result.status == status and fx.count == effects
    if status == "unconfirmed":
        assert result.exit_code == 3 and "gitledger resolve" in (result.message or "")


def test_failure_is_recorded_and_retryable():
    store, fx = MemoryStore(), Effects()
    runner = StepRunner(store)
    failed = runner.run(STEP, [fx.check()], lambda: ActionResult(ok=False, exit_code=4, message="boom"))
    assert (failed.status, failed.exit_code) == ("failed", 4)
    assert store.load(STEP.key).folded.state == "failed"
    assert runner.run(STEP, [fx.check()], fx.act).status == "created"


def test_start_then_finish_is_run_split_in_two():
    """start() records the claim and hands the step over; finish()/fail() record the outcome."""
    store = MemoryStore()
    runner = StepRunner(store)
    claim = runner.start(STEP, [LedgerCheck()])
    assert isinstance(claim, Claim)
    assert store.load(STEP.key).folded.state == ATTEMPTING
    # a second owner on this host sees our live claim
    other = StepRunner(store).start(STEP, [LedgerCheck()])
    assert isinstance(other, StepResult) and other.status == "in_progress"
    runner.fail(claim, RuntimeError("first try"))
    assert store.load(STEP.key).folded.state == "failed"
    retry = runner.start(STEP, [LedgerCheck()])
    assert isinstance(retry, Claim)
    done = runner.finish(retry, ActionResult(ok=True, ref="r", result={"n": 1}))
    assert (done.status, done.ref, done.result) == ("created", "r", {"n": 1})
    skipped = runner.start(STEP, [LedgerCheck()])
    assert isinstance(skipped, StepResult)
    assert (skipped.status, skipped.ref, skipped.result) == ("skipped", "r", {"n": 1})


def test_check_error_does_not_act_and_explains():
    store = MemoryStore()

    def broken(step: StepKey) -> str | None:
        raise CheckError("GitHub is down")

    with pytest.raises(CheckError, match="nothing was done"):
        StepRunner(store).run(STEP, [CallableCheck(broken)], lambda: pytest.fail("must not act"))
    entry = store.load(STEP.key)
    assert [e["state"] for e in entry.events] == ["info"]
    assert entry.folded.state == "none"


def test_exception_in_action_is_recorded_as_failed():
    store = MemoryStore()

    def explode() -> ActionResult:
        raise RuntimeError("kaboom")

    with pytest.raises(RuntimeError):
        StepRunner(store).run(STEP, [LedgerCheck()], explode)
    assert store.load(STEP.key).folded.state == "failed"


def test_lost_race_redecides():
    """A writer that decided on a stale version must not act: CAS fails, it re-reads, sees done."""
    store, fx = MemoryStore(), Effects()

    class Racer(MemoryStore):
        raced = False

        def append(self, intent, event, expected):  # type: ignore[no-untyped-def]
            if not self.raced and event["state"] == ATTEMPTING:
                self.raced = True  # someone else finishes first
                super().append(intent, {"state": DONE, "outcome": "created", "ref": "theirs"}, ANY_VERSION)
            return super().append(intent, event, expected)

    store = Racer()
    result = StepRunner(store).run(STEP, [LedgerCheck()], fx.act)
    assert (result.status, result.ref, fx.count) == ("skipped", "theirs", 0)


def test_fold_rules():
    created = {"state": DONE, "outcome": "created"}
    assert fold([created, {"state": ATTEMPTING}]).state == DONE  # done wins over a merged claim
    assert fold([created, {"state": FORGOTTEN}]).state == "none"
    assert fold([created, {"state": FORGOTTEN}, {"state": ATTEMPTING}]).state == ATTEMPTING
    assert fold([created, dict(created)]).duplicate
    assert not fold([created, {"state": FORGOTTEN}, dict(created)]).duplicate


def test_corrupt_entry_is_an_error_for_that_key_only():
    store, fx = MemoryStore(), Effects()
    other = StepKey.derive("T-2", "x")
    store.corrupt(STEP.key, b"{not json\n")
    with pytest.raises(CorruptLedgerError, match="corrupt"):
        StepRunner(store).run(STEP, [LedgerCheck()], fx.act)
    assert StepRunner(store).run(other, [LedgerCheck()], fx.act).status == "created"
    # a person's resolution supersedes the bad line; the line itself is kept
    store.append(Intent.of(STEP), {"state": FORGOTTEN}, ANY_VERSION)
    assert StepRunner(store).run(STEP, [LedgerCheck()], fx.act).status == "created"
    assert len(store.load(STEP.key).bad_lines) == 1


def test_payload_mismatch():
    store, fx = MemoryStore(), Effects()
    StepRunner(store).run(STEP, [LedgerCheck()], fx.act, fingerprint="a")
    with pytest.raises(PayloadMismatchError):
        StepRunner(store).run(STEP, [LedgerCheck()], fx.act, fingerprint="b")


def test_core_imports_no_adapters():
    """Every core module imported at run time loads no adapter and no outside library (import-linter
    checks the same statically in .ci/run, imports inside functions included)."""
    code = (
        "import sys, pkgutil, importlib, gitledger.core;"
        "[importlib.import_module('gitledger.core.' + m.name)"
        " for m in pkgutil.iter_modules(gitledger.core.__path__)];"
        "bad = {'typer', 'github', 'yaml', 'urllib3', 'requests'} & set(sys.modules);"
        "bad |= {m for m in sys.modules if m.startswith('gitledger.') and not m.startswith('gitledger.core')"
        " and m != 'gitledger._version'};"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@settings(max_examples=3000, deadline=None)
@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False, allow_infinity=False))
def test_iso_is_datetimes_format_exactly(ts: float) -> None:
    from datetime import UTC, datetime

    from gitledger.core.protocol import iso

    expected = datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert iso(ts) == expected


def test_iso_formats_each_second_anew() -> None:
    """iso() keeps the text of the last second it formatted: a time in another second is never
    given it, going forwards or back."""
    from gitledger.core.protocol import iso

    times = [1e9, 1e9 + 0.25, 1e9 + 0.9999996, 1e9 + 1.5, 1e9 - 0.5, 1e9 + 0.5, 1.7e9]
    assert [iso(t) for t in times] == [
        "2001-09-09T01:46:40.000Z",
        "2001-09-09T01:46:40.250Z",
        "2001-09-09T01:46:41.000Z",
        "2001-09-09T01:46:41.500Z",
        "2001-09-09T01:46:39.500Z",
        "2001-09-09T01:46:40.500Z",
        "2023-11-14T22:13:20.000Z",
    ]
