"""GitHub access for gitledger: settings, a PyGithub client that never re-sends a write, and queries.

Imported only when a GitHub check or command is used (it imports PyGithub, requests and urllib3).

Settings (:meth:`GitHubSettings.resolve`)
    repository  the ``repo`` argument (``--github-repo`` / ``github.repo`` in .gitledger.yml), else parsed
                from the ``origin`` remote's URL (https, ``git@host:o/r.git``, ``ssh://…/o/r.git``)
    token       ``GITHUB_TOKEN``, then ``GH_TOKEN``; missing → :class:`GitHubSettingsError` (exit 2)
    API base    the ``api_url`` argument, else ``GITHUB_API_URL``, else ``https://api.github.com``
    tuning      ``GITLEDGER_GITHUB_TIMEOUT`` (seconds per HTTP request, default 20),
                ``GITLEDGER_GITHUB_RETRIES`` (re-sends of one read, default 4),
                ``GITLEDGER_GITHUB_BACKOFF`` (first back-off in seconds, doubled each time, default 1),
                ``GITLEDGER_GITHUB_MAX_WAIT`` (the most one request may spend waiting for retries, rate
                limit resets included, default 60) and ``GITLEDGER_GITHUB_WRITE_INTERVAL`` (seconds kept
                between two writes, GitHub's advice for content creation, default 1)

Retries (:class:`SafeRetry`)
    Only GET and HEAD are ever re-sent: on 5xx, 429, a rate-limited 403, a dropped connection or a read
    timeout, with exponential back-off that honours ``Retry-After`` and ``X-RateLimit-Reset``, bounded
    by the retry count and the wait budget. When the wait a rate limit needs exceeds the budget the
    request fails at once with the time of the reset. A write (POST, PATCH, PUT, DELETE) is sent once: a
    5xx, a timeout or a dropped connection on a write means "unknown", and the caller queries reality
    before doing anything else (PyGithub's own default retry re-sends POST on 5xx, which made duplicate
    PRs). The only exception is a connection that could not be opened at all, where nothing was sent.

Caching
    Nothing caches responses on this side (requests has no cache and PyGithub sends no conditional
    requests), and every request carries ``Cache-Control: no-cache`` so that no intermediary answers an
    existence check from a stored copy (GitHub marks API answers ``private, max-age=60``).

Secrets
    The token is never put into any message: every error raised here passes through :meth:`redact`.

Counting
    :attr:`GitHubContext.calls` counts every HTTP exchange, retries included, by method (see
    :class:`ApiCalls`), for the audit and the benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import github
import github.Auth
from urllib3.exceptions import MaxRetryError

from gitledger.github.port import Comment, FoundPull, IssueInfo, PullInfo
from gitledger.github.settings import DEFAULT_API_URL, GitHubError, GitHubSettings
from gitledger.github.transport import ApiCalls, NoCacheToken, SafeRetry

if TYPE_CHECKING:
    from github.Issue import Issue
    from github.PullRequest import PullRequest
    from github.Repository import Repository

    from gitledger.core.keys import KeyRef, StepKey
    from gitledger.git.repo import GitRepo

MAX_BODY = 65536  # GitHub's limit for PR bodies and comments
PER_PAGE = 100
REDACTED = "***"

# -- results ----------------------------------------------------------------------------------------------


def pull_info(pr: PullRequest) -> PullInfo:
    """A :class:`PullInfo` from a PyGithub pull request (no extra calls)."""
    created = pr.created_at
    return PullInfo(
        number=pr.number,
        html_url=pr.html_url,
        state=pr.state,
        merged=pr.merged_at is not None,
        title=pr.title or "",
        body=pr.body or "",
        head_ref=pr.head.ref,
        head_label=pr.head.label or "",
        base_ref=pr.base.ref,
        labels=tuple(label.name for label in pr.labels),
        created_at=created.isoformat() if created is not None else None,
        head_sha=pr.head.sha or "",
        base_sha=pr.base.sha or "",
    )


# -- the context ------------------------------------------------------------------------------------------


class GitHubContext:
    """A PyGithub client bound to one repository, with the queries gitledger's checks are built on.

    Every public method raises :class:`GitHubError` (token redacted) when GitHub cannot answer.
    """

    def __init__(self, settings: GitHubSettings, git_repo: GitRepo | None = None) -> None:
        self.settings = settings
        self.git_repo = git_repo
        self.calls = ApiCalls()
        retry = SafeRetry(
            total=settings.retries,
            calls=self.calls,
            backoff=settings.backoff,
            max_wait=settings.max_wait,
        )
        from gitledger._version import __version__

        self.client = github.Github(
            auth=NoCacheToken(settings.token),
            base_url=settings.api_url,
            timeout=max(1, round(settings.timeout)),
            user_agent=f"gitledger/{__version__} (PyGithub)",
            per_page=PER_PAGE,
            retry=retry,
            seconds_between_requests=None,
            seconds_between_writes=settings.write_interval or None,
            lazy=True,
        )
        self._repo: Repository | None = None
        self._repo_visible = False
        self._login: str | None = None

    @classmethod
    def from_settings(
        cls,
        repo: str | None = None,
        api_url: str | None = None,
        git_repo: GitRepo | None = None,
        env: Mapping[str, str] | None = None,
    ) -> GitHubContext:
        """The context for ``repo`` (else the origin remote's), the token and API URL from ``env``."""
        return cls(GitHubSettings.resolve(repo, api_url, git_repo, env), git_repo)

    # -- basics --------------------------------------------------------------------------------------

    @property
    def full_name(self) -> str:
        return self.settings.repo

    @property
    def api_url(self) -> str:
        return self.settings.api_url

    @property
    def token(self) -> str:
        return self.settings.token

    @property
    def owner(self) -> str:
        return self.settings.owner

    @property
    def repo(self) -> Repository:
        """The PyGithub repository object (lazy: creating it costs no API call)."""
        if self._repo is None:
            self._repo = self.client.get_repo(self.full_name)
        return self._repo

    def redact(self, text: str) -> str:
        token = self.settings.token
        return text.replace(token, REDACTED) if token else text

    def error(self, exc: BaseException, doing: str) -> GitHubError:
        """A :class:`GitHubError` explaining ``exc`` met while ``doing`` something, token redacted."""
        return GitHubError(self.redact(f"cannot {doing} on GitHub ({self.full_name}): {describe(exc)}"))

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> GitHubContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ensure_visible(self) -> None:
        """Make sure the repository exists and the token can see it (once per context: 1 call)."""
        if self._repo_visible:
            return
        try:
            self.repo.requester.requestJsonAndCheck("GET", self.repo.url)
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, "read the repository") from exc
            raise
        self._repo_visible = True

    def default_branch(self) -> str:
        return self._repository_field("default_branch", "read the repository's default branch")

    def clone_url(self) -> str:
        """The repository's https clone URL (one call)."""
        return self._repository_field("clone_url", "read the repository's clone URL")

    def _repository_field(self, name: str, doing: str) -> str:
        try:
            _, data = self.repo.requester.requestJsonAndCheck("GET", self.repo.url)
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, doing) from exc
            raise
        self._repo_visible = True
        value = data.get(name) if isinstance(data, dict) else None
        if not isinstance(value, str) or not value:
            what = "which branch is the default" if name == "default_branch" else f"the {name}"
            raise GitHubError(f"GitHub did not say {what} of {self.full_name}")
        return value

    # -- queries (list endpoints only: strongly consistent, unlike search) -----------------------------

    def iter_pulls(
        self, state: str = "all", head_branch: str | None = None, newest_first: bool = True
    ) -> Iterator[PullInfo]:
        """Every PR of the repository (all pages), or only those whose head is ``OWNER:head_branch``.

        ``head`` is sent with the owner prefix (GitHub silently ignores a bare branch name and returns
        every PR); callers must still compare ``head_ref`` themselves. Cost: one call per 100 PRs.
        """
        kwargs: dict[str, Any] = {"state": state, "sort": "created"}
        kwargs["direction"] = "desc" if newest_first else "asc"
        if head_branch is not None:
            kwargs["head"] = f"{self.owner}:{head_branch}"
        try:
            for pr in self.repo.get_pulls(**kwargs):
                yield pull_info(pr)
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, "list pull requests") from exc
            raise

    def pulls_with_label(self, label: str) -> Iterator[tuple[int, str]]:
        """(number, html_url) of every PR carrying ``label``, via the issues list (all pages)."""
        try:
            issues = self.repo.get_issues(state="all", labels=[label])
            for issue in issues:
                if _is_pull(issue):
                    yield issue.number, issue.html_url
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"list issues labelled {label!r}") from exc
            raise

    def find_pull(self, step: StepKey | KeyRef, marker_scan: bool = True) -> FoundPull | None:
        """The PR for ``step`` in any state (open, closed unmerged, merged), or None when there is none.

        Tried in order of cost: the key's convention branch as head (1 call), the key's label (1 call
        per 100 labelled issues), then the key's marker in a PR body (a scan of every PR, newest first:
        1 call per 100 PRs; skipped when ``marker_scan`` is False).
        """
        branch = step.branch
        expected_label = f"{self.owner}:{branch}".lower()
        for pr in self.iter_pulls(head_branch=branch):
            # GitHub ignores a head filter it does not understand and lists every PR: re-check.
            if pr.head_ref == branch and (not pr.head_label or pr.head_label.lower() == expected_label):
                return FoundPull(pr.number, pr.html_url, "head")
        for number, url in self.pulls_with_label(step.label):
            return FoundPull(number, url, "label")
        if marker_scan:
            for pr in self.iter_pulls():
                if step.marker in pr.body:
                    return FoundPull(pr.number, pr.html_url, "marker")
        return None

    def find_branch(self, branch: str) -> str | None:
        """The html URL of ``branch`` on GitHub, or None when it does not exist (1 call, 2 if unclear)."""
        try:
            found = self.repo.get_branch(branch)
        except github.UnknownObjectException as exc:
            message = _message(exc)
            if "branch not found" not in message.lower():
                self.ensure_visible()  # a 404 for the repository itself is not "absent"
            return None
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"look up branch {branch!r}") from exc
            raise
        links = found._links if isinstance(found._links, dict) else {}
        html = links.get("html")
        return str(html) if html else f"{self.web_url()}/tree/{branch}"

    def find_comment(self, number: int, marker: str) -> str | None:
        """The html URL of the first comment on issue/PR ``number`` containing ``marker`` (all pages)."""
        try:
            for comment in self.repo.get_issue(number).get_comments():
                if marker in (comment.body or ""):
                    return comment.html_url
        except github.UnknownObjectException as exc:
            raise GitHubError(
                self.redact(
                    f"issue or pull request #{number} not found in {self.full_name} (or the "
                    "token cannot see it)"
                )
            ) from exc
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"list comments of #{number}") from exc
            raise
        return None

    def comments(self, number: int) -> list[Comment]:
        """Every comment of issue or pull request ``number``, oldest first (1 call per 100)."""
        try:
            return [
                Comment(c.id, c.body or "", c.html_url, c.user.login if c.user is not None else "")
                for c in self.repo.get_issue(number).get_comments()
            ]
        except github.UnknownObjectException as exc:
            raise GitHubError(
                self.redact(
                    f"issue or pull request #{number} not found in {self.full_name} "
                    "(or the token cannot see it)"
                )
            ) from exc
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"list comments of #{number}") from exc
            raise

    def create_comment(self, number: int, body: str) -> Comment:
        """Post a comment (sent once, never re-sent: see :class:`SafeRetry`)."""
        try:
            posted = self.repo.get_issue(number).create_comment(body)
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"comment on #{number}") from exc
            raise
        return Comment(posted.id, posted.body or "", posted.html_url)

    def edit_comment(self, comment_id: int, body: str) -> None:
        """Replace the body of comment ``comment_id``."""
        try:
            self.repo.requester.requestJsonAndCheck(
                "PATCH", f"{self.repo.url}/issues/comments/{comment_id}", input={"body": body}
            )
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"edit comment {comment_id}") from exc
            raise

    def close_pull(self, number: int) -> None:
        """Close pull request ``number``."""
        try:
            self.repo.get_pull(number).edit(state="closed")
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"close #{number}") from exc
            raise

    def pull_commit_messages(self, number: int) -> list[str]:
        """Commit messages of PR ``number`` (1 call per 100 commits; GitHub lists at most 250)."""
        try:
            return [c.commit.message for c in self.repo.get_pull(number).get_commits()]
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"list commits of PR #{number}") from exc
            raise

    def web_url(self) -> str:
        """The repository's web address derived from the API base (github.com, GHE, or the base itself)."""
        base = self.settings.api_url
        if base == DEFAULT_API_URL:
            host = "https://github.com"
        elif base.endswith("/api/v3"):
            host = base[: -len("/api/v3")]
        else:
            host = base
        return f"{host}/{self.full_name}"

    # -- queries of the agent guard (docs/agents.md) ------------------------------------------------

    def pull_for_head(self, head: str) -> PullInfo | None:
        """The newest PR whose head is ``head`` of this repository, in any state (1 call), or None."""
        expected = f"{self.owner}:{head}".lower()
        for pr in self.iter_pulls(state="all", head_branch=head):
            if pr.head_ref == head and (not pr.head_label or pr.head_label.lower() == expected):
                return pr
        return None

    def issues_by(self, login: str) -> list[IssueInfo]:
        """Issues (not PRs) opened by ``login`` in any state, newest first (1 call per 100 issues)."""
        try:
            return [
                IssueInfo(i.number, i.html_url, i.title or "", i.state)
                for i in self.repo.get_issues(
                    state="all",
                    creator=login,  # type: ignore[arg-type]  # PyGithub accepts a login (str)
                    sort="created",
                    direction="desc",
                )
                if not _is_pull(i)
            ]
        except Exception as exc:
            if is_failure(exc):
                raise self.error(exc, f"list issues opened by {login}") from exc
            raise

    def login(self) -> str:
        """The login of the token's user (1 call, then remembered)."""
        if self._login is None:
            try:
                _, data = self.repo.requester.requestJsonAndCheck("GET", "/user")
            except Exception as exc:
                if is_failure(exc):
                    raise self.error(exc, "read the token's user") from exc
                raise
            login = data.get("login") if isinstance(data, dict) else None
            if not isinstance(login, str) or not login:
                raise GitHubError("GitHub did not say which user the token belongs to (GET /user)")
            self._login = login
        return self._login


