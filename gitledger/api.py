"""The Python API: idempotency middleware for any side-effecting call.

Two ways to guard an effect, both running the step protocol of :mod:`gitledger.protocol` (the same
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
  and reusing the key with other arguments raises :class:`~gitledger.protocol.PayloadMismatchError`
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

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import math
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, Self, TypeVar, cast

from gitledger.checks import CallableCheck, Check, CheckSpec, LedgerCheck
from gitledger.config import Config
from gitledger.errors import (
    EXIT_IN_PROGRESS,
    EXIT_UNCONFIRMED,
    CheckError,
    GitledgerError,
    UsageError,
)
from gitledger.keys import Content, Names, StepKey, canonical_json, validate_name
from gitledger.ledger import INFO, Entry, Event
from gitledger.owner import Owner
from gitledger.protocol import (
    CREATED,
    IN_PROGRESS,
    STATUS_FAILED,
    UNCONFIRMED,
    ActionResult,
    Claim,
    PayloadMismatchError,
    StepPolicy,
    StepResult,
    StepRunner,
)
from gitledger.store import Intent, Store

if TYPE_CHECKING:
    from gitledger.git import GitRepo
    from gitledger.github import GitHubContext

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


# -- the store, shared safely -----------------------------------------------------------------------


class _SerialStore:
    """A store whose calls are serialised: the git store's one ``cat-file`` pipe is not thread-safe."""

    def __init__(self, store: Store) -> None:
        self.inner = store
        self._lock = threading.RLock()

    def load(self, key: str | Intent) -> Entry:
        with self._lock:
            return self.inner.load(key)

    def append(self, intent: Intent, event: Event, expected: str | None) -> str | None:
        with self._lock:
            return self.inner.append(intent, event, expected)

    def entries(self) -> Iterator[Entry]:
        with self._lock:
            return iter(list(self.inner.entries()))

    def close(self) -> None:
        with self._lock:
            self.inner.close()


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
        from gitledger.checks.local import step_env

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
        self.store = _SerialStore(store)
        self.repo = repo
        self.config = config or Config()
        self.cwd = Path(cwd or ".").resolve()
        self.github_repo = github_repo
        self.max_result = max_result
        self._owner = owner
        self._pid = os.getpid()
        self._closed = False
        self._lock = threading.Lock()
        self._runner_obj: StepRunner | None = None
        self._github: Any = None
        # a safety net for a ledger that is dropped without close(): stop its git reader anyway
        self._finalizer = weakref.finalize(self, _close_store, self.store, self._pid) if _owns else None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] = ".",
        *,
        github_repo: str | None = None,
        max_result: int = MAX_RESULT,
    ) -> Ledger:
        """Open the ledger of the git repository containing ``path``."""
        from gitledger import config as config_mod
        from gitledger.git import GitRepo
        from gitledger.gitstore import GitStore

        repo = GitRepo.discover(path)
        try:
            cfg = config_mod.load(repo.worktree)
            return cls(
                GitStore(repo, cfg.durability),
                repo=repo,
                config=cfg,
                cwd=path,
                github_repo=github_repo,
                max_result=max_result,
                _owns=True,
            )
        except BaseException:
            repo.close()
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
        github, self._github = self._github, None
        close_github = getattr(github, "close", None)
        if callable(close_github):
            close_github()
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
        step_cfg = self.config.step(step)
        leases = (lease, step_cfg.lease, self.config.lease, StepPolicy.lease)
        return StepPolicy(
            on_unconfirmed=on_unconfirmed or step_cfg.on_unconfirmed or self.config.on_unconfirmed or "fail",
            lease=next(value for value in leases if value is not None),
        )

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
        from gitledger.checks.specs import CheckEnv, parse_check

        github = self._github_context if self.repo is not None else None
        return parse_check(spec, CheckEnv(self.repo, self.cwd, github))

    def github(self) -> GitHubContext:
        """The GitHub client the GitHub checks use (:class:`gitledger.github.GitHubContext`).

        Made on first use from ``github_repo`` / ``github.repo`` in .gitledger.yml / the origin URL,
        ``GITHUB_TOKEN`` (or ``GH_TOKEN``) and ``GITHUB_API_URL``; closed with the ledger. Use it with
        :mod:`gitledger.github_actions` (``open_pull_request``, ``post_comment``) inside a step.
        """
        if self._closed:
            raise UsageError("this Ledger is closed; open a new one with gitledger.Ledger.open()")
        return cast("GitHubContext", self._github_context())

    def _github_context(self) -> Any:
        with self._lock:
            if self._github is None:
                from gitledger.github import GitHubContext  # PyGithub: only when a GitHub check runs

                self._github = GitHubContext.for_config(self.config, self.github_repo, self.repo)
            return self._github

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


def _close_store(store: _SerialStore, pid: int) -> None:
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
