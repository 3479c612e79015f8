"""The :class:`Ledger`: a gitledger ledger used from Python (see :mod:`gitledger.api`)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, cast

from gitledger.api.context import StepContext
from gitledger.api.decorator import _ATTR, _CallKey
from gitledger.api.results import (
    MAX_RESULT,
    CheckLike,
    Checks,
    P,
    R,
    ResultNotRecordableError,
    _fingerprint,
    _make_outcome,
    _Outcome,
    _raise_for,
)
from gitledger.config import Config
from gitledger.core.checks import CallableCheck, Check, CheckSpec, LedgerCheck
from gitledger.core.errors import (
    CheckError,
    GitledgerError,
    UsageError,
)
from gitledger.core.keys import Content, Names, StepKey, validate_name
from gitledger.core.owner import Owner
from gitledger.core.policy import StepPolicy
from gitledger.core.protocol import (
    CREATED,
    ActionResult,
    Claim,
    StepResult,
    StepRunner,
)
from gitledger.core.store import SerialStore, Store

if TYPE_CHECKING:
    from gitledger.git.repo import GitRepo
    from gitledger.github.client import GitHubContext

# -- the ledger -------------------------------------------------------------------------------------


class Ledger:
    """A gitledger ledger used from Python.

    ``Ledger.open(path)`` opens the ledger inside the git repository at ``path`` (its checks,
    ``.gitledger.yml`` defaults and GitHub settings included); ``Ledger(store=MemoryStore())`` runs
    against a store of your own (tests: only ``ledger``, ``file:`` and ``cmd:`` checks and callables
    need no repository). Close it (or use ``with``) to stop its ``git cat-file`` reader.
    """

    def __init__(
        self,
        store: Store,
        *,
        repo: GitRepo | None = None,
        config: Config | None = None,
        cwd: str | os.PathLike[str] | None = None,
        github_repo: str | None = None,
        max_result: int = MAX_RESULT,
        owner: Owner | None = None,
        _owns: bool = False,
    ) -> None:
        if max_result <= 0:
            raise UsageError(f"max_result must be a positive number of bytes, not {max_result!r}")
        from gitledger.session import Session

        self.session = Session(
            SerialStore(store), config or Config(), repo, Path(cwd or ".").resolve(), github_repo
        )
        self.max_result = max_result
        self._owner = owner
        self._pid = os.getpid()
        self._closed = False
        self._lock = threading.Lock()
        self._runner_obj: StepRunner | None = None
        # a safety net for a ledger that is dropped without close(): stop its git reader anyway
        self._finalizer = weakref.finalize(self, _close_store, self.store, self._pid) if _owns else None

    @property
    def store(self) -> SerialStore:
        return cast(SerialStore, self.session.store)

    @property
    def repo(self) -> GitRepo | None:
        return self.session.repo

    @property
    def config(self) -> Config:
        return self.session.config

    @property
    def cwd(self) -> Path:
        return self.session.cwd

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] = ".",
        *,
        github_repo: str | None = None,
        max_result: int = MAX_RESULT,
    ) -> Ledger:
        """Open the ledger of the git repository containing ``path``."""
        from gitledger.session import Session

        session = Session.open(path, github_repo)
        try:
            return cls(
                session.store,
                repo=session.repo,
                config=session.config,
                cwd=path,
                github_repo=github_repo,
                max_result=max_result,
                _owns=True,
            )
        except BaseException:
            session.close()
            raise

    # -- lifecycle ---------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the git reader process and the GitHub client; the ledger cannot be used afterwards."""
        if self._closed:
            return
        self._closed = True
        self.session.close_github()
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "memory" if self.repo is None else (self.repo.worktree or self.repo.git_dir)
        return f"<Ledger {where}{' closed' if self._closed else ''}>"

    def _runner(self) -> StepRunner:
        if self._closed:
            raise UsageError("this Ledger is closed; open a new one with gitledger.Ledger.open()")
        if os.getpid() != self._pid:
            raise UsageError(
                f"this Ledger was opened by process {self._pid}, not this one ({os.getpid()}): claims "
                "carry their process, so open a new Ledger in each process (e.g. after fork)"
            )
        with self._lock:
            if self._runner_obj is None:
                self._runner_obj = StepRunner(self.store, self._owner)
            return self._runner_obj

    # -- keys, checks and policies -----------------------------------------------------------------

    @property
    def names(self) -> Names:
        """The prefixes of derived names (branch, label), from .gitledger.yml."""
        return self.config.names

    def key(
        self,
        task: str,
        step: str,
        *,
        content: str | bytes | None = None,
        args: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> StepKey:
        """The step key (and derived names: branch, label, trailer, marker) of a step."""
        return self._derive(task, step, content, args, key)[0]

    def _derive(
        self,
        task: str,
        step: str,
        content: str | bytes | None,
        args: Mapping[str, Any] | None,
        key: str | None,
    ) -> tuple[StepKey, str | None]:
        if content is not None and args is not None:
            raise UsageError("pass content= or args=, not both")
        payload: Content | None = None
        if isinstance(content, str):
            payload = Content.text(content)
        elif isinstance(content, bytes):
            payload = Content.raw(content)
        elif content is not None:
            kind = type(content).__name__
            raise UsageError(f"content= must be str or bytes, not {kind}; pass data as args=")
        if args is not None:
            if not isinstance(args, Mapping):
                kind = type(args).__name__
                raise UsageError(f"args= must be a mapping of argument names to values, not {kind}")
            payload = Content.args(args)
        if key is None:
            return StepKey.derive(task, step, payload, self.names), None
        if not isinstance(key, str):
            raise UsageError(f"key= must be a str, not {type(key).__name__}")
        validate_name(key, "key")
        step_key = StepKey.derive(task, step, Content.explicit_key(key), self.names)
        return step_key, _fingerprint(payload) if payload is not None else None

    def _policy(self, step: str, on_unconfirmed: str | None, lease: float | None) -> StepPolicy:
        return self.session.policy(step, on_unconfirmed, lease)

    def checks(self, step: str, checks: Checks | None = None) -> list[Check]:
        """Bind ``checks`` (default: the step's checks in .gitledger.yml, else ``ledger``)."""
        if checks is None:
            return [self._bind(spec) for spec in self.config.step(step).checks or ("ledger",)]
        if isinstance(checks, str | CheckSpec) or callable(checks) or hasattr(checks, "find"):
            raise UsageError(f"checks= takes a list of checks, e.g. checks=[{checks!r}]")
        bound = [self._bind(check) for check in checks]
        return bound or [LedgerCheck()]

    def _bind(self, check: CheckLike) -> Check:
        if isinstance(check, CheckSpec):
            return self._bind_spec(check.spec)
        if isinstance(check, str):
            return self._bind_spec(check)
        if all(hasattr(check, attr) for attr in ("find", "spec", "queries_reality")):
            return cast(Check, check)
        if callable(check):
            return CallableCheck(_guard_check(check), spec=f"python:{_name(check)}")
        raise UsageError(
            f"{check!r} is not a check: use gitledger.checks.branch(), .file(PATH), ..., a spec string, "
            "an object with spec/queries_reality/find, or a callable (StepKey) -> str | None"
        )

    def _bind_spec(self, spec: str) -> Check:
        return self.session.check(spec)

    def github(self) -> GitHubContext:
        """The GitHub client the GitHub checks use (:class:`gitledger.github.GitHubContext`).

        Made on first use from ``github_repo`` / ``github.repo`` in .gitledger.yml / the origin URL,
        ``GITHUB_TOKEN`` (or ``GH_TOKEN``) and ``GITHUB_API_URL``; closed with the ledger. Use it with
        :mod:`gitledger.github_actions` (``open_pull_request``, ``post_comment``) inside a step.
        """
        if self._closed:
            raise UsageError("this Ledger is closed; open a new one with gitledger.Ledger.open()")
        return self.session.github()

    # -- the two forms -----------------------------------------------------------------------------

    def step(
        self,
        task: str,
        step: str,
        *,
        content: str | bytes | None = None,
        args: Mapping[str, Any] | None = None,
        checks: Checks | None = None,
        key: str | None = None,
        on_unconfirmed: str | None = None,
        lease: float | None = None,
    ) -> StepContext:
        """A guarded step for a ``with`` (or ``async with``) block; see :class:`StepContext`.

        The key is derived from ``task``, ``step`` and ``content`` (text or bytes) or ``args`` (JSON
        data, canonically encoded). With ``key=``, that string is the identity and ``content``/``args``
        are compared: reusing the key with other content raises PayloadMismatchError.
        """
        step_key, fingerprint = self._derive(task, step, content, args, key)
        return StepContext(
            self, step_key, self.checks(step, checks), self._policy(step, on_unconfirmed, lease), fingerprint
        )

    def idempotent(
        self,
        *,
        step: str,
        checks: Checks | Callable[..., Checks] | None = None,
        task: str | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        key: str | Callable[..., str] | None = None,
        on_unconfirmed: str | None = None,
        lease: float | None = None,
        ref: Callable[[Any], str | None] | None = None,
        from_ref: Callable[[str], Any] | None = None,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Make a function idempotent: one effect per (task, step, counted arguments).

        - ``step``: the step name (part of the key; the function's name is not).
        - ``task``: the task id; default: the function's ``task_id`` argument.
        - ``include`` / ``exclude``: the arguments that count for the key (default: all but
          ``task_id``). Arguments must be JSON-like (str, int, float, bool, None, list, dict).
        - ``key``: an explicit key (a str, or a callable taking the function's arguments); the
          counted arguments are then a fingerprint and a different payload raises
          PayloadMismatchError.
        - ``checks``: how to find an effect that exists without a ledger record (a list, or a callable
          taking the function's arguments and returning the list); default: the step's checks in
          .gitledger.yml, else ``ledger`` only.
        - ``on_unconfirmed`` (fail | retry | skip) and ``lease``: as for ``gitledger run-step``.
        - ``ref``: picks the recorded ref from the return value (e.g. a URL); ``from_ref`` rebuilds
          the return value from a ref when none was recorded (a check found the effect).

        The return value is recorded (JSON, at most ``max_result`` bytes) and returned to every later
        call without calling the function. ``async def`` functions are supported.
        """

        def decorate(func: Callable[P, R]) -> Callable[P, R]:
            call_key = _CallKey.build(func, step, task, include, exclude, key)
            policy = self._policy(step, on_unconfirmed, lease)

            def prepare(
                args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> tuple[StepKey, str | None, list[Check]]:
                step_key, fingerprint = call_key.derive(args, kwargs, self.names)
                wanted = checks(*args, **kwargs) if callable(checks) else checks
                return step_key, fingerprint, self.checks(step, wanted)

            def outcome(step_key: StepKey, value: Any) -> _Outcome:
                try:
                    picked = ref(value) if ref is not None else None
                except Exception as exc:  # the effect happened: record it whatever ref= does
                    picked = f"<ref= raised {type(exc).__name__}: {exc}>"
                where = f"{call_key.name}() (step {step_key.key})"
                return _make_outcome(where, value, picked, value, self.max_result)

            def returned(step_key: StepKey, result: StepResult, made: _Outcome | None) -> Any:
                if result.status == CREATED and made is not None:
                    if made.problem:
                        raise ResultNotRecordableError(made.problem, step_key.key, made.value)
                    return made.value
                _raise_for(result)
                if result.result is not None:
                    return result.result
                if from_ref is not None and result.ref is not None:
                    return from_ref(result.ref)
                return None

            if inspect.iscoroutinefunction(func):
                async_func = cast(Callable[..., Awaitable[Any]], func)

                @functools.wraps(func)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    step_key, fingerprint, bound = prepare(args, kwargs)
                    runner = self._runner()
                    started = await asyncio.to_thread(runner.start, step_key, bound, policy, fingerprint)
                    if not isinstance(started, Claim):
                        return returned(step_key, started, None)
                    try:
                        value = await async_func(*args, **kwargs)
                    except BaseException as exc:
                        await asyncio.to_thread(runner.fail, started, exc)
                        raise
                    made = outcome(step_key, value)
                    result = await asyncio.to_thread(runner.finish, started, made.action_result())
                    return returned(step_key, result, made)

                setattr(run_async, _ATTR, (self, call_key))
                return cast(Callable[P, R], run_async)

            @functools.wraps(func)
            def run(*args: P.args, **kwargs: P.kwargs) -> R:
                step_key, fingerprint, bound = prepare(args, kwargs)
                made: list[_Outcome] = []

                def action() -> ActionResult:
                    made.append(outcome(step_key, func(*args, **kwargs)))
                    return made[0].action_result()

                result = self._runner().run(step_key, bound, action, policy, fingerprint)
                return cast(R, returned(step_key, result, made[0] if made else None))

            setattr(run, _ATTR, (self, call_key))
            return run

        return decorate


def _close_store(store: SerialStore, pid: int) -> None:
    if os.getpid() == pid:  # never close a parent's reader from a forked child
        store.close()


def _name(func: Any) -> str:
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or type(func).__name__)


def _guard_check(func: Callable[[StepKey], str | None]) -> Callable[[StepKey], str | None]:
    """A custom check that fails loudly: an exception or a wrong answer is 'cannot tell', never 'absent'."""
    name = _name(func)

    def find(step: StepKey) -> str | None:
        try:
            found = func(step)
        except GitledgerError:
            raise
        except Exception as exc:
            raise CheckError(f"check {name} raised {type(exc).__name__}: {exc}") from exc
        if found is not None and not isinstance(found, str):
            raise CheckError(
                f"check {name} returned a {type(found).__name__}; return the found ref as a str, or None"
            )
        return found

    return find


__all__ = ["Ledger"]
