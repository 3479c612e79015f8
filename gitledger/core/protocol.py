"""The step protocol: find out what is already true, then do only what is missing.

For one step with key K and existence checks C::

    read ledger[K] ─┬─ done ─────────────────────────────► skipped (the recorded ref)
                    ├─ attempting, owner alive / lease valid ► in_progress (do not act)
                    ├─ attempting, owner dead / lease over ─┐ (ledger-only: unconfirmed → policy)
                    ├─ failed ──────────────────────────────┤
                    └─ none ────────────────────────────────┤
                                                            ▼
                  query reality with C ─┬─ found ─► done(already_existed, ref)
                                        └─ absent ► claim K (CAS) ► act ► done(created) | failed

Every ledger write is a compare-and-swap against the exact entry version the decision was made on;
whoever loses re-reads and decides again, so of N concurrent workers on one key exactly one acts. Only
the owner of a claim writes its outcome; an outcome is appended whatever happened to the entry in the
meantime, because it is a fact (and two ``created`` outcomes are reported as a duplicate).

Between clones, an optional :class:`Arbiter` decides (``remote`` claim mode): after the claim is
recorded locally and before acting, :meth:`Arbiter.confirm` must say that the claim stands (the
remote accepted it before anyone else's). A claim that does not stand is withdrawn by its owner and
the step is decided again on what the arbiter merged in; after an outcome, :meth:`Arbiter.publish`
shares it (best effort). The arbiter is an interface: this module still knows nothing of git.

This module depends on the store and check interfaces only: no git, no CLI, no GitHub.
"""

from __future__ import annotations

import functools
import math
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gitledger.core import crashpoints as faults
from gitledger.core.checks import Check
from gitledger.core.errors import (
    EXIT_IN_PROGRESS,
    EXIT_UNCONFIRMED,
    CheckError,
    ConflictError,
    CorruptLedgerError,
    UsageError,
)
from gitledger.core.events import ATTEMPTING, DONE, FAILED, INFO, Entry, Event, Folded
from gitledger.core.keys import StepKey
from gitledger.core.owner import Owner, claims_running, is_dead
from gitledger.core.policy import DEFAULT_LEASE, StepPolicy, parse_iso, settle_wait
from gitledger.core.renewal import ClaimLostError, Renewal, interval_for
from gitledger.core.store import ANY_VERSION, Intent, Store

CREATED = "created"
SKIPPED = "skipped"
ALREADY_EXISTED = "already_existed"
IN_PROGRESS = "in_progress"
UNCONFIRMED = "unconfirmed"
STATUS_FAILED = "failed"
INTERRUPTED = "interrupted"

MAX_DECISIONS = 200


class PayloadMismatchError(UsageError):
    """An explicit key was reused with different content."""


def iso(ts: float) -> str:
    """``ts`` as UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ``, exactly what ``datetime.fromtimestamp(ts, UTC)
    .isoformat(timespec="milliseconds")`` gives (microseconds rounded half to even, then cut to
    milliseconds), without importing datetime (~1.3 ms of a fresh step)."""
    frac, whole = math.modf(ts)
    micro = round(frac * 1e6)
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    elif micro < 0:
        whole, micro = whole - 1, micro + 1_000_000
    global _iso_second
    second, text = _iso_second  # one read: the heartbeat thread formats too
    if second != int(whole):  # a step formats three times, mostly within one second
        second = int(whole)
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _iso_second = (second, text)
    return f"{text}.{micro // 1000:03d}Z"


_iso_second: tuple[int | None, str] = (None, "")  # the last whole second iso() formatted, and its text


@dataclass
class ActionResult:
    """What the guarded action reports back."""

    ok: bool
    exit_code: int = 0
    ref: str | None = None
    message: str | None = None
    result: Any = None  # a JSON value, recorded with done and replayed on skip
    interrupted: int = 0  # the signal that interrupted the action (0: none); its effect is then unknown
    warnings: tuple[str, ...] = ()  # reported with the step's result ("warnings" in its JSON)


@dataclass
class StepResult:
    status: str
    key: str
    ref: str | None = None
    exit_code: int = 0
    message: str | None = None
    result: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "key": self.key, "ref": self.ref}
        if self.exit_code:
            data["exit_code"] = self.exit_code
        if self.message:
            data["message"] = self.message
        if self.result is not None:
            data["result"] = self.result
        data.update(self.extra)
        return data