def _is_pull(issue: Issue) -> bool:
    """Is this issues-list entry a pull request?

    A PR's html_url is ``…/pull/N`` (an issue's is ``…/issues/N``). Reading ``issue.pull_request``
    instead would make PyGithub fetch every plain issue again (the key is absent from their list entry).
    """
    url = issue.html_url or ""
    return "/pull/" in url if url else issue.pull_request is not None


def _message(exc: BaseException) -> str:
    if isinstance(exc, github.GithubException):
        data = exc.data
        if isinstance(data, dict):
            message = str(data.get("message") or "")
            errors = data.get("errors")
            if isinstance(errors, list):
                details = [
                    str(e.get("message") or e.get("code") or "") for e in errors if isinstance(e, dict)
                ]
                details = [d for d in details if d]
                if details:
                    message = f"{message} ({'; '.join(details)})" if message else "; ".join(details)
            return message
        return str(data or "")
    return str(exc)


def is_failure(exc: BaseException) -> bool:
    """The one failure predicate: an error that means "GitHub did not give a usable answer" (an HTTP
    error, a refused or dropped connection, retries exhausted), as opposed to a bug."""
    return isinstance(exc, github.GithubException | OSError | MaxRetryError)


def is_unknown_outcome(exc: BaseException) -> bool:
    """Did a write end without a definite answer (5xx, timeout, dropped connection)?"""
    if isinstance(exc, github.GithubException):
        return exc.status >= 500
    return isinstance(exc, OSError | MaxRetryError)


