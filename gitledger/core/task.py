"""Which task an agent's tool call belongs to: the pure part of task resolution.

The agent guard keys every effect on a *task* (the unit of work an orchestrator gave the agent: an
issue, a ticket). The agent's ``session_id`` is never the task: it changes when a crashed agent is
started again, which is precisely when the task must stay the same (docs/agents.md). The order:

1. an explicit task (a command-line option of the caller);
2. ``GITLEDGER_TASK`` in the environment (set by the supervisor that starts the agent);
3. ``git config gitledger.task`` in the repository (set by an orchestrator per worktree);
4. the current branch matched against a pattern from ``.gitledger.yml`` (``agent.task_branch``), a
   regular expression with a group named ``task`` that must match at the start of the branch name,
   e.g. ``agent/(?P<task>[^/]+)`` turns ``agent/issue-42`` into ``issue-42``.

Reading the environment, git and the configuration is the caller's job
(:mod:`gitledger.features.agent.task`); this module only chooses.
"""

from __future__ import annotations

import re
from typing import NamedTuple

ENV_VAR = "GITLEDGER_TASK"
GIT_CONFIG_KEY = "gitledger.task"
EXAMPLE_PATTERN = "agent/(?P<task>[^/]+)"


class TaskChoice(NamedTuple):
    """A resolved task and where it came from (``option``, ``env``, ``git-config`` or ``branch``)."""

    task: str
    source: str


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot serve as a task branch pattern, or None when it can."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return f"task branch pattern {pattern!r} is not a valid regular expression ({exc})"
    if "task" not in compiled.groupindex:
        return f"task branch pattern {pattern!r} has no group named 'task'; write e.g. {EXAMPLE_PATTERN!r}"
    return None


def task_from_branch(branch: str | None, pattern: str | None) -> str | None:
    """The task the branch name gives under ``pattern`` (anchored at the start), or None."""
    if not branch or not pattern or pattern_problem(pattern):
        return None
    match = re.match(pattern, branch)
    if match is None:
        return None
    task = match.group("task")
    return task.strip() or None if isinstance(task, str) else None


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def choose_task(
    explicit: str | None,
    env_value: str | None,
    git_config_value: str | None,
    branch: str | None,
    pattern: str | None,
) -> TaskChoice | None:
    """The first task in the documented order, or None when no source names one."""
    for value, source in ((explicit, "option"), (env_value, "env"), (git_config_value, "git-config")):
        cleaned = _clean(value)
        if cleaned is not None:
            return TaskChoice(cleaned, source)
    from_branch = task_from_branch(branch, pattern)
    return TaskChoice(from_branch, "branch") if from_branch else None


__all__ = [
    "ENV_VAR",
    "EXAMPLE_PATTERN",
    "GIT_CONFIG_KEY",
    "TaskChoice",
    "choose_task",
    "pattern_problem",
    "task_from_branch",
]