Action = Callable[[], ActionResult]


@dataclass(frozen=True)
class Claim:
    """A claim this runner recorded: the step is ours to act on, then to :meth:`StepRunner.finish`."""

    step: StepKey
    fingerprint: str | None = None
    claim_id: str | None = None  # the id of our attempting event; outcomes close it
    warnings: tuple[str, ...] = ()  # what the arbiter said while confirming the claim
    lease: float = DEFAULT_LEASE
    queries_reality: bool = False
    renewal: Renewal | None = field(default=None, compare=False, repr=False)  # heartbeats, until finished

    def stop_renewal(self) -> list[str]:
        """Stop the heartbeats (an outcome is about to close the claim, or it is left open on purpose)."""
        return self.renewal.stop() if self.renewal is not None else []


@dataclass(frozen=True)
class Verdict:
    """An arbiter's answer about one claim."""

    stands: bool  # True: act; False: the claim was beaten, withdraw it and decide again
    warning: str | None = None  # e.g. "remote unreachable, proceeding offline"


class Arbiter(Protocol):
    """Decides between clones whose claims race on one key (e.g. a shared git remote).

    ``confirm`` is called after the claim event was appended to the local store and before the
    action runs. ``seen`` is the entry the decision to claim was made on (without the claim). The
    arbiter publishes the claim and answers whether it stands; when it does not, it has made what
    beat the claim visible in the local store (so deciding again sees it). It raises a
    :class:`~gitledger.core.errors.GitledgerError` when it cannot decide (e.g. the remote is unreachable
    and offline work is not allowed); the runner then withdraws the claim and fails closed.

    ``publish`` is called after an outcome was recorded (and after each heartbeat of a running claim);
    it is best effort and returns a warning for the user, or None.

    Optional methods, looked up by name: ``prepare()`` runs once before the runner writes anything for
    a step that is not done (validate settings: nothing may be written on a usage error);
    ``refresh(intent)`` brings the arbiter's newest view of the entry into the local store before the
    runner answers from a gone owner's claim (so a stale view never yields a false ``unconfirmed``).
    """

    def confirm(self, intent: Intent, seen: Entry, claim: Event) -> Verdict: ...

    def publish(self) -> str | None: ...


def skip_result(step: StepKey, folded: Folded) -> StepResult | None:
    """The ``skipped`` answer for an entry that is done; None for any other state (read-only)."""
    if folded.state != DONE or folded.corrupt or folded.done is None:
        return None
    return StepResult(SKIPPED, step.key, ref=folded.ref, result=folded.done.get("result"))


