"""A step's policy: what to do with an unconfirmed step, and how long a claim holds.

One precedence everywhere (the CLI, the fast skip, the Python API): the option given for this run, then
the step's settings in .gitledger.yml, then the repository-wide settings, then the defaults here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitledger.core.errors import UsageError

ON_UNCONFIRMED = ("fail", "retry", "skip")
DEFAULT_LEASE = 900.0
MAX_LEASE = 10 * 366 * 24 * 3600.0  # a deadline must stay a date


@dataclass(frozen=True)
class StepPolicy:
    on_unconfirmed: str = "fail"
    lease: float = DEFAULT_LEASE

    def __post_init__(self) -> None:
        if self.on_unconfirmed not in ON_UNCONFIRMED:
            raise UsageError(
                f"on_unconfirmed {self.on_unconfirmed!r} is not one of {', '.join(ON_UNCONFIRMED)}"
            )
        if not 0 < self.lease <= MAX_LEASE:  # also refuses NaN and infinity
            raise UsageError(
                f"lease must be a positive number of seconds up to {MAX_LEASE:.0f} (ten years), "
                f"not {self.lease!r}"
            )


def merge_policy(
    on_unconfirmed: str | None,
    lease: float | None,
    step: tuple[str | None, float | None] = (None, None),
    repo: tuple[str | None, float | None] = (None, None),
) -> StepPolicy:
    """The policy of one run: ``on_unconfirmed``/``lease`` given for it, else the step's settings
    (``step``), else the repository's (``repo``), else the defaults."""
    leases = (lease, step[1], repo[1], DEFAULT_LEASE)
    return StepPolicy(
        on_unconfirmed=on_unconfirmed or step[0] or repo[0] or "fail",
        lease=next(value for value in leases if value is not None),
    )


__all__ = ["DEFAULT_LEASE", "MAX_LEASE", "ON_UNCONFIRMED", "StepPolicy", "merge_policy"]
