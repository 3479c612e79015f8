"""Existence checks: the interface the step protocol uses to query reality.

A check answers one question for a step: does the step's effect already exist? :meth:`Check.find`
returns a reference to the artifact it found (a URL, a commit, a path), or None when the effect is
absent. When reality cannot be queried (network down, bad token, a check command that errs) it raises
:class:`~gitledger.errors.CheckError`: not knowing is never taken as absent.

``queries_reality`` is False for the ``ledger`` check, whose only evidence is the ledger itself; a
step with only such checks that was left attempting by a dead owner is *unconfirmed*.

Implementations live in :mod:`gitledger.checks.local` (git, files, commands) and
:mod:`gitledger.checks.github` (PyGithub, imported only when a GitHub check is used); spec strings are
parsed by :mod:`gitledger.checks.specs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gitledger.keys import StepKey


class Check(Protocol):
    @property
    def spec(self) -> str: ...

    @property
    def queries_reality(self) -> bool: ...

    def find(self, step: StepKey) -> str | None: ...


@dataclass
class LedgerCheck:
    """Only the ledger is evidence (e.g. a chat message nobody can look up afterwards)."""

    spec: str = "ledger"
    queries_reality: bool = False

    def find(self, step: StepKey) -> str | None:
        return None


@dataclass
class CallableCheck:
    """A custom check from Python: a callable returning the found ref (or None when absent)."""

    func: Callable[[StepKey], str | None]
    spec: str = "python"
    queries_reality: bool = True

    def find(self, step: StepKey) -> str | None:
        return self.func(step)
