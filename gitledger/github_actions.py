"""Public face of :mod:`gitledger.github.writes` (open a pull request, post a comment: look first).

Kept for users who were told to import ``gitledger.github_actions`` (docs/python-api.md); the name
predates the layout, and it has nothing to do with GitHub Actions. Nothing inside gitledger imports it.
"""

from gitledger.github.writes import (
    CREATED,
    EXISTING,
    GitHubError,
    Outcome,
    ensure_label,
    open_pull_request,
    post_comment,
    step_from_env,
    with_marker,
)

__all__ = [
    "CREATED",
    "EXISTING",
    "GitHubError",
    "Outcome",
    "ensure_label",
    "open_pull_request",
    "post_comment",
    "step_from_env",
    "with_marker",
]