class StepRunner:
    """Runs steps against one store on behalf of one owner (this process)."""

    def __init__(
        self,
        store: Store,
        owner: Owner | None = None,
        clock: Callable[[], float] = time.time,
        arbiter: Arbiter | None = None,
        renew: bool = True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.sleep = sleep
        self.renew_claims = renew
        self.owner = owner or Owner.current()
        self.clock = clock
        self.arbiter = arbiter
        self._running: tuple[float, set[str]] | None = None

    # -- events ------------------------------------------------------------------------------------

    def event(self, step: StepKey, state: str, **fields: Any) -> Event:
        event: Event = {
            "v": 1,
            "id": os.urandom(6).hex(),
            "at": iso(self.clock()),
            "key": step.key,
            "task": step.task,
            "step": step.step,
            "state": state,
            "owner": self.owner.to_json(),
        }
        event.update({k: v for k, v in fields.items() if v is not None})
        return event

    def record(self, step: StepKey, event: Event) -> None:
        """Append a fact whatever the entry's version (outcomes of our own claim, explanations)."""
        self.store.append(Intent.of(step), event, ANY_VERSION)

    # -- decisions ---------------------------------------------------------------------------------

    def held(self, claim: Event) -> bool:
        """Is this claim still held by a live owner?"""
        owner = Owner.from_json(claim.get("owner"))
        if owner is not None and owner.same_machine(self.owner):
            return not is_dead(owner, self.owner) or self._command_runs(claim)
        until = parse_iso(claim.get("lease_until"))
        if until is None:  # no deadline: locked, never expired
            return True
        return self.clock() < until

    def _command_runs(self, claim: Event) -> bool:
        """Does a process of this machine still carry the claim (its command outlived the owner)?"""
        ident = claim.get("id")
        if not isinstance(ident, str) or not ident:
            return False
        now = time.monotonic()
        if self._running is None or now - self._running[0] > 0.5:
            self._running = (now, claims_running())
        return ident in self._running[1]

    def holder(self, folded: Folded) -> Event | None:
        """The open claim that a live owner holds, if any (a merged entry may hold several)."""
        for claim in reversed(folded.claims):
            if self.held(claim):
                return claim
        return None

    def load(self, step: StepKey, fingerprint: str | None = None) -> Entry:
        entry = self.store.load(Intent.of(step))
        folded = entry.folded
        if folded.corrupt:
            bad = folded.corrupt[0]
            raise CorruptLedgerError(
                f"ledger entry {step.key} is corrupt (line {bad.number}: {bad.error}); inspect it with "
                f"'gitledger show {step.key}' and repair with 'gitledger resolve {step.key} --done' "
                "or '--forget'"
            )
        if fingerprint is not None:
            for event in entry.events:
                recorded = event.get("fingerprint")
                if recorded is not None and recorded != fingerprint:
                    raise PayloadMismatchError(
                        f"key {step.key} was used before with different arguments; choose a new key "
                        "or call with the original arguments"
                    )
        return entry

    def in_progress(self, step: StepKey, claim: Event) -> StepResult:
        owner = claim.get("owner") or {}
        until = claim.get("lease_until", "no deadline")
        return StepResult(
            IN_PROGRESS,
            step.key,
            exit_code=EXIT_IN_PROGRESS,
            message=(
                f"{step.key} is in progress: claimed by pid {owner.get('pid')} on {owner.get('host')} "
                f"at {claim.get('at')}, lease until {until}; rerun later"
            ),
        )

    def query(self, step: StepKey, checks: Sequence[Check]) -> tuple[str, str] | None:
        """The first (spec, ref) any reality check finds, or None when all say absent."""
        for check in checks:
            if not check.queries_reality:
                continue
            try:
                found = check.find(step)
            except CheckError as exc:
                self.record(step, self.event(step, INFO, check=check.spec, message=str(exc)))
                raise CheckError(
                    f"cannot tell whether {step.key} already happened: check '{check.spec}' failed: "
                    f"{exc}; nothing was done"
                ) from exc
            if found is not None:
                return check.spec, found
        return None

    def run(
        self,
        step: StepKey,
        checks: Sequence[Check],
        action: Action,
        policy: StepPolicy | None = None,
        fingerprint: str | None = None,
    ) -> StepResult:
        """Decide, and when the step is ours, act and record the outcome: :meth:`start` + :meth:`act`."""
        started = self.start(step, checks, policy, fingerprint)
        if isinstance(started, Claim):
            return self.act(started, action)
        return started

    def start(
        self,
        step: StepKey,
        checks: Sequence[Check],
        policy: StepPolicy | None = None,
        fingerprint: str | None = None,
        *,
        heartbeat: bool = True,
        claim_fields: Mapping[str, Any] | None = None,
    ) -> StepResult | Claim:
        """Decide what to do; when the step must act, record our claim (with ``claim_fields``, what the
        caller keeps with it) and return it.

        The caller then makes the effect and reports it with :meth:`finish` (or :meth:`fail`), as
        :meth:`act` does for a callable. Callers that cannot pass the effect as a callable (a ``with``
        block, a coroutine) use this split; the decisions stay here.

        The claim's lease is renewed by heartbeats (:mod:`gitledger.core.renewal`) from now until
        :meth:`finish` or :meth:`fail`; with ``heartbeat=False`` the caller starts them itself with
        ``claim.renewal.start()`` (e.g. only after forking the command: no thread across a fork).
        """
        policy = policy or StepPolicy()
        intent = Intent.of(step)
        queries_reality = any(c.queries_reality for c in checks)
        specs = [c.spec for c in checks]
        warnings: list[str] = []
        prepared = False
        for _ in range(MAX_DECISIONS):
            entry = self.load(step, fingerprint)
            folded: Folded = entry.folded
            skipped = skip_result(step, folded)
            if skipped is not None:
                return self._warn(skipped, warnings)
            if self.arbiter is not None and not prepared:
                prepared = True
                prepare = getattr(self.arbiter, "prepare", None)
                if prepare is not None:
                    prepare()  # a bad setting (no such remote) is reported before anything is written
            if folded.state == ATTEMPTING:
                assert folded.claim is not None
                holder = self.holder(folded)
                if holder is not None:
                    return self._warn(self.in_progress(step, holder), warnings)
            unknown = folded.state == ATTEMPTING or folded.interrupted is not None
            if unknown and not queries_reality:
                if self._refresh(intent, entry):
                    continue  # the entry changed meanwhile (here or on the remote): decide again
                if policy.on_unconfirmed == "fail":
                    return self._unconfirmed(step, folded)
                if policy.on_unconfirmed == "skip":
                    assumed = self.event(step, DONE, outcome="assumed", fingerprint=fingerprint)
                    if self.store.append(intent, assumed, entry.version) is None:
                        continue
                    self._publish(warnings)
                    return self._warn(
                        StepResult(SKIPPED, step.key, message="unconfirmed step assumed done"), warnings
                    )
            if queries_reality:
                found = self.query(step, checks)
                wait = 0.0 if found else settle_wait(entry, policy.settle_for(specs), self.clock())
                if wait > 0:  # absent, but an earlier attempt's write may still land: let it, look again
                    warnings.append(
                        f"waited {wait:.1f} s for a possibly late write of an earlier attempt to land "
                        "before asking reality again (settle)"
                    )
                    self.sleep(wait)
                    continue
                if found is not None:
                    spec, ref = found
                    done = self.event(
                        step, DONE, outcome="already_existed", ref=ref, check=spec, fingerprint=fingerprint
                    )
                    if self.store.append(intent, done, entry.version) is None:
                        continue
                    self._publish(warnings)
                    return self._warn(StepResult(ALREADY_EXISTED, step.key, ref=ref), warnings)
            faults.point("before-claim")
            now = self.clock()
            claim = self.event(
                step,
                ATTEMPTING,
                lease_until=iso(now + policy.lease),
                checks=specs,
                fingerprint=fingerprint,
                supersedes=[c["id"] for c in folded.claims if isinstance(c.get("id"), str)],
                **(claim_fields or {}),
            )
            if self.store.append(intent, claim, entry.version) is None:
                continue
            faults.point("after-claim")
            if self.arbiter is not None and not self._arbitrate(step, intent, entry, claim, warnings):
                continue
            renewal = None
            if self.renew_claims:
                renew = functools.partial(self.renew, step, claim["id"], policy.lease)
                renewal = Renewal(renew, interval_for(policy.lease))
                if heartbeat:
                    renewal.start()
            return Claim(
                step, fingerprint, claim["id"], tuple(warnings), policy.lease, queries_reality, renewal
            )
        raise ConflictError(f"could not decide {step.key}: the entry kept changing; try again")

    def _refresh(self, intent: Intent, entry: Entry) -> bool:
        """Before answering from a gone owner's claim: has the entry changed since it was read?

        The owner may have finished after the read (its outcome is then in the store), and in remote
        claim mode its outcome may be on the remote only: the arbiter fetches it first.
        """
        if self.arbiter is not None:
            refresh = getattr(self.arbiter, "refresh", None)
            if refresh is not None:
                refresh(intent)
        return self.store.load(intent).version != entry.version

    def _unconfirmed(self, step: StepKey, folded: Folded) -> StepResult:
        if folded.interrupted is not None:
            what = f"was interrupted ({folded.interrupted.get('interrupted')}) while its command ran"
        else:
            what = "was started by a process that is gone"
        return StepResult(
            UNCONFIRMED,
            step.key,
            exit_code=EXIT_UNCONFIRMED,
            message=(
                f"{step.key} {what} and nothing can confirm whether it finished; after checking by "
                f"hand run 'gitledger resolve {step.key} --done' or '--forget'"
            ),
        )

    def renew(self, step: StepKey, claim_id: str, lease: float) -> str | None:
        """One heartbeat: move our open claim's lease to now + ``lease``; publish it in remote mode.

        Raises :class:`ClaimLostError` when the claim is no longer open (another owner took it over or
        the entry was settled); returns the arbiter's warning, if any.
        """
        intent = Intent.of(step)
        for _ in range(MAX_DECISIONS):
            entry = self.store.load(intent)
            self._still_ours(step, entry.folded, claim_id)
            beat = self.event(step, INFO, renews=claim_id, lease_until=iso(self.clock() + lease))
            if self.store.append(intent, beat, entry.version) is not None:
                break
        else:
            raise ConflictError(f"could not renew the claim of {step.key}: the entry kept changing")
        if self.arbiter is None:
            return None
        warning = self.arbiter.publish()
        self._still_ours(step, self.store.load(intent).folded, claim_id)
        return warning

    @staticmethod
    def _still_ours(step: StepKey, folded: Folded, claim_id: str) -> None:
        if any(c.get("id") == claim_id for c in folded.claims):
            return
        by = folded.claims[-1] if folded.claims else folded.last or {}
        owner = by.get("owner") or {}
        raise ClaimLostError(
            f"the claim of this run on {step.key} was closed by another owner (pid {owner.get('pid')} on "
            f"{owner.get('host')}, {by.get('state')} at {by.get('at')}) while the command ran: its lease "
            "had run out where they looked, so the effect may now exist twice; see "
            f"'gitledger show {step.key}'"
        )

    def withdraw(self, step: StepKey, claim: Event, message: str) -> None:
        """Give our own claim back (never anyone else's): it closes the claim without a failure."""
        self.record(step, self.event(step, FAILED, claim=claim["id"], withdrawn=True, message=message))

    def _arbitrate(
        self, step: StepKey, intent: Intent, seen: Entry, claim: Event, warnings: list[str]
    ) -> bool:
        """Ask the arbiter whether our recorded claim stands; withdraw it when it does not."""
        assert self.arbiter is not None
        try:
            verdict = self.arbiter.confirm(intent, seen, claim)
        except BaseException as exc:
            self.withdraw(step, claim, f"not confirmed by the arbiter: {type(exc).__name__}: {exc}"[:2000])
            raise
        if verdict.warning:
            warnings.append(verdict.warning)
        if not verdict.stands:
            self.withdraw(step, claim, "another claim reached the arbiter first")
        return verdict.stands

    def _publish(self, warnings: list[str]) -> None:
        if self.arbiter is not None:
            warning = self.arbiter.publish()
            if warning:
                warnings.append(warning)

    @staticmethod
    def _warn(result: StepResult, warnings: list[str]) -> StepResult:
        if warnings:
            result.extra["warnings"] = list(warnings)
        return result

    def act(self, claim: Claim, action: Action) -> StepResult:
        """Run ``action`` under ``claim`` and record what came of it."""
        try:
            outcome = action()
        except BaseException as exc:
            self.fail(claim, exc)
            raise
        return self.finish(claim, outcome)

    def fail(self, claim: Claim, exc: BaseException) -> None:
        """Record that the action under ``claim`` raised: ``failed`` (retryable) for an error; for an
        interruption (KeyboardInterrupt, cancellation, SystemExit: not an ``Exception``) the effect is
        unknown, so the failure is marked ``interrupted`` and the next run queries reality first."""
        claim.stop_renewal()
        message = f"{type(exc).__name__}: {exc}"[:2000]
        interrupted = None if isinstance(exc, Exception) else type(exc).__name__
        self.record(
            claim.step,
            self.event(claim.step, FAILED, claim=claim.claim_id, message=message, interrupted=interrupted),
        )

    def finish(self, claim: Claim, outcome: ActionResult) -> StepResult:
        """Record the outcome the action under ``claim`` reported."""
        step, fingerprint, claim_id = claim.step, claim.fingerprint, claim.claim_id
        warnings = list(claim.warnings) + claim.stop_renewal() + list(outcome.warnings)
        if outcome.interrupted and not outcome.ok:
            return self._interrupted(claim, outcome, warnings)
        if outcome.ok:
            faults.point("after-effect")
            done = self.event(
                step,
                DONE,
                outcome=CREATED,
                ref=outcome.ref,
                result=outcome.result,
                fingerprint=fingerprint,
                claim=claim_id,
            )
            self.record(step, done)
            self._publish(warnings)
            result = StepResult(CREATED, step.key, ref=outcome.ref, result=outcome.result)
            if outcome.interrupted:
                result.exit_code = 128 + outcome.interrupted
                result.message = (
                    f"interrupted by {_signal_name(outcome.interrupted)}; the command had finished: "
                    "its effect is recorded"
                )
            return self._warn(result, warnings)
        failed = self.event(
            step,
            FAILED,
            exit_code=outcome.exit_code,
            message=(outcome.message or "")[:2000] or None,
            claim=claim_id,
        )
        self.record(step, failed)
        self._publish(warnings)
        return self._warn(
            StepResult(
                STATUS_FAILED,
                step.key,
                exit_code=outcome.exit_code or 1,
                message=outcome.message or f"the command failed with exit code {outcome.exit_code}",
            ),
            warnings,
        )

    def _interrupted(self, claim: Claim, outcome: ActionResult, warnings: list[str]) -> StepResult:
        """Close our claim as interrupted: the command was stopped by a signal, its effect is unknown."""
        name = _signal_name(outcome.interrupted)
        event = self.event(
            claim.step,
            FAILED,
            interrupted=name,
            exit_code=outcome.exit_code,
            message=(outcome.message or "")[:2000] or None,
            claim=claim.claim_id,
        )
        self.record(claim.step, event)
        self._publish(warnings)
        if claim.queries_reality:
            then = "the next run queries reality (the step's checks) before acting"
        else:
            then = "the next run follows the step's on_unconfirmed policy (fail: it answers unconfirmed)"
        return self._warn(
            StepResult(
                INTERRUPTED,
                claim.step.key,
                exit_code=128 + outcome.interrupted,
                message=(
                    f"interrupted by {name} while the command ran; whether it took effect is unknown: {then}"
                ),
            ),
            warnings,
        )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


SETTLED_DONE = "done"
SETTLED_RETRYABLE = "retryable"
STILL_HELD = "in_progress"
UNSETTLED = "unconfirmed"


def reconcile_specs(claim: Event, configured: Sequence[str]) -> list[str]:
    """The checks that settle a claim: the claim's own specs, except ``cmd:`` ones, plus the ``cmd:``
    checks configured for the step.

    The claim comes from the ledger, which anyone with push access to a synced remote can write: a
    command is never taken from there (it would run on this machine), nor anything that is not a
    valid spec.
    """
    from gitledger.core.checks import validate_spec

    specs = [
        s
        for s in claim.get("checks") or []
        if isinstance(s, str) and not s.startswith("cmd:") and validate_spec(s) is None
    ]
    return specs + [s for s in configured if s.startswith("cmd:")]


def reconcile_entry(
    runner: StepRunner, step: StepKey, entry: Entry, checks: Sequence[Check]
) -> tuple[str, str | None]:
    """Settle one attempting entry whose owner is gone: (what happened, ref).

    Reality found → ``done`` (already_existed). Reality absent → ``failed`` (retryable: the dead owner
    did not produce the effect). Nothing can query reality → left as is, reported ``unconfirmed``.
    The write is a compare-and-swap on the version read, so a live owner finishing meanwhile wins.
    """
    folded = entry.folded
    if folded.state != ATTEMPTING or folded.claim is None:
        return folded.state, folded.ref
    if runner.holder(folded) is not None:
        return STILL_HELD, None
    settled = [c["id"] for c in folded.claims if isinstance(c.get("id"), str)] or None
    if not any(c.queries_reality for c in checks):
        if runner.store.load(Intent.of(step)).version != entry.version:
            return "changed", None  # the owner finished between the read and the liveness check
        return UNSETTLED, None
    found = runner.query(step, checks)
    intent = Intent.of(step)
    if found is not None:
        spec, ref = found
        event = runner.event(step, DONE, outcome="already_existed", ref=ref, check=spec, by="reconcile")
        if runner.store.append(intent, event, entry.version) is None:
            return "changed", None
        return SETTLED_DONE, ref
    event = runner.event(
        step, FAILED, claim=settled, message="owner died before the effect existed (reconcile)"
    )
    if runner.store.append(intent, event, entry.version) is None:
        return "changed", None
    return SETTLED_RETRYABLE, None
