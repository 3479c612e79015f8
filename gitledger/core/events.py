"""Ledger entries: events and how they fold into a state. Pure; no git, no I/O.

An entry is the append-only list of events recorded for one key, stored as JSON Lines. Folding the
events gives the entry's state:

- ``attempting``: a claim by an owner with a lease; ``done``: the effect exists (``outcome`` says how
  we know: ``created``, ``already_existed``, ``resolved`` by a person, ``assumed`` by policy);
  ``failed``: the action itself failed and may be retried; ``forgotten``: a tombstone written by
  ``resolve --forget`` that retires everything before it (entries are never deleted without trace).
- Events of kind ``info`` explain something (a check that could not query reality) and never change
  the state. One kind of ``info`` is a heartbeat: ``renews: <claim id>`` with a new ``lease_until``,
  written by the claim's owner while its command runs; the fold extends that claim's lease (never
  shortens it; only heartbeats of the claim's own session count).
- A ``failed`` event with ``interrupted`` (a signal name) closes a claim whose command was stopped by
  a signal: whether the effect happened is unknown, so the next run queries reality, or (a ledger-only
  step) follows its ``on_unconfirmed`` policy (``Folded.interrupted``).

The fold is deterministic for any union of two clones' events: ``done`` wins over ``attempting`` and
``failed`` until a later ``forgotten``; two ``created`` outcomes since the last tombstone mark the entry
as a duplicate, which ``list`` and ``audit`` report instead of hiding.

Claims are tracked one by one, because a union of clones can hold several concurrent claims:

- an ``attempting`` event with a ``supersedes`` list (ids of the claims it took over) closes exactly
  those; without the field (older writers, one clone) it closes every claim before it;
- a ``done`` or ``failed`` event with a ``claim`` field (an id or a list of ids) closes exactly those
  claims, wherever they appear; without it, every claim before it;
- a ``failed`` event with ``withdrawn: true`` is a claimant giving its claim back (it lost the remote
  arbitration or could not reach the remote): it closes the claim without marking the step failed.

The entry is ``attempting`` while any claim is open (``Folded.claims``); callers must treat it as held
if *any* open claim is held, so a claim merged in from another clone is never overlooked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ATTEMPTING = "attempting"
DONE = "done"
FAILED = "failed"
FORGOTTEN = "forgotten"
INFO = "info"
NONE = "none"
STATES = (ATTEMPTING, DONE, FAILED, FORGOTTEN, INFO)

Event = dict[str, Any]


# what json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False) uses, built once
# (json.dumps builds a new encoder for every call with options)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def encode_event(event: Event) -> bytes:
    """One JSON line, keys sorted so the same event always has the same bytes.

    A lone surrogate (bytes that were not UTF-8, e.g. a command name from the command line) cannot be
    written as UTF-8: it is written as the JSON escape ``\\udcff``, which is still valid JSON and reads
    back as the same string, so no input can make an event unwritable.
    """
    return _ENCODER.encode(event).encode("utf-8", "backslashreplace") + b"\n"


@dataclass
class BadLine:
    number: int
    text: str
    error: str


def parse_events(data: bytes) -> tuple[list[Event], list[BadLine]]:
    """Parse a note body; malformed lines are returned separately, never dropped silently."""
    events: list[Event] = []
    bad: list[BadLine] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            event = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            bad.append(BadLine(number, raw[:200].decode("utf-8", "replace"), str(exc)))
            continue
        if not isinstance(event, dict) or event.get("state") not in STATES:
            bad.append(BadLine(number, raw[:200].decode("utf-8", "replace"), "not a gitledger event"))
            continue
        event["_line"] = number
        events.append(event)
    return events, bad


@dataclass
class Folded:
    """The state of one entry after folding its events."""

    state: str = NONE
    claim: Event | None = None  # the latest open claim (else the latest attempting event) since the tombstone
    done: Event | None = None  # the first done event since the last tombstone
    last: Event | None = None  # the last state-changing event
    created: int = 0  # done events with outcome "created" since the last tombstone
    corrupt: list[BadLine] = field(default_factory=list)
    claims: list[Event] = field(default_factory=list)  # every open claim, oldest first (leases renewed)
    interrupted: Event | None = None  # state failed by an interrupt: whether the effect exists is unknown

    @property
    def duplicate(self) -> bool:
        return self.created > 1

    @property
    def ref(self) -> str | None:
        return self.done.get("ref") if self.done else None


def event_id(event: Event) -> str:
    """The event's id; events without one (foreign writers) are identified by their canonical bytes."""
    ident = event.get("id")
    if isinstance(ident, str) and ident:
        return ident
    return encode_event({k: v for k, v in event.items() if not k.startswith("_")}).decode()


