"""Keys of decorated calls: arguments bound by signature, hashed as canonical JSON (:mod:`gitledger.api`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitledger.api.results import TASK_PARAM, P, _fingerprint
from gitledger.core.errors import (
    UsageError,
)
from gitledger.core.keys import Content, Names, StepKey, canonical_json, validate_name

if TYPE_CHECKING:
    from gitledger.api.ledger import Ledger

    pass

# -- the decorator form -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _CallKey:
    """How a decorated function's calls become step keys."""

    name: str
    signature: inspect.Signature
    step: str
    task: str | None
    task_param: str | None
    include: frozenset[str] | None
    exclude: frozenset[str]
    key: str | Callable[..., str] | None

    @classmethod
    def build(
        cls,
        func: Callable[..., Any],
        step: str,
        task: str | None,
        include: Iterable[str] | None,
        exclude: Iterable[str] | None,
        key: str | Callable[..., str] | None,
    ) -> _CallKey:
        name = getattr(func, "__qualname__", None) or repr(func)
        validate_name(step, "step")
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"cannot read the signature of {name}: {exc}") from exc
        params = signature.parameters
        if isinstance(include, str) or isinstance(exclude, str):
            raise UsageError(f"{name}: include= and exclude= take a list of argument names, not a string")
        if include is not None and exclude is not None:
            raise UsageError(f"{name}: pass include= or exclude=, not both")
        chosen = frozenset(include) if include is not None else None
        dropped = frozenset(exclude or ())
        unknown = sorted(((chosen or frozenset()) | dropped) - set(params))
        if unknown:
            raise UsageError(
                f"{name} has no argument named {', '.join(map(repr, unknown))}; its arguments are "
                f"{', '.join(params) or 'none'}"
            )
        task_param = None
        if task is not None:
            validate_name(task, "task")
        elif TASK_PARAM in params:
            task_param = TASK_PARAM
        else:
            raise UsageError(
                f"{name} has no {TASK_PARAM!r} argument to take the task id from; add one, or pass "
                "task='...' to @ledger.idempotent"
            )
        if key is not None and not (callable(key) or isinstance(key, str)):
            raise UsageError(f"{name}: key= must be a string or a callable of the arguments")
        return cls(name, signature, step, task, task_param, chosen, dropped, key)

    def derive(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], names: Names
    ) -> tuple[StepKey, str | None]:
        bound = self.signature.bind(*args, **kwargs)  # a TypeError exactly like calling the function
        bound.apply_defaults()
        arguments = bound.arguments
        if self.task_param is not None:
            task = arguments[self.task_param]
            if not isinstance(task, str):
                raise UsageError(
                    f"{self.name}(): {self.task_param} must be a str (the task id), not {type(task).__name__}"
                )
        else:
            assert self.task is not None
            task = self.task
        counted: dict[str, Any] = {}
        for arg, value in arguments.items():
            if arg == self.task_param or arg in self.exclude:
                continue
            if self.include is not None and arg not in self.include:
                continue
            try:
                canonical_json(value, arg)
            except UsageError as exc:
                raise UsageError(
                    f"{self.name}(): {exc.message} (e.g. @ledger.idempotent(..., exclude=[{arg!r}]))"
                ) from None
            counted[arg] = value
        content = Content.args(counted)
        if self.key is None:
            return StepKey.derive(task, self.step, content, names), None
        explicit = self.key(*args, **kwargs) if callable(self.key) else self.key
        if not isinstance(explicit, str):
            raise UsageError(f"{self.name}(): key= returned a {type(explicit).__name__}; return a str")
        validate_name(explicit, "key")
        return StepKey.derive(task, self.step, Content.explicit_key(explicit), names), _fingerprint(content)


_ATTR = "__gitledger__"


def key_of(func: Callable[P, Any], /, *args: P.args, **kwargs: P.kwargs) -> StepKey:
    """The step key a call of an ``@ledger.idempotent`` function would use (nothing is run)."""
    found = getattr(func, _ATTR, None)
    if found is None:
        raise UsageError(f"{getattr(func, '__qualname__', func)!r} is not an @ledger.idempotent function")
    ledger: Ledger = found[0]
    call_key: _CallKey = found[1]
    step_key, _ = call_key.derive(args, kwargs, ledger.names)
    return step_key
