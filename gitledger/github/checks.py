"""GitHub checks: ``github-pr``, ``github-branch`` and ``github-comment:N``.

All three read **list endpoints** (pulls, issues filtered by label, issue comments) and the branch
endpoint, never the search API: the search index is eventually consistent and can miss a PR created
seconds ago, which is exactly the PR a crashed agent needs to find before it opens another one. List
endpoints read the primary database, so an effect that GitHub acknowledged is visible to the next
query. Every list is read to its last page.

Each check returns the artifact's html URL (the ref recorded in the ledger), None when GitHub positively
says it is absent, and raises :class:`~gitledger.errors.CheckError` (token redacted) when GitHub cannot be
queried: not knowing is never taken as absent.

API calls per ``find`` (see docs/github.md):

- ``github-pr``: 1 (head branch) + 1 per 100 PRs carrying the key's label + 1 per 100 PRs of the
  repository for the marker scan, which runs only when the first two found nothing. Found by head: 1.
- ``github-branch``: 1 (2 when GitHub's 404 does not say "Branch not found").
- ``github-comment:N``: 1 per 100 comments of issue/PR N.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitledger.core.errors import CheckError
from gitledger.core.keys import StepKey
from gitledger.github.port import GitHubClient
from gitledger.github.settings import GitHubError


@dataclass
class PullRequestCheck:
    """A PR in any state (open, closed, merged) for the key: by head branch, label, or body marker.

    A closed PR counts as existing: closing it was somebody's decision about this intent, and opening
    it again for the same key would undo that decision (the Renovate/Dependabot rule).
    """

    ctx: GitHubClient
    marker_scan: bool = True
    spec: str = "github-pr"
    queries_reality: bool = True

    def find(self, step: StepKey) -> str | None:
        try:
            found = self.ctx.find_pull(step, self.marker_scan)
        except GitHubError as exc:
            raise CheckError(exc.message) from exc
        return found.html_url if found else None


@dataclass
class BranchCheck:
    """The key's convention branch exists in the GitHub repository."""

    ctx: GitHubClient
    spec: str = "github-branch"
    queries_reality: bool = True

    def find(self, step: StepKey) -> str | None:
        try:
            return self.ctx.find_branch(step.branch)
        except GitHubError as exc:
            raise CheckError(exc.message) from exc


@dataclass
class CommentCheck:
    """A comment on issue or PR ``number`` carries the key's marker."""

    ctx: GitHubClient
    number: int
    queries_reality: bool = True

    @property
    def spec(self) -> str:
        return f"github-comment:{self.number}"

    def find(self, step: StepKey) -> str | None:
        try:
            return self.ctx.find_comment(self.number, step.marker)
        except GitHubError as exc:
            raise CheckError(exc.message) from exc


__all__ = ["BranchCheck", "CommentCheck", "PullRequestCheck"]
