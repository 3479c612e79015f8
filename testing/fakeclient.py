"""An in-memory GitHub for feature tests: implements :class:`gitledger.github.port.GitHubClient`.

The features (checks, the audit, the agent guard) talk to GitHub only through that port, so their
logic is tested here in milliseconds, in process, with no HTTP. What the real client does over HTTP
(retries, rate limits, pagination, redaction of the token in PyGithub's errors) is tested against the
HTTP fake (``tests/fakegithub.py``) with the real PyGithub client.

It answers like GitHub where the features depend on it: the head filter of the pull list compares
``owner:branch``, closed and merged pull requests are listed in state ``all``, comments are listed
oldest first, and a write can be made to fail (``fail_next``) with an error the port promises:
:class:`~gitledger.github.settings.GitHubError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from gitledger.core.keys import KeyRef, StepKey
from gitledger.github.port import Comment, FoundPull, IssueInfo, PullInfo
from gitledger.github.settings import GitHubError

WEB = "https://github.test"


@dataclass
class Calls:
    """Counts of port calls by name, like :class:`gitledger.github.transport.ApiCalls` counts HTTP."""

    by_method: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {"total": sum(self.by_method.values()), "by_method": dict(self.by_method)}


@dataclass
class FakeClient:
    """One repository's pull requests, issues, comments and branches, in memory."""

    full_name: str = "acme/widgets"
    token: str = "fake-token"
    login_name: str = "agent-bot"
    pulls: dict[int, PullInfo] = field(default_factory=dict)
    issues: dict[int, IssueInfo] = field(default_factory=dict)
    comment_lists: dict[int, list[Comment]] = field(default_factory=dict)
    commit_messages: dict[int, list[str]] = field(default_factory=dict)
    branches: set[str] = field(default_factory=set)
    calls: Calls = field(default_factory=Calls)
    failures: dict[str, str] = field(default_factory=dict)  # method name -> message of its next failure
    _next_number: int = 1
    _next_comment: int = 1000

    # -- setting up --------------------------------------------------------------------------------

    def add_pull(
        self,
        head: str,
        *,
        title: str = "",
        body: str = "",
        base: str = "main",
        state: str = "open",
        merged: bool = False,
        labels: tuple[str, ...] = (),
        messages: tuple[str, ...] = (),
    ) -> PullInfo:
        number = self._number()
        pull = PullInfo(
            number=number,
            html_url=f"{self.web_url()}/pull/{number}",
            state=state,
            merged=merged,
            title=title,
            body=body,
            head_ref=head,
            head_label=f"{self.owner}:{head}",
            base_ref=base,
            labels=labels,
            created_at=f"2026-01-01T00:00:{number:02d}+00:00",
            head_sha=f"{number:040x}",
            base_sha="0" * 40,
        )
        self.pulls[number] = pull
        self.commit_messages[number] = list(messages)
        self.branches.add(head)
        return pull

    def add_issue(self, title: str, *, state: str = "open") -> IssueInfo:
        number = self._number()
        issue = IssueInfo(number, f"{self.web_url()}/issues/{number}", title, state)
        self.issues[number] = issue
        return issue

    def fail_next(self, method: str, message: str = "502 Bad Gateway") -> None:
        """Make the next call of ``method`` raise :class:`GitHubError` (GitHub gave no usable answer)."""
        self.failures[method] = message

    def reopen(self, number: int) -> None:
        self.pulls[number] = replace(self.pulls[number], state="open")

    # -- the port: basics --------------------------------------------------------------------------

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def api_url(self) -> str:
        return "https://api.github.test"

    def redact(self, text: str) -> str:
        return text.replace(self.token, "***") if self.token else text

    def error(self, exc: BaseException, doing: str) -> GitHubError:
        return GitHubError(self.redact(f"cannot {doing} on GitHub ({self.full_name}): {exc}"))

    def web_url(self) -> str:
        return f"{WEB}/{self.full_name}"

    def clone_url(self) -> str:
        self._call("clone_url")
        return f"{self.web_url()}.git"

    def default_branch(self) -> str:
        self._call("default_branch")
        return "main"

    def login(self) -> str:
        self._call("login")
        return self.login_name

    def close(self) -> None:
        pass

    # -- the port: finding and listing ------------------------------------------------------------

    def iter_pulls(
        self, state: str = "all", head_branch: str | None = None, newest_first: bool = True
    ) -> Iterator[PullInfo]:
        self._call("iter_pulls")
        numbers = sorted(self.pulls, reverse=newest_first)
        for number in numbers:
            pull = self.pulls[number]
            if state != "all" and pull.state != state:
                continue
            if head_branch is not None and pull.head_label != f"{self.owner}:{head_branch}":
                continue
            yield pull

    def pull_for_head(self, head: str) -> PullInfo | None:
        return next(self.iter_pulls(head_branch=head), None)

    def find_pull(self, step: StepKey | KeyRef, marker_scan: bool = True) -> FoundPull | None:
        for pull in self.iter_pulls(head_branch=step.branch):
            return FoundPull(pull.number, pull.html_url, "head")
        for pull in self.iter_pulls():
            if step.label in pull.labels:
                return FoundPull(pull.number, pull.html_url, "label")
        if marker_scan:
            for pull in self.iter_pulls():
                if step.marker in pull.body:
                    return FoundPull(pull.number, pull.html_url, "marker")
        return None

    def find_branch(self, branch: str) -> str | None:
        self._call("find_branch")
        return f"{self.web_url()}/tree/{branch}" if branch in self.branches else None

    def find_comment(self, number: int, marker: str) -> str | None:
        return next((c.html_url for c in self.comments(number) if marker in c.body), None)

    def pull_commit_messages(self, number: int) -> list[str]:
        self._call("pull_commit_messages")
        return list(self.commit_messages.get(number, []))

    def comments(self, number: int) -> list[Comment]:
        self._call("comments")
        self._exists(number)
        return list(self.comment_lists.get(number, []))

    def issues_by(self, login: str) -> list[IssueInfo]:
        self._call("issues_by")
        return [self.issues[n] for n in sorted(self.issues, reverse=True)] if login == self.login_name else []

    # -- the port: writing ------------------------------------------------------------------------

    def create_comment(self, number: int, body: str) -> Comment:
        self._call("create_comment")
        self._exists(number)
        self._next_comment += 1
        comment = Comment(
            self._next_comment,
            body,
            f"{self.web_url()}/issues/{number}#c{self._next_comment}",
            self.login_name,
        )
        self.comment_lists.setdefault(number, []).append(comment)
        return comment

    def edit_comment(self, comment_id: int, body: str) -> None:
        self._call("edit_comment")
        for comments in self.comment_lists.values():
            for i, comment in enumerate(comments):
                if comment.id == comment_id:
                    comments[i] = replace(comment, body=body)
                    return
        raise GitHubError(f"cannot edit comment {comment_id} on GitHub ({self.full_name}): Not Found")

    def close_pull(self, number: int) -> None:
        self._call("close_pull")
        self._exists(number)
        self.pulls[number] = replace(self.pulls[number], state="closed")

    # -- helpers ---------------------------------------------------------------------------------------

    def _number(self) -> int:
        number, self._next_number = self._next_number, self._next_number + 1
        return number

    def _exists(self, number: int) -> None:
        if number not in self.pulls and number not in self.issues:
            raise GitHubError(
                f"issue or pull request #{number} not found in {self.full_name} (or the token cannot see it)"
            )

    def _call(self, method: str) -> None:
        self.calls.by_method[method] += 1
        message = self.failures.pop(method, None)
        if message is not None:
            raise GitHubError(self.redact(f"cannot {method} on GitHub ({self.full_name}): {message}"))


__all__ = ["Calls", "FakeClient"]
