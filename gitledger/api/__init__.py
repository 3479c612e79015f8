"""The Python API: idempotency middleware for any side-effecting call.

Two ways to guard an effect, both running the step protocol of :mod:`gitledger.core.protocol` (the same
decisions, claims and records as ``gitledger run-step``):

A ``with`` block, for effects written inline::

    with gitledger.Ledger.open() as ledger:
        with ledger.step("T-42", "open-pr", args={"title": title}, checks=[checks.github_pr()]) as s:
            if s.should_run:
                pr = open_pull_request(head=s.step_key.branch, body=f"... {s.step_key.marker}")
                s.done(ref=pr["html_url"], result={"number": pr["number"]})
        number = s.result["number"] if s.result else number_from(s.ref)

A decorator, for functions::

    @ledger.idempotent(step="notify")
    def notify(task_id: str, channel: str, payload: dict) -> dict: ...

    notify("T-9", "ops", {"x": 1})   # a second process making this call gets the recorded result

Design decisions (see docs/python-api.md for the user's view):

- Keys come from the task id, the step name the user chose and the call's arguments (bound with
  :func:`inspect.signature`, defaults applied, encoded as canonical JSON), never from the function's
  name or module: renaming or moving the function keeps its keys. ``include``/``exclude`` choose the
  arguments that count; an argument without a canonical encoding is a :class:`~gitledger.errors.UsageError`
  naming it, raised before anything happens.
- An explicit ``key=`` is the caller's identity for the effect; the arguments then become a fingerprint,
  and reusing the key with other arguments raises :class:`~gitledger.core.protocol.PayloadMismatchError`
  instead of silently returning the first call's result.
- The return value is recorded with ``done`` (JSON, at most :data:`MAX_RESULT` bytes) and returned to
  every later call instead of calling again. A value that cannot be recorded is found *after* the
  effect happened, so the effect is still recorded as done (without the value) and only then
  :class:`ResultNotRecordableError` is raised: a retry is skipped instead of repeating the effect.
- A call whose effect a check finds (``already_existed``) returns ``from_ref(ref)`` when given, else
  None; ``in_progress`` and ``unconfirmed`` raise :class:`StepInProgressError` and
  :class:`StepUnconfirmedError` (they are not results: the effect may or may not exist).
- An exception from the function or the ``with`` block records ``failed`` (retryable) and propagates.
  A block that should run and ends without :meth:`StepContext.done` raises
  :class:`StepNotFinishedError` and leaves its claim open: nobody knows whether the effect happened,
  which is exactly the state a crash leaves, so checks or the ``on_unconfirmed`` policy settle it.
- ``async def`` functions and ``async with`` work: the ledger's I/O (git, check queries) runs in a
  worker thread through :func:`asyncio.to_thread`, the coroutine itself runs on the caller's loop.
  A :class:`Ledger` serialises its store access, so threads and concurrent tasks may share one.
- One ledger belongs to one process (the claims carry its pid): after ``fork`` open a new one.
"""

from gitledger.api.context import StepContext
from gitledger.api.decorator import key_of
from gitledger.api.ledger import Ledger
from gitledger.api.results import (
    MAX_RESULT,
    ResultNotRecordableError,
    StepInProgressError,
    StepNotFinishedError,
    StepUnconfirmedError,
)
from gitledger.core.protocol import PayloadMismatchError

__all__ = [
    "MAX_RESULT",
    "Ledger",
    "PayloadMismatchError",
    "ResultNotRecordableError",
    "StepContext",
    "StepInProgressError",
    "StepNotFinishedError",
    "StepUnconfirmedError",
    "key_of",
]
