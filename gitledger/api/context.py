"""The with-block form of a step: :class:`StepContext` (see :mod:`gitledger.api`)."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from gitledger.api.results import (
    ResultNotRecordableError,
    StepNotFinishedError,
    _make_outcome,
    _Outcome,
    _raise_for,
)
from gitledger.core.checks import Check
from gitledger.core.errors import (
    UsageError,
)
from gitledger.core.events import INFO
from gitledger.core.keys import StepKey
from gitledger.core.policy import StepPolicy
from gitledger.core.protocol import (
    STATUS_FAILED,
    Claim,
)

if TYPE_CHECKING:
    from gitledger.api.ledger import Ledger

    pass

# -- the with-block form ----------------------------------------------------------------------------


class StepContext:
    """One guarded step: ``with ledger.step(...) as s: if s.should_run: ...; s.done(ref=..., result=...)``.

    Entering decides, through the step protocol, whether this process must make the effect:

    - ``should_run`` is True: the claim is recorded; make the effect, then call :meth:`done`.
      Status ``running``, then ``created`` when the block ends.
    - ``should_run`` is False: the effect exists. ``status`` is ``skipped`` (recorded: ``ref`` and
      ``result`` are the recorded values) or ``already_existed`` (a check found it: ``ref`` is what the
      check found, ``result`` is None).
    - Another live process holds the step: :class:`StepInProgressError`; a ledger-only step left by a
      dead process under the ``fail`` policy: :class:`StepUnconfirmedError` (raised by ``with``).

    Leaving the block: :meth:`done` was called → ``done`` is recorded (even when the block then raised;
    the exception still propagates). An exception and no ``done()`` → ``failed`` is recorded (the step
    is retried next time) and the exception propagates. Neither → :class:`StepNotFinishedError`; the
    claim stays open as after a crash (this process then sees the step ``in_progress``; once it has
    exited, checks or the ``on_unconfirmed`` policy decide, or ``gitledger resolve`` by hand).
    """

    def __init__(
        self,
        ledger: Ledger,
        step_key: StepKey,
        checks: list[Check],
        policy: StepPolicy,
        fingerprint: str | None,
    ) -> None:
        self.step_key = step_key
        self.should_run = False
        self.status = "pending"
        self.ref: str | None = None
        self.result: Any = None
        self.message: str | None = None
        self._ledger = ledger
        self._checks = checks
        self._policy = policy
        self._fingerprint = fingerprint
        self._claim: Claim | None = None
        self._outcome: _Outcome | None = None
        self._entered = False

    @property
    def key(self) -> str:
        """The ledger key (``task.step.digest``)."""
        return self.step_key.key

    @property
    def env(self) -> dict[str, str]:
        """The ``GITLEDGER_*`` variables of this step, for child processes the effect runs."""
        from gitledger.local.command import step_env

        return step_env(self.step_key)

    def done(self, ref: str | None = None, result: Any = None) -> None:
        """Say that the effect now exists; ``ref`` names it (a URL, a commit), ``result`` is JSON data
        replayed to later runs. Recorded when the block ends."""
        if not self.should_run:
            raise UsageError(
                f"done() called on step {self.key}, which is {self.status}; call it only when should_run"
            )
        if self._outcome is not None:
            raise UsageError(f"done() called twice on step {self.key}")
        if self._claim is None:
            raise UsageError(f"done() called after the block of step {self.key} ended; call it inside")
        self._outcome = _make_outcome(f"step {self.key}", result, ref, result, self._ledger.max_result)

    def _enter(self) -> None:
        if self._entered:
            raise UsageError(f"step {self.key} was entered before; call ledger.step(...) for a new run")
        self._entered = True
        started = self._ledger._runner().start(self.step_key, self._checks, self._policy, self._fingerprint)
        if isinstance(started, Claim):
            self._claim = started
            self.should_run = True
            self.status = "running"
            return
        self.status, self.ref, self.result, self.message = (
            started.status,
            started.ref,
            started.result,
            started.message,
        )
        _raise_for(started)

    def _exit(self, exc: BaseException | None) -> None:
        if self._claim is None:
            return
        claim, self._claim = self._claim, None
        runner = self._ledger._runner()
        outcome = self._outcome
        if outcome is not None:
            recorded = runner.finish(claim, outcome.action_result())
            self.status, self.ref, self.result = recorded.status, recorded.ref, recorded.result
            if exc is None and outcome.problem:
                raise ResultNotRecordableError(outcome.problem, self.key, outcome.value)
            return
        if exc is not None:
            runner.fail(claim, exc)
            self.status = STATUS_FAILED
            self.message = f"{type(exc).__name__}: {exc}"
            return
        self.status = "unfinished"
        message = (
            f"the block of step {self.key} should have made the effect but ended without s.done(); "
            "nobody knows whether the effect happened, so the claim stays open as after a crash: this "
            "process sees the step in progress, and once it has exited the step's checks (or its "
            f"on_unconfirmed policy) decide; settle it by hand with 'gitledger resolve {self.key} --done' "
            "or '--forget'. Call s.done() after the effect, or raise to record a failure"
        )
        runner.record(self.step_key, runner.event(self.step_key, INFO, message="block ended without done()"))
        raise StepNotFinishedError(message)

    def __enter__(self) -> Self:
        self._enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exit(exc)

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self._enter)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self._exit, exc)

    def __repr__(self) -> str:
        return f"<StepContext {self.key} {self.status}>"