def _ids(value: Any) -> list[str] | None:
    """The claim ids an event names (``claim``/``supersedes``), or None when it names none."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return None


_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _session(event: Event) -> Any:
    owner = event.get("owner")
    return owner.get("session") if isinstance(owner, dict) else None


def _renewals(events: list[Event]) -> dict[tuple[str, Any], str]:
    """(claim id, renewing owner's session) -> the latest lease_until its heartbeats set."""
    found: dict[tuple[str, Any], str] = {}
    for event in events:
        ident, until = event.get("renews"), event.get("lease_until")
        if event.get("state") != INFO or not isinstance(ident, str) or not isinstance(until, str):
            continue
        slot = (ident, _session(event))
        if _ISO.match(until) and (slot not in found or until > found[slot]):
            found[slot] = until
    return found


def _renewed(claim: Event, renewals: dict[tuple[str, Any], str]) -> Event:
    """The claim with the lease its owner renewed (heartbeats of the same session only, never shorter;
    a claim without a deadline stays without one)."""
    renewed = renewals.get((event_id(claim), _session(claim)))
    until = claim.get("lease_until")
    if renewed is None or not isinstance(until, str) or (_ISO.match(until) and until >= renewed):
        return claim
    return {**claim, "lease_until": renewed, "renewed": True}


def fold(events: Iterable[Event], bad: list[BadLine] | None = None) -> Folded:
    """Fold events in stored order into a :class:`Folded` state.

    Malformed lines make the entry corrupt unless a later ``done``/``forgotten`` resolution (written
    by ``gitledger resolve``) supersedes them.
    """
    events = list(events)
    renewals = _renewals(events)
    # Claims closed by id, wherever the closing event sits: the order of a merged history must not matter.
    # A withdrawn claim never stood (it lost the remote arbitration), so what it superseded stays open:
    # a claim taken over on a stale view of a renewed lease must not close the live claim it lost to.
    withdrawn = {
        ident
        for event in events
        if event.get("state") == FAILED and event.get("withdrawn")
        for ident in _ids(event.get("claim")) or ()
    }
    closed: set[str] = set()
    for event in events:
        if event.get("state") == ATTEMPTING and event_id(event) in withdrawn:
            continue
        named = _ids(event.get("supersedes") if event.get("state") == ATTEMPTING else event.get("claim"))
        if named and event.get("state") in (ATTEMPTING, DONE, FAILED):
            closed.update(named)
    result = Folded()
    open_claims: dict[str, Event] = {}
    failed: Event | None = None
    pending_bad = sorted(bad or [], key=lambda b: b.number)
    for event in events:
        state = event["state"]
        if state == INFO:
            continue
        line = int(event.get("_line", 0))
        if state == FORGOTTEN:
            result = Folded(state=NONE, last=event)
            open_claims = {}
            failed = None
            pending_bad = [b for b in pending_bad if b.number > line]
            continue
        result.last = event
        if state == DONE:
            if event.get("outcome") == "resolved":
                pending_bad = [b for b in pending_bad if b.number > line]
            if event.get("outcome") == "created":
                result.created += 1
            if result.done is None:
                result.done = event
            if _ids(event.get("claim")) is None:
                open_claims = {}
        elif state == ATTEMPTING:
            result.claim = event
            if _ids(event.get("supersedes")) is None:
                open_claims = {}
            open_claims[event_id(event)] = event
        elif state == FAILED:
            if not event.get("withdrawn"):
                failed = event
            if _ids(event.get("claim")) is None:
                open_claims = {}
    result.claims = [_renewed(c, renewals) for ident, c in open_claims.items() if ident not in closed]
    if result.done is not None:
        result.state = DONE
    elif result.claims:
        result.state = ATTEMPTING
        result.claim = result.claims[-1]
    elif failed is not None:
        result.state = FAILED
        if failed.get("interrupted"):
            result.interrupted = failed
    result.corrupt = pending_bad
    return result


@dataclass
class Entry:
    """One key's record as read from a store."""

    key: str
    events: list[Event]
    version: str | None  # opaque; changes whenever the entry changes (None: no entry)
    bad_lines: list[BadLine] = field(default_factory=list)
    location: str = ""  # where a person can look at it (e.g. the intent object id)

    @property
    def folded(self) -> Folded:
        return fold(self.events, self.bad_lines)

    @property
    def exists(self) -> bool:
        return self.version is not None

    def field(self, name: str) -> Any:
        """The latest value of an event field (task, step) across the entry's events."""
        for event in reversed(self.events):
            if name in event:
                return event[name]
        return None

    def summary(self) -> dict[str, Any]:
        folded = self.folded
        last = self.events[-1] if self.events else {}
        return {
            "key": self.key,
            "task": self.field("task"),
            "step": self.field("step"),
            "state": "corrupt" if folded.corrupt else folded.state,
            "outcome": folded.done.get("outcome")
            if folded.done
            else ("interrupted" if folded.interrupted else None),
            "ref": folded.ref,
            "updated_at": last.get("at"),
            "events": len(self.events),
            "duplicate": folded.duplicate,
        }
