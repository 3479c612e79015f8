"""Task resolution for the agent guard: option, GITLEDGER_TASK, git config, branch pattern (real git)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitledger.core.errors import ConfigError
from gitledger.core.task import TaskChoice, choose_task, pattern_problem, task_from_branch
from gitledger.features.agent.task import resolve_task
from testing.repos import git

PATTERN = "agent/(?P<task>[^/]+)"


def test_the_order_of_the_sources() -> None:
    assert choose_task("a", "b", "c", "agent/d", PATTERN) == TaskChoice("a", "option")
    assert choose_task(None, "b", "c", "agent/d", PATTERN) == TaskChoice("b", "env")
    assert choose_task(None, " ", "c", "agent/d", PATTERN) == TaskChoice("c", "git-config")
    assert choose_task(None, None, None, "agent/d", PATTERN) == TaskChoice("d", "branch")
    assert choose_task(None, None, None, "feature/d", PATTERN) is None
    assert choose_task(None, None, None, "agent/d", None) is None


def test_branch_patterns() -> None:
    assert task_from_branch("agent/issue-42/retry-2", PATTERN) == "issue-42"
    assert task_from_branch("x/agent/issue-42", PATTERN) is None  # anchored at the start
    assert pattern_problem("agent/(.+)") is not None
    assert pattern_problem("agent/(?P<task>") is not None
    assert pattern_problem(PATTERN) is None


def test_resolution_in_a_real_repository(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITLEDGER_TASK", raising=False)
    assert resolve_task(repo, env={}) is None
    git("checkout", "-q", "-b", "agent/ISSUE-7", cwd=repo)
    assert resolve_task(repo, env={}) is None  # no pattern configured
    (repo / ".gitledger.yml").write_text(f'agent:\n  task_branch: "{PATTERN}"\n')
    assert resolve_task(repo, env={}) == TaskChoice("ISSUE-7", "branch")
    git("config", "gitledger.task", "T-9", cwd=repo)
    assert resolve_task(repo, env={}) == TaskChoice("T-9", "git-config")
    assert resolve_task(repo, env={"GITLEDGER_TASK": "T-1"}) == TaskChoice("T-1", "env")
    assert resolve_task(repo, "T-0", env={"GITLEDGER_TASK": "T-1"}) == TaskChoice("T-0", "option")


def test_a_bad_pattern_is_a_config_error(repo: Path) -> None:
    (repo / ".gitledger.yml").write_text('agent:\n  task_branch: "agent/(.+)"\n')
    with pytest.raises(ConfigError, match="no group named 'task'"):
        resolve_task(repo, env={})


def test_outside_a_repository_only_the_environment_counts(tmp_path: Path) -> None:
    assert resolve_task(tmp_path, env={}) is None
    assert resolve_task(tmp_path, env={"GITLEDGER_TASK": "T"}) == TaskChoice("T", "env")
