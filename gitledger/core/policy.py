"""A step's policy: what to do with an unconfirmed step, how long a claim holds, and how long a
possibly late write of an earlier attempt is given to land before reality is asked again (settle).

One precedence everywhere (the CLI, the fast skip, the Python API): the option given for this run, then
the step's settings in .gitledger.yml, then the repository-wide settings, then the defaults here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gitledger.core.errors import UsageError
from gitledger.core.events import ATTEMPTING, FAILED, FORGOTTEN, INFO, Entry

ON_UNCONFIRMED = ("fail", "retry", "skip")
DEFAULT_LEASE = 900.0
MAX_LEASE = 10 * 366 * 24 * 3600.0  # a deadline must stay a date
# three of the shortest heartbeat intervals (core.renewal.MIN_INTERVAL, 0.1 s): a shorter lease runs
# out between two renewals while its holder is alive, and another process may take the step over
MIN_LEASE = 0.3
MAX_SETTLE = 600.0
# Seconds a write whose answer was lost may still land, per effect kind (the check that finds it). A
# rerun within that time after a failed, interrupted or abandoned attempt waits for the rest of it before
# asking reality, so a late twin is found instead of being written again. Kinds not listed: 0 (local
# effects are synchronous; GitHub refuses a second open PR for one head and a second branch push).
SETTLE_DEFAULTS = {"github-comment": 15.0}


@dataclass(frozen=True)
class StepPolicy:
    on_unconfirmed: str = "fail"
    lease: float = DEFAULT_LEASE
    settle: float | None = None  # None: the default of the step's effect kind (SETTLE_DEFAULTS)

    def __post_init__(self) -> None:
        if self.on_unconfirmed not in ON_UNCONFIRMED:
            raise UsageError(
                f"on_unconfirmed {self.on_unconfirmed!r} is not one of {', '.join(ON_UNCONFIRMED)}"
            )
        if not MIN_LEASE <= self.lease <= MAX_LEASE:  # also refuses NaN and infinity
            raise UsageError(
                f"lease must be a positive number of seconds from {MIN_LEASE:g} (a shorter one runs out "
                f"between two heartbeats) up to {MAX_LEASE:.0f} (ten years), not {self.lease!r}"
            )
        if self.settle is not None and not 0 <= self.settle <= MAX_SETTLE:
            raise UsageError(f"settle must be 0 to {MAX_SETTLE:.0f} seconds, not {self.settle!r}")

    def settle_for(self, specs: Iterable[str]) -> float:
        """The settle window of a step with these check specs: the policy's, else its kinds' longest."""
        if self.settle is not None:
            return self.settle
        return max((SETTLE_DEFAULTS.get(spec.partition(":")[0], 0.0) for spec in specs), default=0.0)


def settle_wait(entry: Entry, settle: float, now: float) -> float:
    """Seconds left of the settle window after the entry's latest attempt (a claim that was not given
    back, a heartbeat, a failure; since the last tombstone). 0 when there is none or it is older."""
    if settle <= 0:
        return 0.0
    withdrawn = {e.get("claim") for e in entry.events if e.get("state") == FAILED and e.get("withdrawn")}
    latest: float | None = None
    for event in entry.events:
        state = event.get("state")
        if state == FORGOTTEN:
            latest = None
            continue
        if event.get("withdrawn") or (state == ATTEMPTING and event.get("id") in withdrawn):
            continue  # a claim given back never acted
        if state in (ATTEMPTING, FAILED) or (state == INFO and event.get("renews")):
            at = parse_iso(event.get("at"))
            if at is not None and (latest is None or at > latest):
                latest = at
    if latest is None:
        return 0.0
    return max(0.0, min(settle, latest + settle - now))


def parse_iso(text: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 time (an event's ``at``, a claim's ``lease_until``)."""
    if not isinstance(text, str):
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def merge_policy(
    on_unconfirmed: str | None,
    lease: float | None,
    step: tuple[str | None, float | None] = (None, None),
    repo: tuple[str | None, float | None] = (None, None),
    settle: Iterable[float | None] = (),
) -> StepPolicy:
    """The policy of one run: ``on_unconfirmed``/``lease`` given for it, else the step's settings
    (``step``), else the repository's (``repo``), else the defaults; ``settle``: the first given of
    (this run's, the step's, the repository's)."""
    leases = (lease, step[1], repo[1], DEFAULT_LEASE)
    return StepPolicy(
        on_unconfirmed=on_unconfirmed or step[0] or repo[0] or "fail",
        lease=next(value for value in leases if value is not None),
        settle=next((value for value in settle if value is not None), None),
    )


__all__ = [
    "DEFAULT_LEASE",
    "MAX_LEASE",
    "MAX_SETTLE",
    "ON_UNCONFIRMED",
    "SETTLE_DEFAULTS",
    "StepPolicy",
    "merge_policy",
    "parse_iso",
    "settle_wait",
]
