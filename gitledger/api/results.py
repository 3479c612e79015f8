"""The Python API's errors, result recording and the serialised store (see :mod:`gitledger.api`)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from gitledger.core.checks import Check, CheckSpec
from gitledger.core.errors import (
    EXIT_IN_PROGRESS,
    EXIT_UNCONFIRMED,
    GitledgerError,
    UsageError,
)
from gitledger.core.keys import Content, StepKey
from gitledger.core.protocol import (
    IN_PROGRESS,
    STATUS_FAILED,
    UNCONFIRMED,
    ActionResult,
    StepResult,
)

if TYPE_CHECKING:
    pass

P = ParamSpec("P")
R = TypeVar("R")

MAX_RESULT = 64 * 1024
"""The most bytes of JSON a recorded result (or ref) may take."""

TASK_PARAM = "task_id"
"""The parameter a decorated function's task id comes from (unless ``task=`` is given)."""

CheckLike = Check | CheckSpec | str | Callable[[StepKey], str | None]
"""A check object, a built-in check (``checks.branch()`` or its spec string) or a callable."""

Checks = Sequence[CheckLike]


# -- errors -----------------------------------------------------------------------------------------


class StepInProgressError(GitledgerError):
    """Another live owner holds the step's claim; nothing was done. Try again later."""

    exit_code = EXIT_IN_PROGRESS

    def __init__(self, result: StepResult) -> None:
        super().__init__(result.message or f"{result.key} is in progress elsewhere")
        self.result = result


class StepUnconfirmedError(GitledgerError):
    """A ledger-only step was left attempting by a dead process and the policy is ``fail``."""

    exit_code = EXIT_UNCONFIRMED

    def __init__(self, result: StepResult) -> None:
        super().__init__(result.message or f"{result.key} is unconfirmed")
        self.result = result


class StepNotFinishedError(UsageError):
    """A ``with ledger.step(...)`` block that should run ended without calling ``done()``."""


class ResultNotRecordableError(UsageError):
    """The effect happened and is recorded as done, but its result could not be recorded.

    ``value`` is what the call returned (or what was passed to ``done()``); later calls are skipped
    and get None (or ``from_ref(ref)``) instead of this value.
    """

    def __init__(self, message: str, key: str, value: Any) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


# -- recording results ------------------------------------------------------------------------------


def _json_value(value: Any, path: str) -> Any:
    """``value`` as JSON data (tuples become lists), or UsageError naming the offending part."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UsageError(f"{path} is {value!r}, which JSON cannot hold")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise UsageError(f"{path} has the non-string key {k!r}; JSON objects have string keys")
            out[k] = _json_value(v, f"{path}[{k!r}]")
        return out
    if isinstance(value, list | tuple):
        return [_json_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise UsageError(f"{path} is a {type(value).__name__}, which is not JSON data")


@dataclass
class _Outcome:
    """What an effect reported, made recordable; ``problem`` says what could not be recorded."""

    value: Any
    ref: str | None
    result: Any
    problem: str | None = None

    def action_result(self) -> ActionResult:
        return ActionResult(ok=True, ref=self.ref, result=self.result)


def _make_outcome(where: str, value: Any, ref: Any, result: Any, limit: int) -> _Outcome:
    """Check the ref and result of an effect that already happened; never raises."""
    outcome = _Outcome(value, None, None)
    problems = []
    if ref is not None:
        if not isinstance(ref, str):
            problems.append(f"its ref is a {type(ref).__name__}, not a str")
        elif len(ref.encode("utf-8", "surrogatepass")) > limit:
            problems.append(f"its ref is longer than {limit} bytes")
        else:
            outcome.ref = ref
    if result is not None:
        try:
            data = _json_value(result, "the result")
            size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
            if size > limit:
                raise UsageError(f"the result is {size} bytes of JSON, more than the {limit} an entry keeps")
            outcome.result = data
        except UsageError as exc:
            problems.append(exc.message)
        except (RecursionError, ValueError, TypeError) as exc:  # e.g. a cycle: never fail the effect
            problems.append(f"the result cannot be encoded as JSON ({type(exc).__name__})")
    if problems:
        outcome.problem = (
            f"{where}: {'; '.join(problems)}. The effect is recorded as done without it, so later calls "
            "are skipped and get None (or from_ref(ref)); return JSON data (dict, list, str, int, float, "
            f"bool, None) of at most {limit} bytes, or pick what to record with ref=/from_ref="
        )
    return outcome


def _raise_for(result: StepResult) -> None:
    """Turn the statuses that are not results into exceptions."""
    if result.status == IN_PROGRESS:
        raise StepInProgressError(result)
    if result.status == UNCONFIRMED:
        raise StepUnconfirmedError(result)
    if result.status == STATUS_FAILED:  # only ActionResult(ok=False) gives this; the API never does
        raise GitledgerError(result.message or f"{result.key} failed", exit_code=result.exit_code or 1)


def _fingerprint(content: Content) -> str:
    return hashlib.sha256(content.kind.encode() + b"\0" + content.data).hexdigest()