def describe(exc: BaseException) -> str:
    """One line saying what went wrong talking to GitHub (the caller redacts the token)."""
    if isinstance(exc, github.RateLimitExceededException) or (
        isinstance(exc, github.GithubException)
        and exc.status in (403, 429)
        and "rate limit" in _message(exc).lower()
    ):
        assert isinstance(exc, github.GithubException)
        reset = (exc.headers or {}).get("x-ratelimit-reset")
        when = ""
        if reset and str(reset).isdigit():
            when = " until " + datetime.fromtimestamp(int(reset), UTC).strftime("%H:%M:%S UTC")
        return f"rate limited{when} (HTTP {exc.status}: {_message(exc)}); try again later"
    if isinstance(exc, github.BadCredentialsException) or (
        isinstance(exc, github.GithubException) and exc.status == 401
    ):
        return "the token was rejected (HTTP 401); check GITHUB_TOKEN / GH_TOKEN"
    if isinstance(exc, github.UnknownObjectException):
        return "not found (HTTP 404); check the repository name and that the token can see it"
    if isinstance(exc, github.GithubException):
        message = _message(exc)
        return f"HTTP {exc.status}" + (f": {message}" if message else "")
    import requests

    if isinstance(exc, requests.exceptions.Timeout):
        return "no answer within the timeout (GITLEDGER_GITHUB_TIMEOUT)"
    if isinstance(exc, requests.exceptions.ConnectionError | MaxRetryError):
        inner = _innermost(exc)
        detail = str(inner).strip().splitlines()[0][:200] if str(inner).strip() else ""
        return f"connection failed ({type(inner).__name__}{': ' + detail if detail else ''})"
    return f"{type(exc).__name__}: {exc}"


def _innermost(exc: BaseException) -> BaseException:
    """The root cause inside requests/urllib3 wrappers (MaxRetryError.reason, ProtocolError args)."""
    seen: set[int] = set()
    current: BaseException = exc
    while id(current) not in seen:
        seen.add(id(current))
        reason = getattr(current, "reason", None)
        nested = [a for a in current.args if isinstance(a, BaseException)]
        if isinstance(reason, BaseException):
            current = reason
        elif nested:
            current = nested[-1]
        else:
            break
    return current


__all__ = [
    "MAX_BODY",
    "GitHubContext",
    "describe",
    "is_failure",
    "is_unknown_outcome",
    "pull_info",
]
