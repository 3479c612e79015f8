"""The narrow GitHub port the features use, and the records it answers with (no PyGithub here).

:class:`gitledger.github.client.GitHubContext` implements it over PyGithub; ``testing/fakeclient.py``
implements it in memory for fast feature tests. A method that cannot get a usable answer from GitHub
raises :class:`~gitledger.github.settings.GitHubError` (token redacted).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gitledger.core.keys import KeyRef, StepKey
    from gitledger.github.settings import GitHubError


@dataclass(frozen=True)
class PullInfo:
    """What gitledger needs to know about one pull request (from a list answer, no extra calls)."""

    number: int
    html_url: str
    state: str  # "open" or "closed"
    merged: bool
    title: str
    body: str
    head_ref: str
    head_label: str  # "owner:branch"
    base_ref: str
    labels: tuple[str, ...]
    created_at: str | None = None
    head_sha: str = ""
    base_sha: str = ""

    @property
    def status(self) -> str:
        """open, merged or closed (closed without merging)."""
        return "merged" if self.merged else self.state


@dataclass(frozen=True)
class Comment:
    """One comment of an issue or pull request."""

    id: int
    body: str
    html_url: str
    user: str = ""  # the author's login


@dataclass(frozen=True)
class IssueInfo:
    """An issue as the agent guard compares it."""

    number: int
    html_url: str
    title: str
    state: str


@dataclass(frozen=True)
class FoundPull:
    """A PR found for a key, and which evidence found it (head, label or marker)."""

    number: int
    html_url: str
    via: str


class GitHubClient(Protocol):
    """What gitledger asks of GitHub: find, list, create, close, label, comment."""

    @property
    def full_name(self) -> str: ...

    @property
    def api_url(self) -> str: ...

    @property
    def token(self) -> str:
        """The token, for a git fetch over https that must authenticate as this client does."""
        ...

    @property
    def calls(self) -> Any: ...

    def redact(self, text: str) -> str: ...

    def error(self, exc: BaseException, doing: str) -> GitHubError: ...

    def web_url(self) -> str: ...

    def clone_url(self) -> str: ...

    def default_branch(self) -> str: ...

    def iter_pulls(
        self, state: str = "all", head_branch: str | None = None, newest_first: bool = True
    ) -> Iterator[PullInfo]: ...

    def find_pull(self, step: StepKey | KeyRef, marker_scan: bool = True) -> FoundPull | None: ...

    def find_branch(self, branch: str) -> str | None: ...

    def find_comment(self, number: int, marker: str) -> str | None: ...

    def pull_commit_messages(self, number: int) -> list[str]: ...

    def comments(self, number: int) -> list[Comment]: ...

    def pull_for_head(self, head: str) -> PullInfo | None: ...

    def issues_by(self, login: str) -> list[IssueInfo]: ...

    def login(self) -> str: ...

    def create_comment(self, number: int, body: str) -> Comment: ...

    def edit_comment(self, comment_id: int, body: str) -> None: ...

    def close_pull(self, number: int) -> None: ...

    def close(self) -> None: ...


__all__ = ["Comment", "FoundPull", "GitHubClient", "IssueInfo", "PullInfo"]
