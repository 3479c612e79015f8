"""Check spec strings (``--check SPEC`` and ``checks:`` in .gitledger.yml) → check objects.

``ledger``, ``branch[:REMOTE]``, ``trailer``, ``file:PATH``, ``cmd:SHELL``, ``github-pr``,
``github-branch``, ``github-comment:NUMBER``. GitHub checks import PyGithub only when used.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitledger.checks import Check, LedgerCheck
from gitledger.errors import UsageError
from gitledger.git import GitRepo
from gitledger.keys import StepKey

SPEC_HELP = (
    "ledger, branch[:REMOTE], trailer, file:PATH, cmd:SHELL, github-pr, github-branch, github-comment:NUMBER"
)
# A remote name or path; never starting with '-', which git would read as an option (the check runs
# 'git ls-remote ... REMOTE', and reconcile takes specs from the ledger, which others can write).
_REMOTE_RE = re.compile(r"^[A-Za-z0-9._/][A-Za-z0-9._/-]*$")


@dataclass
class CheckEnv:
    """What checks need from their surroundings."""

    repo: GitRepo | None  # None: only checks that need no repository (ledger, file, cmd)
    cwd: Path
    github: Callable[[], Any] | None = None  # returns a gitledger.github.GitHubContext, lazily


def parse_check(spec: str, env: CheckEnv) -> Check:
    reason = validate_spec(spec)
    if reason is not None:
        raise UsageError(reason)
    name, _, arg = spec.partition(":")
    if name == "ledger":
        return LedgerCheck()
    # imported here: a ledger-only step (the default, and every fast-path skip of one) never needs them
    from gitledger.checks.local import BranchCheck, CommandCheck, FileCheck, TrailerCheck

    base = env.repo.worktree or env.cwd if env.repo is not None else env.cwd
    if name == "file":
        return FileCheck(arg, base)
    if name == "cmd":
        return CommandCheck(arg, base)
    if env.repo is None:
        raise UsageError(f"check {spec!r} needs a git repository; run it inside one (or pass its path)")
    if name == "branch":
        return BranchCheck(env.repo, arg or None)
    if name == "trailer":
        return TrailerCheck(env.repo)
    if env.github is None:
        raise UsageError(f"check {spec!r} needs GitHub settings, which are not available here")
    return LazyCheck(spec, lambda: _github_check(name, arg, env))


def _github_check(name: str, arg: str, env: CheckEnv) -> Check:
    from gitledger.checks.github import BranchCheck as GitHubBranchCheck
    from gitledger.checks.github import CommentCheck, PullRequestCheck

    assert env.github is not None
    ctx = env.github()
    if name == "github-pr":
        return PullRequestCheck(ctx)
    if name == "github-branch":
        return GitHubBranchCheck(ctx)
    return CommentCheck(ctx, int(arg))


@dataclass
class LazyCheck:
    """A check built on first use, so a step that is already done never imports PyGithub."""

    spec: str
    build: Callable[[], Check]
    queries_reality: bool = True
    _check: Check | None = None

    def find(self, step: StepKey) -> str | None:
        if self._check is None:
            self._check = self.build()
        return self._check.find(step)


def parse_checks(specs: Sequence[str], env: CheckEnv) -> list[Check]:
    checks = [parse_check(spec, env) for spec in specs]
    return checks or [LedgerCheck()]


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
