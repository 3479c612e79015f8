"""Existence checks: the interface the step protocol uses to query reality.

A check answers one question for a step: does the step's effect already exist? :meth:`Check.find`
returns a reference to the artifact it found (a URL, a commit, a path), or None when the effect is
absent. When reality cannot be queried (network down, bad token, a check command that errs) it raises
:class:`~gitledger.core.errors.CheckError`: not knowing is never taken as absent.

``queries_reality`` is False for the ``ledger`` check, whose only evidence is the ledger itself; a
step with only such checks that was left attempting by a dead owner is *unconfirmed*.

Implementations live in :mod:`gitledger.git.checks` (git, files, commands) and
:mod:`gitledger.github.checks` (PyGithub, imported only when a GitHub check is used); spec strings are
parsed by :mod:`gitledger.session`.

For the Python API (:mod:`gitledger.api`) this module also offers factories for the built-in checks:
:func:`branch`, :func:`trailer`, :func:`file`, :func:`command`, :func:`github_pr`,
:func:`github_branch`, :func:`github_comment` and :func:`ledger`. They return a :class:`CheckSpec`
that names the check; a :class:`~gitledger.api.Ledger` binds it to its repository when a step uses
it, so they can be written before any repository is open. A custom check is any object with
``spec``, ``queries_reality`` and ``find``, or simply a callable ``(StepKey) -> str | None``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gitledger.core.errors import UsageError
from gitledger.core.keys import StepKey

SPEC_HELP = (
    "ledger, branch[:REMOTE], trailer, file:PATH, cmd:SHELL, github-pr, github-branch, github-comment:NUMBER"
)
# A remote name or path; never starting with '-', which git would read as an option (the check runs
# 'git ls-remote ... REMOTE', and reconcile takes specs from the ledger, which others can write).
_REMOTE_RE = re.compile(r"^[A-Za-z0-9._/][A-Za-z0-9._/-]*$")


def is_github(spec: str) -> bool:
    return spec.startswith("github-")


def validate_spec(spec: str) -> str | None:
    """A reason why ``spec`` is not a valid check spec, or None (for config validation, no I/O)."""
    name, sep, arg = spec.partition(":")
    if (name in ("ledger", "trailer", "github-pr", "github-branch") and not sep) or (
        name == "branch" and (not sep or _REMOTE_RE.match(arg))
    ):
        return None
    if name in ("file", "cmd") and arg.strip():
        return None
    if name == "github-comment" and arg.isdigit() and int(arg) > 0:
        return None
    return f"unknown check spec {spec!r}; use one of: {SPEC_HELP}"


class Check(Protocol):
    @property
    def spec(self) -> str:
        """How users name this check (``branch:origin``); recorded with the outcome."""
        ...

    @property
    def queries_reality(self) -> bool:
        """False only when the ledger is the only evidence (the ``ledger`` check)."""
        ...

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


@dataclass(frozen=True)
class CheckSpec:
    """A built-in check named by its spec string (``branch:origin``, ``file:out.txt``, ...).

    It is not a :class:`Check` yet: the ledger that runs the step binds it to its repository.
    """

    spec: str

    def __post_init__(self) -> None:
        reason = validate_spec(self.spec)
        if reason is not None:
            raise UsageError(reason)


def ledger() -> LedgerCheck:
    """Only the ledger is evidence: a step left attempting by a dead process is *unconfirmed*."""
    return LedgerCheck()


def branch(remote: str | None = None) -> CheckSpec:
    """The key's convention branch exists locally, as a remote-tracking branch, or on ``remote``."""
    return CheckSpec(f"branch:{remote}" if remote else "branch")


def trailer() -> CheckSpec:
    """A commit on any local or remote-tracking branch carries ``Gitledger-Key: <key>``."""
    return CheckSpec("trailer")


def file(path: str | os.PathLike[str]) -> CheckSpec:
    """A file exists; relative to the repository's top. ``{key}`` and ``$VARS`` are expanded."""
    return CheckSpec(f"file:{os.fspath(path)}")


def command(shell: str) -> CheckSpec:
    """A shell command decides: exit 0 = exists (stdout is the ref), 1 = absent, other = error."""
    return CheckSpec(f"cmd:{shell}")


def github_pr() -> CheckSpec:
    """A pull request for the key exists on GitHub (by head branch, label or body marker)."""
    return CheckSpec("github-pr")


def github_branch() -> CheckSpec:
    """The key's convention branch exists in the GitHub repository."""
    return CheckSpec("github-branch")


def github_comment(number: int) -> CheckSpec:
    """A comment carrying the key's marker exists on issue or pull request ``number``."""
    if isinstance(number, bool) or not isinstance(number, int) or number <= 0:
        raise UsageError(f"github_comment() needs a positive issue or pull request number, not {number!r}")
    return CheckSpec(f"github-comment:{number}")


__all__ = [
    "SPEC_HELP",
    "CallableCheck",
    "Check",
    "CheckSpec",
    "LedgerCheck",
    "branch",
    "command",
    "file",
    "github_branch",
    "github_comment",
    "github_pr",
    "is_github",
    "ledger",
    "trailer",
    "validate_spec",
]
