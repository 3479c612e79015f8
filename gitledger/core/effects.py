"""Side effects an agent's tool call can have on GitHub, as the agent guard sees them (pure data).

An :class:`Effect` is what a recognised tool call would do, whatever syntax asked for it
(``gh pr create``, ``gh api``, a GitHub MCP tool, a rule from ``.gitledger.yml``). Only the fields
that decide *which* artifact it is form the key; prose (titles, bodies) is kept for the
near-duplicate test (:mod:`gitledger.core.similarity`), never hashed into the key.

====== ==================== ======================================================================
kind   key                  notes
====== ==================== ======================================================================
pr     (task, repo)         one PR per task (``agent.one_pr_per_task``, default true); without a
       or (repo, head)      task, or with the rule off: one PR per head branch, in any state
comment (task, repo, target) plus a near-duplicate test on the body; a task needs to be known
issue  (task, repo)         plus a near-duplicate test on the title; a task needs to be known
push   (task, repo, branch) a push that may create a branch; pushes are idempotent by nature, the
                            guard records them and refuses a new branch when the task's PR is on
                            another one
====== ==================== ======================================================================
"""

from __future__ import annotations

from typing import NamedTuple

PR = "pr"
COMMENT = "comment"
ISSUE = "issue"
PUSH = "push"
KINDS = (PR, COMMENT, ISSUE, PUSH)

# The fields a rule in .gitledger.yml may fill for each kind (``repo`` may be OWNER/NAME or, with
# ``owner``, just NAME).
FIELDS: dict[str, tuple[str, ...]] = {
    PR: ("owner", "repo", "head", "base", "title", "body"),
    COMMENT: ("owner", "repo", "target", "body"),
    ISSUE: ("owner", "repo", "title", "body"),
    PUSH: ("owner", "repo", "branch"),
}
REQUIRED: dict[str, tuple[str, ...]] = {
    PR: ("head",),
    COMMENT: ("target", "body"),
    ISSUE: ("title",),
    PUSH: ("branch",),
}


class Effect(NamedTuple):
    """One recognised side effect. ``repo`` is OWNER/NAME or None (then: the repository of ``cwd``).

    A NamedTuple rather than a dataclass: it is defined on every agent hook call, in a tenth of the time.
    """

    kind: str
    source: str  # what asked for it, for messages: "gh pr create", "mcp__github__create_issue", ...
    repo: str | None = None
    head: str | None = None  # pr: the head branch (None: the current branch of cwd)
    base: str | None = None  # pr: the base branch (None: the repository's default)
    target: int | None = None  # comment: the issue or PR number
    branch: str | None = None  # push: the remote branch
    title: str | None = None
    body: str | None = None
    remote: str | None = None  # push: the git remote it goes to (its URL names the repository)
    cwd: str | None = None  # the directory the command runs in (after a leading ``cd``)
    problems: tuple[str, ...] = ()  # recognised, but a decisive field is unknown

    @property
    def text(self) -> str:
        """The prose compared for near-duplicates: an issue's title, a comment's body."""
        if self.kind == ISSUE:
            return self.title or ""
        if self.kind == COMMENT:
            return self.body or ""
        return ""


__all__ = ["COMMENT", "FIELDS", "ISSUE", "KINDS", "PR", "PUSH", "REQUIRED", "Effect"]
