"""A local, stateful fake of the GitHub REST API, backed by real bare git repositories.

The real PyGithub client (or ``requests``, ``curl``, ``gh api``...) talks to it over HTTP on 127.0.0.1:

    with FakeGitHub(tokens=["t"]) as server:
        bare = server.add_repo("acme/widgets")          # a real bare repository: `git push <bare> main`
        gh = Github(auth=Auth.Token("t"), **server.pygithub_kwargs())
        gh.get_repo("acme/widgets").create_pull(title="x", head="feature", base="main")

Standalone (for examples, benchmarks and other processes)::

    python -m tests.fakegithub --repo acme/widgets --token T [--port 0]

prints one JSON line ``{"url": ..., "repos": {"acme/widgets": "/path/to/bare.git"}, ...}`` and serves until
SIGTERM/SIGINT, or until stdin reaches EOF when stdin is a pipe.  Admin endpoints live under ``/_fake/``
(no auth, never recorded, never faulted): ``GET /_fake/state``, ``GET /_fake/requests``,
``POST /_fake/reset_requests``, ``POST /_fake/inject``, ``POST /_fake/clear_faults``,
``POST /_fake/seed_prs``, ``POST /_fake/merge`` and ``POST /_fake/add_repo``.

Faithful to GitHub (what client code may rely on):

- Branches, head/base SHAs, PR commits and ref listings come from the bare repository through the real
  ``git`` binary, read at request time: pushing a new commit moves an open PR's ``head.sha``.
- Every PR has ``refs/pull/<n>/head`` in the bare repository (created with the PR, seeded PRs too), so
  ``git fetch <bare> '+refs/pull/*/head:...'`` works as against GitHub. Like GitHub, the ref keeps the
  last head of a closed PR; it follows pushes to an open PR's branch when the fake next reads that PR.
- PRs and issues share one number sequence; every PR also appears in the issues listing with a
  ``pull_request`` key, and issue endpoints (labels, comments, PATCH state) work on PR numbers.
- ``POST /pulls`` answers 422 "A pull request already exists for owner:branch." while an open PR exists for
  the same head and base (GitHub's uniqueness is per head/base pair), 422 ``field: head|base, code: invalid``
  when a branch is missing, and 422 "No commits between base and head" when head adds nothing.  Reopening a
  PR runs the same duplicate check; a merged PR cannot be reopened.
- ``GET /pulls?head=`` only filters in ``owner:branch`` form; a bare branch name is ignored (all PRs are
  returned), exactly like GitHub.  Default sort is ``created``; direction defaults to ``desc`` for
  ``created`` and ``asc`` otherwise.  Issues default to ``created``/``desc``; ``labels=a,b`` requires all.
- List endpoints return the list-shaped objects (e.g. listed PRs lack ``merged``/``mergeable``/``comments``
  so PyGithub lazily fetches the single PR, as against GitHub).  Every ``url`` points back at this server.
- Pagination: ``per_page`` (default 30, max 100) and ``page``; a ``Link`` header with absolute ``prev``,
  ``next``, ``last`` and ``first`` URLs that keep the rest of the query.  ``matching-refs`` is not paginated.
- Label names are case-insensitive and may contain ``:`` or ``/`` (percent-decoded from the path); adding
  unknown labels to an issue creates them (colour ``ededed``); ``POST /labels`` answers 422
  ``already_exists``.
- Errors: 404 ``{"message": "Not Found", "documentation_url": ..., "status": "404"}``; 401
  "Bad credentials" for an unknown token (PyGithub raises ``BadCredentialsException``); 422 "Validation
  Failed" with an ``errors`` list; 400 "Problems parsing JSON".
- Headers: ``X-RateLimit-Limit/Remaining/Used/Reset/Resource`` on every response (the counter really
  counts), ``Content-Type: application/json; charset=utf-8``, ``ETag`` and
  ``Cache-Control: private, max-age=60, s-maxage=60`` on GETs (``If-None-Match`` gives 304), and
  ``Location`` on 201.

Simplified or absent (do not rely on these):

- No forks: a PR's head must be a branch of the same repository (``owner:branch`` must name the repo owner).
- Nothing is ever merged in git: ``merge_pr()`` only marks the PR merged (``merge_commit_sha`` = head SHA);
  ``PUT /pulls/{n}/merge``, reviews, review comments, assignees, milestones, reactions, events, files, search,
  GraphQL, checks and statuses are not implemented (404).
- One user: every token authenticates as ``login``; authors of commits map to no GitHub user (``null``).
  A missing ``Authorization`` header answers 401 "Requires authentication" (GitHub would often answer 404
  for a private repository).  Token scopes and permissions are not checked.
- ``mergeable`` is always ``true`` for open PRs; commit ``stats``/``files`` are omitted; ``html_url`` values
  point at this server, where nothing is served.
- The rate-limit counter never blocks by itself; use ``inject(..., rate_limit())`` to simulate exhaustion.
- State lives in memory; the temporary directory holding the bare repositories is deleted by ``stop()``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.server
import itertools
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from pathlib import Path
from typing import Any

__all__ = [
    "FakeGitHub",
    "Fault",
    "Injection",
    "RecordedRequest",
    "delay",
    "drop_after_effect",
    "drop_before_effect",
    "late_effect",
    "rate_limit",
    "secondary_rate_limit",
    "status",
]

JSON = dict[str, Any]

DOCS = "https://docs.github.com/rest"
MAX_PER_PAGE = 100
DEFAULT_PER_PAGE = 30
MAX_PR_COMMITS = 250  # GET /pulls/{n}/commits lists at most 250 commits on GitHub
RATE_LIMIT = 5000
CACHE_CONTROL = "private, max-age=60, s-maxage=60"
DEFAULT_LABEL_COLOR = "ededed"
_COLOR_RE = re.compile(r"^[0-9a-fA-F]{6}$")
_LOG_FIELDS = 10
_LOG_FORMAT = "%x00".join(["%H", "%T", "%P", "%an", "%ae", "%at", "%cn", "%ce", "%ct", "%B"]) + "%x00"
_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# --------------------------------------------------------------------------------------------------------
# Fault injection
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """What to do to a matching request instead of (or around) answering it normally.

    Build one with :func:`status`, :func:`rate_limit`, :func:`secondary_rate_limit`,
    :func:`drop_after_effect`, :func:`drop_before_effect` or :func:`delay`.
    """

    kind: str
    code: int = 0
    retry_after: int = 0
    seconds: float = 0.0
    message: str = ""

    def describe(self) -> str:
        return {
            "status": f"status({self.code})",
            "rate_limit": f"rate_limit({self.retry_after}, status={self.code})",
            "secondary_rate_limit": f"secondary_rate_limit({self.retry_after}, status={self.code})",
            "delay": f"delay({self.seconds})",
            "late_effect": f"late_effect({self.seconds}, {self.code})",
        }.get(self.kind, f"{self.kind}()")


def status(code: int = 500, message: str | None = None) -> Fault:
    """Answer with HTTP ``code`` and a GitHub-style JSON error body, without performing the request."""
    if not 400 <= code <= 599:
        raise ValueError(f"status fault needs a 4xx/5xx code, got {code}")
    return Fault("status", code=code, message=message or _REASONS.get(code, "Error"))


def rate_limit(retry_after: int = 60, *, status: int = 403) -> Fault:
    """Primary rate limit: 403 (or 429) "API rate limit exceeded", ``X-RateLimit-Remaining: 0`` and
    ``X-RateLimit-Reset`` = now + ``retry_after``; the 429 variant also sends ``Retry-After``."""
    if status not in (403, 429):
        raise ValueError("rate limits answer 403 or 429")
    return Fault("rate_limit", code=status, retry_after=retry_after)


def secondary_rate_limit(retry_after: int = 60, *, status: int = 403) -> Fault:
    """Secondary (abuse) rate limit: 403/429 "You have exceeded a secondary rate limit" + ``Retry-After``."""
    if status not in (403, 429):
        raise ValueError("rate limits answer 403 or 429")
    return Fault("secondary_rate_limit", code=status, retry_after=retry_after)


def drop_after_effect() -> Fault:
    """Perform the request (e.g. really create the PR), then close the connection without any response."""
    return Fault("drop_after_effect")


def late_effect(seconds: float, code: int = 502) -> Fault:
    """Answer HTTP ``code`` at once without performing the request, then perform it ``seconds`` later
    (GitHub answering 502 for a write its backend applies a moment afterwards)."""
    if not 500 <= code <= 599:
        raise ValueError(f"late_effect answers a 5xx status, got {code}")
    return Fault("late_effect", code=code, seconds=float(seconds), message=_REASONS.get(code, "Error"))


def drop_before_effect() -> Fault:
    """Close the connection without performing the request or sending any response."""
    return Fault("drop_before_effect")


def delay(seconds: float) -> Fault:
    """Sleep ``seconds`` before handling the request normally (the effect happens even if the client has
    given up by then, like a slow GitHub)."""
    return Fault("delay", seconds=float(seconds))


def fault_from_json(spec: Mapping[str, Any]) -> Fault:
    """Build a :class:`Fault` from the admin endpoint's JSON (``{"fault": "status", "status": 502}``...)."""
    kind = str(spec.get("fault", ""))
    if kind == "status":
        return status(int(spec.get("status", 500)), spec.get("message"))
    if kind in ("rate_limit", "secondary_rate_limit"):
        maker = rate_limit if kind == "rate_limit" else secondary_rate_limit
        return maker(int(spec.get("retry_after", 60)), status=int(spec.get("status", 403)))
    if kind == "drop_after_effect":
        return drop_after_effect()
    if kind == "late_effect":
        return late_effect(float(spec.get("seconds", 1.0)), int(spec.get("status", 502)))
    if kind == "drop_before_effect":
        return drop_before_effect()
    if kind == "delay":
        return delay(float(spec.get("seconds", 1.0)))
    raise ValueError(f"unknown fault {kind!r}")


@dataclass
class Injection:
    """One armed fault: applies to requests whose method matches (``*`` = any) and whose percent-decoded
    path (no query string) matches ``pattern`` (``re.search``), at most ``remaining`` more times
    (``None`` = forever).  ``hits`` counts how often it fired."""

    method: str
    pattern: re.Pattern[str]
    fault: Fault
    remaining: int | None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        return self.method in ("*", method) and self.pattern.search(path) is not None


@dataclass(frozen=True)
class RecordedRequest:
    """One API request as the server saw it.  ``path`` is percent-decoded; ``status`` is ``None`` when
    the connection was dropped by a fault; ``fault`` names the fault that fired, if any."""

    method: str
    path: str
    query: dict[str, str]
    status: int | None
    body: Any = None
    fault: str | None = None


# --------------------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------------------


@dataclass
class _Label:
    id: int
    name: str
    color: str
    description: str | None


@dataclass
class _Comment:
    id: int
    number: int
    body: str
    user: str
    created_at: float
    updated_at: float


@dataclass
class _Pull:
    id: int
    head_ref: str
    base_ref: str
    head_sha: str
    base_sha: str
    draft: bool = False
    maintainer_can_modify: bool = False
    merged: bool = False
    merged_at: float | None = None
    merge_commit_sha: str | None = None


@dataclass
class _Issue:
    number: int
    id: int
    title: str
    body: str | None
    user: str
    created_at: float
    updated_at: float
    state: str = "open"
    state_reason: str | None = None
    closed_at: float | None = None
    labels: list[str] = field(default_factory=list)  # lower-cased label keys
    pull: _Pull | None = None


@dataclass
class _Repo:
    owner: str
    name: str
    id: int
    default_branch: str
    bare: Path
    created_at: float
    issues: dict[int, _Issue] = field(default_factory=dict)
    labels: dict[str, _Label] = field(default_factory=dict)  # key: lower-cased name
    comments: dict[int, _Comment] = field(default_factory=dict)
    next_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class _Ref:
    name: str  # full ref name, refs/heads/x
    sha: str
    type: str  # commit, tag...


@dataclass(frozen=True)
class _Commit:
    sha: str
    tree: str
    parents: list[str]
    author_name: str
    author_email: str
    author_time: int
    committer_name: str
    committer_email: str
    committer_time: int
    message: str


@dataclass
class _Request:
    method: str
    raw_path: str
    path: str
    query: dict[str, str]
    query_pairs: list[tuple[str, str]]
    headers: Message
    body: Any
    # Per-request caches: git refs (dropped by the handlers that move refs) and, for read-only requests only,
    # derived values such as the embedded repository JSON, so list pages stay O(page) rather than O(page * N).
    git_cache: dict[str, tuple[dict[str, _Ref], dict[str, str]]] = field(default_factory=dict)
    memo: dict[tuple[str, str], Any] = field(default_factory=dict)

    @property
    def read_only(self) -> bool:
        return self.method in ("GET", "HEAD", "INTERNAL")


def _scratch_request() -> _Request:
    """A pseudo-request for the Python helpers, so they share one refs snapshot like a real request."""
    return _Request("INTERNAL", "", "", {}, [], Message(), None)


@dataclass
class _Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    empty: bool = False  # no body at all (204, 304)


class _HTTPError(Exception):
    def __init__(self, status: int, body: JSON, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{status}: {body.get('message')}")
        self.status = status
        self.body = body
        self.headers = dict(headers or {})


def _error(status: int, message: str, doc: str = DOCS, **extra: Any) -> _HTTPError:
    return _HTTPError(status, {"message": message, **extra, "documentation_url": doc, "status": str(status)})


def _not_found(message: str = "Not Found") -> _HTTPError:
    return _error(404, message)


def _invalid(resource: str, *errors: Mapping[str, Any], doc: str = DOCS) -> _HTTPError:
    return _error(422, "Validation Failed", doc, errors=[{"resource": resource, **e} for e in errors])


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_iso(value: str) -> float | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _node_id(prefix: str, ident: int) -> str:
    return f"{prefix}_kwDOfake{ident:08X}"


def _q(text: str, safe: str = "") -> str:
    return urllib.parse.quote(text, safe=safe)


_ROUTE = Callable[..., _Response]


# --------------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------------


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], fake: FakeGitHub) -> None:
        self.fake = fake
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def close_connections(self) -> None:
        with self.connections_lock:
            conns = list(self.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakegithub"
    timeout = 120  # idle keep-alive connections
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid the 40 ms delayed-ACK stall
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.connections_lock:
                self.server.connections.discard(self.connection)

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _dispatch(self) -> None:
        self.server.fake._serve(self)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _dispatch

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""


# --------------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------------


class FakeGitHub:
    """A stateful GitHub REST API on 127.0.0.1 (see the module docstring for what is faithful).

    All state sits behind one lock; requests are served concurrently by daemon threads.
    """

    def __init__(
        self,
        *,
        tokens: Iterable[str] = (),
        login: str = "gitledger-bot",
        host: str = "127.0.0.1",
        port: int = 0,
        root: Path | str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        token_list = list(tokens)
        self.tokens: set[str] = set(token_list)
        self.token: str | None = token_list[0] if token_list else None
        self.login = login
        self.repo_name: str | None = None
        self.errors: list[str] = []  # server-side tracebacks (bugs in the fake); tests should keep it empty
        self._host = host
        self._port = port
        self._root: Path | None = Path(root) if root is not None else None
        self._owns_root = root is None
        self._clock = clock
        self._lock = threading.RLock()
        self._repos: dict[str, _Repo] = {}  # key: lower-cased full name
        self._users: dict[str, int] = {}
        self._ids = itertools.count(1001)
        self._request_ids = itertools.count(1)
        self._requests: list[RecordedRequest] = []
        self._injections: list[Injection] = []
        self._rate_used = 0
        self._rate_reset = int(clock()) + 3600
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._routes = self._build_routes()

    # ---- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        """Bind (port 0 = a free port) and serve in a daemon thread.  Returns ``self``."""
        if self._httpd is not None:
            return self
        self._httpd = _Server((self._host, self._port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fakegithub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close open connections and delete the bare repositories (if the server owns them)."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.close_connections()
            httpd.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
        if self._owns_root and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234`` (for ``Github(base_url=...)`` and ``GITHUB_API_URL``)."""
        if self._httpd is None:
            raise RuntimeError("FakeGitHub is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}"

    def pygithub_kwargs(self, *, timeout: int = 10) -> dict[str, Any]:
        """Keyword arguments for ``github.Github`` pointing at this server with no retries and no client-side
        throttling (PyGithub otherwise sleeps 0.25 s between requests and 1 s between writes)."""
        return {
            "base_url": self.url,
            "retry": None,
            "timeout": timeout,
            "seconds_between_requests": None,
            "seconds_between_writes": None,
        }

    # ---- repositories ---------------------------------------------------------------------------------

    def add_repo(self, full_name: str, default_branch: str = "main") -> Path:
        """Create repository ``owner/name`` backed by a fresh bare git repository; return its path."""
        owner, sep, name = full_name.partition("/")
        if not sep or not owner or not name or "/" in name:
            raise ValueError(f"expected owner/name, got {full_name!r}")
        with self._lock:
            if full_name.lower() in self._repos:
                raise ValueError(f"repository {full_name} already exists")
            bare = self._root_dir() / owner / f"{name}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        _run_git(bare.parent, "init", "-q", "--bare", "-b", default_branch, str(bare))
        with self._lock:
            repo = _Repo(owner, name, next(self._ids), default_branch, bare, self._clock())
            self._repos[full_name.lower()] = repo
            if self.repo_name is None:
                self.repo_name = full_name
        return bare

    def bare_path(self, full_name: str | None = None) -> Path:
        """Path of the bare repository backing ``full_name`` (default: the first added repository)."""
        with self._lock:
            return self._repo(full_name).bare

    # ---- requests and faults --------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every API request served so far (admin ``/_fake/`` requests excluded)."""
        with self._lock:
            return list(self._requests)

    def reset_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def count_requests(
        self, method: str | None = None, path_regex: str | None = None, status: int | None = None
    ) -> int:
        """How many recorded requests match ``method``, ``re.search(path_regex, path)`` and ``status``."""
        pattern = re.compile(path_regex) if path_regex is not None else None
        return sum(
            1
            for r in self.requests
            if (method is None or r.method == method.upper())
            and (pattern is None or pattern.search(r.path))
            and (status is None or r.status == status)
        )

    def inject(self, method: str, path_regex: str, fault: Fault, times: int | None = 1) -> Injection:
        """Arm ``fault`` for the next ``times`` requests (``None`` = every request) whose method is
        ``method`` (``*`` = any) and whose percent-decoded path matches ``path_regex`` (``re.search``)."""
        injection = Injection(method.upper(), re.compile(path_regex), fault, times)
        with self._lock:
            self._injections.append(injection)
        return injection

    def clear_faults(self) -> None:
        with self._lock:
            self._injections.clear()

    # ---- direct state manipulation (for tests) --------------------------------------------------------

    def merge_pr(self, number: int, repo: str | None = None, *, merge_commit_sha: str | None = None) -> None:
        """Mark PR ``number`` merged (``merged``, ``merged_at``, state closed).  Git is not touched:
        ``merge_commit_sha`` defaults to the PR's head SHA."""
        with self._lock:
            r = self._repo(repo)
            issue = r.issues.get(number)
            if issue is None or issue.pull is None:
                raise KeyError(f"no pull request #{number} in {r.full_name}")
            self._refresh_pull(_scratch_request(), r, issue)
            now = self._clock()
            pull = issue.pull
            pull.merged, pull.merged_at = True, now
            pull.merge_commit_sha = merge_commit_sha or pull.head_sha
            issue.state, issue.closed_at, issue.updated_at = "closed", now, now

    def pulls(self, repo: str | None = None) -> list[JSON]:
        """A compact snapshot of every PR, oldest first (for assertions)."""
        with self._lock:
            r = self._repo(repo)
            scratch = _scratch_request()
            out = []
            for issue in sorted(r.issues.values(), key=lambda i: i.number):
                if issue.pull is None:
                    continue
                self._refresh_pull(scratch, r, issue)
                out.append(
                    {
                        "number": issue.number,
                        "title": issue.title,
                        "body": issue.body,
                        "state": issue.state,
                        "merged": issue.pull.merged,
                        "draft": issue.pull.draft,
                        "head": issue.pull.head_ref,
                        "base": issue.pull.base_ref,
                        "head_sha": issue.pull.head_sha,
                        "labels": [r.labels[k].name for k in issue.labels if k in r.labels],
                    }
                )
            return out

    def comments(self, number: int, repo: str | None = None) -> list[JSON]:
        """Comments on issue/PR ``number``, oldest first: ``{"id", "body", "user"}``."""
        with self._lock:
            r = self._repo(repo)
            return [
                {"id": c.id, "body": c.body, "user": c.user}
                for c in sorted(r.comments.values(), key=lambda c: c.id)
                if c.number == number
            ]

    def state(self) -> JSON:
        """Counts of PRs, issues, comments and labels per repository (also ``GET /_fake/state``)."""
        with self._lock:
            repos: JSON = {}
            for r in self._repos.values():
                pulls = [i for i in r.issues.values() if i.pull is not None]
                issues = [i for i in r.issues.values() if i.pull is None]
                repos[r.full_name] = {
                    "path": str(r.bare),
                    "default_branch": r.default_branch,
                    "pulls": {
                        "total": len(pulls),
                        "open": sum(i.state == "open" for i in pulls),
                        "closed": sum(i.state == "closed" for i in pulls),
                        "merged": sum(bool(i.pull and i.pull.merged) for i in pulls),
                    },
                    "issues": {
                        "total": len(issues),
                        "open": sum(i.state == "open" for i in issues),
                        "closed": sum(i.state == "closed" for i in issues),
                    },
                    "comments": len(r.comments),
                    "labels": len(r.labels),
                }
            return {
                "repos": repos,
                "requests": len(self._requests),
                "faults_armed": sum(1 for i in self._injections if i.remaining is None or i.remaining > 0),
                "errors": len(self.errors),
            }

    def seed_prs(
        self,
        count: int,
        repo: str | None = None,
        *,
        branch_prefix: str = "seed/pr-",
        base: str | None = None,
        state: str = "open",
        title: str = "Seeded PR {n}",
        body: str = "",
        labels: Iterable[str] = (),
    ) -> list[int]:
        """Bulk-create ``count`` PRs fast (for benchmarks): one ``git fast-import`` writes one real commit per
        PR on branch ``<branch_prefix><number>`` (and a root commit on ``base`` if it does not exist yet).
        ``title``/``body`` may use ``{n}`` (the PR number).  ``state``: open, closed or merged."""
        if state not in ("open", "closed", "merged"):
            raise ValueError("state must be open, closed or merged")
        if count < 0:
            raise ValueError("count must be >= 0")
        with self._lock:
            r = self._repo(repo)
            base = base or r.default_branch
            numbers = list(range(r.next_number, r.next_number + count))
            refs = self._read_refs(r)
            now = int(self._clock())
            who = f"Seed Bot <seed@example.invalid> {now} +0000"
            parts: list[bytes] = []

            def commit(ref: str, message: str, parent: str | None) -> None:
                data = message.encode()
                head = f"commit refs/heads/{ref}\ncommitter {who}\ndata {len(data)}\n".encode()
                parts.append(head + data + b"\n" + (f"from {parent}\n" if parent else "").encode() + b"\n")

            base_ref = refs.get(f"refs/heads/{base}")
            if base_ref is None:
                commit(base, "Initial commit\n", None)
                base_parent = f"refs/heads/{base}"
            else:
                base_parent = base_ref.sha
            for n in numbers:
                commit(f"{branch_prefix}{n}", f"Seeded change {n}\n", base_parent)
            if count or base_ref is None:
                _run_git(r.bare, "fast-import", "--quiet", "--force", input_bytes=b"".join(parts) + b"done\n")
            refs = self._read_refs(r)
            base_sha = refs[f"refs/heads/{base}"].sha
            label_keys = [self._ensure_label(r, name).name.lower() for name in labels]
            heads: dict[int, str] = {}
            for n in numbers:
                head = f"{branch_prefix}{n}"
                pull = _Pull(next(self._ids), head, base, refs[f"refs/heads/{head}"].sha, base_sha)
                heads[n] = pull.head_sha
                issue = _Issue(
                    n, next(self._ids), title.format(n=n), body.format(n=n) or None, self.login, now, now
                )
                issue.pull, issue.labels = pull, list(label_keys)
                if state != "open":
                    issue.state, issue.closed_at = "closed", now
                if state == "merged":
                    pull.merged, pull.merged_at, pull.merge_commit_sha = True, now, pull.head_sha
                r.issues[n] = issue
            r.next_number += count
            self._set_pull_refs(r, heads)
            return numbers

    # ---- internals: helpers ---------------------------------------------------------------------------

    def _root_dir(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="fakegithub-"))
            self._owns_root = True
        self._root.mkdir(parents=True, exist_ok=True)
        return self._root

    def _repo(self, full_name: str | None) -> _Repo:
        name = full_name if full_name is not None else self.repo_name
        if name is None or name.lower() not in self._repos:
            raise KeyError(f"no repository {name!r}")
        return self._repos[name.lower()]

    def _user_id(self, login: str) -> int:
        if login not in self._users:
            self._users[login] = next(self._ids)
        return self._users[login]

    def _read_refs(self, repo: _Repo) -> dict[str, _Ref]:
        out = _run_git(repo.bare, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(objecttype)")
        refs = {}
        for line in out.splitlines():
            name, sha, kind = line.split("\0")
            refs[name] = _Ref(name, sha, kind)
        return refs

    def _git_snapshot(self, req: _Request, repo: _Repo) -> tuple[dict[str, _Ref], dict[str, str]]:
        """All refs of ``repo`` and its branch -> SHA map, read with one ``git for-each-ref`` per request."""
        key = repo.full_name.lower()
        if key not in req.git_cache:
            refs = self._read_refs(repo)
            branches = {
                name.removeprefix("refs/heads/"): ref.sha
                for name, ref in refs.items()
                if name.startswith("refs/heads/")
            }
            req.git_cache[key] = (refs, branches)
        return req.git_cache[key]

    def _refs(self, req: _Request, repo: _Repo) -> dict[str, _Ref]:
        return self._git_snapshot(req, repo)[0]

    def _branches(self, req: _Request, repo: _Repo) -> dict[str, str]:
        return self._git_snapshot(req, repo)[1]

    def _memo(self, req: _Request | None, key: tuple[str, str], compute: Callable[[], Any]) -> Any:
        if req is None or not req.read_only:
            return compute()
        if key not in req.memo:
            req.memo[key] = compute()
        return req.memo[key]

    def _refresh_pull(self, req: _Request, repo: _Repo, issue: _Issue) -> None:
        """Open PRs follow their branches, like GitHub; closed PRs keep the SHAs they had."""
        pull = issue.pull
        if pull is None or issue.state != "open":
            return
        branches = self._branches(req, repo)
        head_sha = branches.get(pull.head_ref, pull.head_sha)
        if head_sha != pull.head_sha:
            self._set_pull_refs(repo, {issue.number: head_sha})
        pull.head_sha = head_sha
        pull.base_sha = branches.get(pull.base_ref, pull.base_sha)

    def _set_pull_refs(self, repo: _Repo, heads: Mapping[int, str]) -> None:
        """Point ``refs/pull/<n>/head`` at each PR's head commit (one ``git update-ref --stdin``)."""
        if heads:
            lines = "".join(f"update refs/pull/{n}/head {sha}\n" for n, sha in sorted(heads.items()))
            _run_git(repo.bare, "update-ref", "--stdin", input_bytes=lines.encode())

    def _log(self, repo: _Repo, *rev_args: str) -> list[_Commit]:
        proc = _git_proc(repo.bare, "log", f"--format={_LOG_FORMAT}", *rev_args, "--")
        if proc.returncode != 0:
            return []
        fields = proc.stdout.split("\0")
        commits = []
        for i in range(0, len(fields) - _LOG_FIELDS + 1, _LOG_FIELDS):
            f = fields[i : i + _LOG_FIELDS]
            commits.append(
                _Commit(
                    sha=f[0].strip(),
                    tree=f[1],
                    parents=f[2].split(),
                    author_name=f[3],
                    author_email=f[4],
                    author_time=int(f[5]),
                    committer_name=f[6],
                    committer_email=f[7],
                    committer_time=int(f[8]),
                    message=f[9].rstrip("\n"),
                )
            )
        return commits

    def _resolve_commit(self, repo: _Repo, rev: str) -> str | None:
        if rev.startswith("-"):
            return None
        proc = _git_proc(repo.bare, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return proc.stdout.strip() if proc.returncode == 0 else None

    def _ensure_label(self, repo: _Repo, name: str) -> _Label:
        key = name.lower()
        if key not in repo.labels:
            repo.labels[key] = _Label(next(self._ids), name, DEFAULT_LABEL_COLOR, None)
        return repo.labels[key]

    def _now(self) -> float:
        return self._clock()

    # ---- internals: JSON shapes -----------------------------------------------------------------------

    def _api_base(self, repo: _Repo) -> str:
        return f"{self.url}/repos/{repo.full_name}"

    def _user_json(self, login: str) -> JSON:
        u = f"{self.url}/users/{login}"
        owner_is_org = login != self.login and any(r.owner == login for r in self._repos.values())
        return {
            "login": login,
            "id": self._user_id(login),
            "node_id": _node_id("U", self._user_id(login)),
            "avatar_url": f"{self.url}/avatars/{login}",
            "gravatar_id": "",
            "url": u,
            "html_url": f"{self.url}/{login}",
            "followers_url": f"{u}/followers",
            "following_url": f"{u}/following{{/other_user}}",
            "gists_url": f"{u}/gists{{/gist_id}}",
            "starred_url": f"{u}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{u}/subscriptions",
            "organizations_url": f"{u}/orgs",
            "repos_url": f"{u}/repos",
            "events_url": f"{u}/events{{/privacy}}",
            "received_events_url": f"{u}/received_events",
            "type": "Organization" if owner_is_org else "User",
            "user_view_type": "public",
            "site_admin": False,
        }

    def _repo_json(self, repo: _Repo, req: _Request | None = None) -> JSON:
        data: JSON = self._memo(req, ("repo", repo.full_name), lambda: self._build_repo_json(repo))
        return data

    def _build_repo_json(self, repo: _Repo) -> JSON:
        base = self._api_base(repo)
        open_issues = sum(i.state == "open" for i in repo.issues.values())
        return {
            "id": repo.id,
            "node_id": _node_id("R", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": True,
            "owner": self._user_json(repo.owner),
            "html_url": f"{self.url}/{repo.full_name}",
            "description": None,
            "fork": False,
            "url": base,
            "branches_url": f"{base}/branches{{/branch}}",
            "comments_url": f"{base}/comments{{/number}}",
            "commits_url": f"{base}/commits{{/sha}}",
            "git_commits_url": f"{base}/git/commits{{/sha}}",
            "git_refs_url": f"{base}/git/refs{{/sha}}",
            "issue_comment_url": f"{base}/issues/comments{{/number}}",
            "issues_url": f"{base}/issues{{/number}}",
            "labels_url": f"{base}/labels{{/name}}",
            "pulls_url": f"{base}/pulls{{/number}}",
            "created_at": _iso(repo.created_at),
            "updated_at": _iso(repo.created_at),
            "pushed_at": _iso(repo.created_at),
            "git_url": repo.bare.as_uri(),
            "ssh_url": repo.bare.as_uri(),
            "clone_url": repo.bare.as_uri(),
            "homepage": None,
            "size": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": None,
            "has_issues": True,
            "has_projects": False,
            "has_downloads": False,
            "has_wiki": False,
            "has_pages": False,
            "has_discussions": False,
            "forks_count": 0,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_issues,
            "license": None,
            "allow_forking": True,
            "is_template": False,
            "topics": [],
            "visibility": "private",
            "forks": 0,
            "open_issues": open_issues,
            "watchers": 0,
            "default_branch": repo.default_branch,
            "permissions": {"admin": True, "maintain": True, "push": True, "triage": True, "pull": True},
            "allow_squash_merge": True,
            "allow_merge_commit": True,
            "allow_rebase_merge": True,
            "allow_auto_merge": False,
            "delete_branch_on_merge": False,
        }

    def _label_json(self, repo: _Repo, label: _Label) -> JSON:
        return {
            "id": label.id,
            "node_id": _node_id("LA", label.id),
            "url": f"{self._api_base(repo)}/labels/{_q(label.name)}",
            "name": label.name,
            "color": label.color,
            "default": False,
            "description": label.description,
        }

    def _issue_labels(self, repo: _Repo, issue: _Issue) -> list[JSON]:
        return [self._label_json(repo, repo.labels[k]) for k in issue.labels if k in repo.labels]

    def _comment_count(self, repo: _Repo, number: int, req: _Request | None = None) -> int:
        def count_all() -> dict[int, int]:
            counts: dict[int, int] = {}
            for c in repo.comments.values():
                counts[c.number] = counts.get(c.number, 0) + 1
            return counts

        counts: dict[int, int] = self._memo(req, ("comment_counts", repo.full_name), count_all)
        return counts.get(number, 0)

    def _html_issue(self, repo: _Repo, issue: _Issue) -> str:
        kind = "pull" if issue.pull is not None else "issues"
        return f"{self.url}/{repo.full_name}/{kind}/{issue.number}"

    def _issue_json(self, req: _Request, repo: _Repo, issue: _Issue) -> JSON:
        base = self._api_base(repo)
        url = f"{base}/issues/{issue.number}"
        html = self._html_issue(repo, issue)
        data: JSON = {
            "url": url,
            "repository_url": base,
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": html,
            "id": issue.id,
            "node_id": _node_id("PR" if issue.pull else "I", issue.id),
            "number": issue.number,
            "title": issue.title,
            "user": self._user_json(issue.user),
            "labels": self._issue_labels(repo, issue),
            "state": issue.state,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": self._comment_count(repo, issue.number, req),
            "created_at": _iso(issue.created_at),
            "updated_at": _iso(issue.updated_at),
            "closed_at": _iso(issue.closed_at),
            "author_association": "OWNER",
            "active_lock_reason": None,
            "body": issue.body,
            "closed_by": None,
            "timeline_url": f"{url}/timeline",
            "performed_via_github_app": None,
            "state_reason": issue.state_reason,
        }
        if issue.pull is not None:
            self._refresh_pull(req, repo, issue)
            data["draft"] = issue.pull.draft
            data["pull_request"] = {
                "url": f"{base}/pulls/{issue.number}",
                "html_url": html,
                "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": _iso(issue.pull.merged_at),
            }
        return data

    def _pull_part(self, req: _Request, repo: _Repo, ref: str, sha: str) -> JSON:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self._user_json(repo.owner),
            "repo": self._repo_json(repo, req),
        }

    def _pull_json(self, req: _Request, repo: _Repo, issue: _Issue, *, full: bool) -> JSON:
        pull = issue.pull
        assert pull is not None
        self._refresh_pull(req, repo, issue)
        base = self._api_base(repo)
        url = f"{base}/pulls/{issue.number}"
        issue_url = f"{base}/issues/{issue.number}"
        html = self._html_issue(repo, issue)
        data: JSON = {
            "url": url,
            "id": pull.id,
            "node_id": _node_id("PR", pull.id),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": issue_url,
            "commits_url": f"{url}/commits",
            "review_comments_url": f"{url}/comments",
            "review_comment_url": f"{base}/pulls/comments{{/number}}",
            "comments_url": f"{issue_url}/comments",
            "statuses_url": f"{base}/statuses/{pull.head_sha}",
            "number": issue.number,
            "state": issue.state,
            "locked": False,
            "title": issue.title,
            "user": self._user_json(issue.user),
            "body": issue.body,
            "labels": self._issue_labels(repo, issue),
            "milestone": None,
            "active_lock_reason": None,
            "created_at": _iso(issue.created_at),
            "updated_at": _iso(issue.updated_at),
            "closed_at": _iso(issue.closed_at),
            "merged_at": _iso(pull.merged_at),
            "merge_commit_sha": pull.merge_commit_sha,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self._pull_part(req, repo, pull.head_ref, pull.head_sha),
            "base": self._pull_part(req, repo, pull.base_ref, pull.base_sha),
            "_links": {
                "self": {"href": url},
                "html": {"href": html},
                "issue": {"href": issue_url},
                "comments": {"href": f"{issue_url}/comments"},
                "review_comments": {"href": f"{url}/comments"},
                "review_comment": {"href": f"{base}/pulls/comments{{/number}}"},
                "commits": {"href": f"{url}/commits"},
                "statuses": {"href": f"{base}/statuses/{pull.head_sha}"},
            },
            "author_association": "OWNER",
            "auto_merge": None,
            "draft": pull.draft,
        }
        if full:
            is_open = issue.state == "open"
            commits, additions, deletions, changed = self._diff_stats(repo, pull)
            data.update(
                {
                    "merged": pull.merged,
                    "mergeable": True if is_open else None,
                    "rebaseable": True if is_open else None,
                    "mergeable_state": ("draft" if pull.draft else "clean") if is_open else "unknown",
                    "merged_by": self._user_json(self.login) if pull.merged else None,
                    "comments": self._comment_count(repo, issue.number, req),
                    "review_comments": 0,
                    "maintainer_can_modify": pull.maintainer_can_modify,
                    "commits": commits,
                    "additions": additions,
                    "deletions": deletions,
                    "changed_files": changed,
                }
            )
        return data

    def _diff_stats(self, repo: _Repo, pull: _Pull) -> tuple[int, int, int, int]:
        count = _git_proc(repo.bare, "rev-list", "--count", f"{pull.base_sha}..{pull.head_sha}")
        numstat = _git_proc(repo.bare, "diff", "--numstat", f"{pull.base_sha}...{pull.head_sha}")
        additions = deletions = changed = 0
        for line in numstat.stdout.splitlines():
            add, delete, _ = line.split("\t", 2)
            changed += 1
            additions += int(add) if add.isdigit() else 0
            deletions += int(delete) if delete.isdigit() else 0
        commits = int(count.stdout.strip() or 0) if count.returncode == 0 else 0
        return min(commits, MAX_PR_COMMITS), additions, deletions, changed

    def _git_commit_json(self, repo: _Repo, c: _Commit) -> JSON:
        base = self._api_base(repo)
        return {
            "sha": c.sha,
            "node_id": _node_id("C", int(c.sha[:8], 16)),
            "url": f"{base}/git/commits/{c.sha}",
            "html_url": f"{self.url}/{repo.full_name}/commit/{c.sha}",
            "author": {"name": c.author_name, "email": c.author_email, "date": _iso(c.author_time)},
            "committer": {
                "name": c.committer_name,
                "email": c.committer_email,
                "date": _iso(c.committer_time),
            },
            "tree": {"sha": c.tree, "url": f"{base}/git/trees/{c.tree}"},
            "message": c.message,
            "parents": [
                {
                    "sha": p,
                    "url": f"{base}/git/commits/{p}",
                    "html_url": f"{self.url}/{repo.full_name}/commit/{p}",
                }
                for p in c.parents
            ],
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
                "verified_at": None,
            },
        }

    def _commit_json(self, repo: _Repo, c: _Commit) -> JSON:
        base = self._api_base(repo)
        git_commit = self._git_commit_json(repo, c)
        inner = {k: git_commit[k] for k in ("author", "committer", "message", "tree", "url", "verification")}
        inner["comment_count"] = 0
        return {
            "sha": c.sha,
            "node_id": git_commit["node_id"],
            "commit": inner,
            "url": f"{base}/commits/{c.sha}",
            "html_url": git_commit["html_url"],
            "comments_url": f"{base}/commits/{c.sha}/comments",
            "author": None,
            "committer": None,
            "parents": [
                {
                    "sha": p,
                    "url": f"{base}/commits/{p}",
                    "html_url": f"{self.url}/{repo.full_name}/commit/{p}",
                }
                for p in c.parents
            ],
        }

    def _comment_json(self, repo: _Repo, c: _Comment) -> JSON:
        base = self._api_base(repo)
        issue = repo.issues.get(c.number)
        html = self._html_issue(repo, issue) if issue is not None else f"{self.url}/{repo.full_name}"
        return {
            "url": f"{base}/issues/comments/{c.id}",
            "html_url": f"{html}#issuecomment-{c.id}",
            "issue_url": f"{base}/issues/{c.number}",
            "id": c.id,
            "node_id": _node_id("IC", c.id),
            "user": self._user_json(c.user),
            "created_at": _iso(c.created_at),
            "updated_at": _iso(c.updated_at),
            "author_association": "OWNER",
            "body": c.body,
            "performed_via_github_app": None,
        }

    def _ref_json(self, repo: _Repo, ref: _Ref) -> JSON:
        base = self._api_base(repo)
        short = ref.name.removeprefix("refs/")
        kind = "commits" if ref.type == "commit" else f"{ref.type}s"
        return {
            "ref": ref.name,
            "node_id": _node_id("REF", int(hashlib.sha1(ref.name.encode()).hexdigest()[:8], 16)),
            "url": f"{base}/git/refs/{_q(short, safe='/')}",
            "object": {"sha": ref.sha, "type": ref.type, "url": f"{base}/git/{kind}/{ref.sha}"},
        }

    def _rate(self) -> JSON:
        now = int(self._clock())
        if now >= self._rate_reset:
            self._rate_used, self._rate_reset = 0, now + 3600
        return {
            "limit": RATE_LIMIT,
            "used": self._rate_used,
            "remaining": max(RATE_LIMIT - self._rate_used, 0),
            "reset": self._rate_reset,
            "resource": "core",
        }

    # ---- internals: pagination ------------------------------------------------------------------------

    def _paginate(self, req: _Request, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        per_page = _int(req.query.get("per_page"), DEFAULT_PER_PAGE)
        per_page = DEFAULT_PER_PAGE if per_page < 1 else min(per_page, MAX_PER_PAGE)
        page = max(_int(req.query.get("page"), 1), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page : page * per_page]

        def link(p: int) -> str:
            pairs = [(k, v) for k, v in req.query_pairs if k != "page"] + [("page", str(p))]
            return f"<{self.url}{req.raw_path}?{urllib.parse.urlencode(pairs)}>"

        links = []
        if page > 1:
            links.append(f'{link(min(page - 1, last))}; rel="prev"')
        if page < last:
            links += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            links.append(f'{link(1)}; rel="first"')
        return chunk, ({"Link": ", ".join(links)} if links else {})

    def _page(self, req: _Request, items: list[Any], render: Callable[[Any], JSON]) -> _Response:
        chunk, headers = self._paginate(req, items)
        return _Response(200, [render(x) for x in chunk], headers)

    # ---- internals: request handling ------------------------------------------------------------------

    def _serve(self, handler: _Handler) -> None:
        method = handler.command.upper()
        target = handler.path
        if "://" in target.split("?", 1)[0]:  # absolute-form request target
            target = urllib.parse.urlsplit(target)._replace(scheme="", netloc="").geturl()
        raw_path, _, query_string = target.partition("?")
        pairs = urllib.parse.parse_qsl(query_string, keep_blank_values=True)
        try:
            raw_body = handler.read_body()
        except (OSError, ValueError):
            handler.close_connection = True
            return
        path = urllib.parse.unquote(raw_path)
        if path.startswith("/_fake/"):
            self._send(handler, method, self._admin(method, path, raw_body))
            return

        fault = self._take_fault(method, path)
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)
        query = dict(pairs)
        fault_name = fault.describe() if fault is not None else None
        body_for_record = _loads_or_none(raw_body)
        if fault is not None and fault.kind in ("status", "rate_limit", "secondary_rate_limit"):
            resp = self._fault_response(fault)
        elif fault is not None and fault.kind == "late_effect":
            late = _Request(method, raw_path, path, query, pairs, handler.headers, None)
            timer = threading.Timer(fault.seconds, self._late, (late, raw_body))
            timer.daemon = True
            timer.start()
            resp = _Response(
                fault.code, {"message": fault.message, "documentation_url": DOCS, "status": str(fault.code)}
            )
        elif fault is not None and fault.kind == "drop_before_effect":
            self._record(RecordedRequest(method, path, query, None, body_for_record, fault_name))
            handler.close_connection = True
            return
        else:
            req = _Request(method, raw_path, path, query, pairs, handler.headers, None)
            resp = self._api(req, raw_body)
        if fault is not None and fault.kind == "drop_after_effect":
            self._record(RecordedRequest(method, path, query, None, body_for_record, fault_name))
            handler.close_connection = True
            return
        # Record before writing: once the client has the response it may inspect server.requests.
        self._send(
            handler,
            method,
            resp,
            before_write=lambda code: self._record(
                RecordedRequest(method, path, query, code, body_for_record, fault_name)
            ),
            refund_on_304=fault is None or fault.kind in ("delay", "drop_after_effect"),
        )

    def _late(self, req: _Request, raw_body: bytes) -> None:
        """Perform a request whose client was already told it failed (the ``late_effect`` fault)."""
        try:
            self._api(req, raw_body)
        except Exception:  # a failure here is a bug of the fake: report it like the others
            with self._lock:
                self.errors.append(traceback.format_exc())

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for injection in self._injections:
                if injection.matches(method, path):
                    if injection.remaining is not None:
                        injection.remaining -= 1
                    injection.hits += 1
                    return injection.fault
        return None

    def _record(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(rec)

    def _fault_response(self, fault: Fault) -> _Response:
        with self._lock:
            rate = self._rate()
        if fault.kind == "status":
            return _Response(
                fault.code, {"message": fault.message, "documentation_url": DOCS, "status": str(fault.code)}
            )
        reset = int(self._clock()) + fault.retry_after
        headers: dict[str, str] = {}
        if fault.kind == "rate_limit":
            with self._lock:
                user_id = self._user_id(self.login)
            message = (
                f"API rate limit exceeded for user ID {user_id}. If you reach out to GitHub "
                "Support for help, please include the request ID FAKE:0000."
            )
            headers = {
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Used": str(RATE_LIMIT),
                "X-RateLimit-Reset": str(reset),
            }
            if fault.code == 429:
                headers["Retry-After"] = str(fault.retry_after)
        else:
            message = (
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
                "If you reach out to GitHub Support for help, please include the request ID FAKE:0000."
            )
            headers = {"Retry-After": str(fault.retry_after), "X-RateLimit-Remaining": str(rate["remaining"])}
        doc = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
        return _Response(
            fault.code, {"message": message, "documentation_url": doc, "status": str(fault.code)}, headers
        )

    def _api(self, req: _Request, raw_body: bytes) -> _Response:
        try:
            with self._lock:
                self._check_auth(req)
                if req.path != "/rate_limit":
                    self._rate()
                    self._rate_used += 1
                if raw_body.strip():
                    try:
                        req.body = json.loads(raw_body)
                    except ValueError:
                        raise _error(400, "Problems parsing JSON") from None
                return self._route(req)
        except _HTTPError as e:
            return _Response(e.status, e.body, e.headers)
        except Exception:
            tb = traceback.format_exc()
            with self._lock:
                self.errors.append(tb)
            return _Response(500, {"message": f"fakegithub internal error: {tb.splitlines()[-1]}"})

    def _check_auth(self, req: _Request) -> None:
        if not self.tokens:
            return
        header = req.headers.get("Authorization")
        if not header:
            raise _error(401, "Requires authentication")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() not in ("token", "bearer") or token.strip() not in self.tokens:
            raise _error(401, "Bad credentials")

    def _route(self, req: _Request) -> _Response:
        stripped = req.raw_path.rstrip("/") or "/"
        for method, pattern, keep_slash, func in self._routes:
            m = pattern.fullmatch(req.raw_path if keep_slash else stripped)
            if m is None or method != ("GET" if req.method == "HEAD" else req.method):
                continue
            params = {k: urllib.parse.unquote(v) for k, v in m.groupdict().items() if v is not None}
            if "o" in params:
                key = f"{params.pop('o')}/{params.pop('r')}".lower()
                repo = self._repos.get(key)
                if repo is None:
                    raise _not_found()
                return func(req, repo, **params)
            return func(req, **params)
        raise _not_found()

    def _send(
        self,
        handler: _Handler,
        method: str,
        resp: _Response,
        before_write: Callable[[int], None] | None = None,
        *,
        refund_on_304: bool = False,
    ) -> int:
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            "X-GitHub-Request-Id": f"FAKE:{next(self._request_ids):08X}",
            "X-OAuth-Scopes": "repo",
            "X-Accepted-OAuth-Scopes": "",
            "Vary": "Accept, Authorization, Cookie, X-GitHub-OTP",
        }
        payload = b"" if resp.empty else json.dumps(resp.body, separators=(",", ":")).encode()
        code = resp.status
        if method in ("GET", "HEAD") and code == 200:
            etag = f'W/"{hashlib.sha256(payload).hexdigest()}"'
            headers["ETag"] = etag
            headers["Cache-Control"] = CACHE_CONTROL
            if etag in [t.strip() for t in (handler.headers.get("If-None-Match") or "").split(",")]:
                code, payload = 304, b""
        with self._lock:
            if code == 304 and refund_on_304:  # GitHub does not charge conditional requests answered 304
                self._rate_used = max(self._rate_used - 1, 0)
            rate = self._rate()
        headers.update(
            {
                "X-RateLimit-Limit": str(rate["limit"]),
                "X-RateLimit-Remaining": str(rate["remaining"]),
                "X-RateLimit-Used": str(rate["used"]),
                "X-RateLimit-Reset": str(rate["reset"]),
                "X-RateLimit-Resource": "core",
            }
        )
        headers.update(resp.headers)
        if code in (204, 304):
            headers.pop("Content-Type", None)
            payload = b""
        if before_write is not None:
            before_write(code)
        try:
            handler.send_response(code, _REASONS.get(code))
            for k, v in headers.items():
                handler.send_header(k, v)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if payload and method != "HEAD":
                handler.wfile.write(payload)
            handler.wfile.flush()
        except OSError:  # the client went away (e.g. after a delay fault)
            handler.close_connection = True
        return code

    # ---- admin endpoints ------------------------------------------------------------------------------

    def _admin(self, method: str, path: str, raw_body: bytes) -> _Response:
        try:
            body = json.loads(raw_body) if raw_body.strip() else {}
            if not isinstance(body, dict):
                raise ValueError("expected a JSON object")
            action = (method, path.rstrip("/"))
            if action == ("GET", "/_fake/state"):
                return _Response(200, self.state())
            if action == ("GET", "/_fake/requests"):
                return _Response(200, [r.__dict__ for r in self.requests])
            if action == ("POST", "/_fake/reset_requests"):
                self.reset_requests()
                return _Response(200, {"ok": True})
            if action == ("POST", "/_fake/inject"):
                times = body.get("times", 1)
                injection = self.inject(
                    str(body.get("method", "*")),
                    str(body.get("path", ".*")),
                    fault_from_json(body),
                    None if times is None else int(times),
                )
                return _Response(200, {"ok": True, "fault": injection.fault.describe()})
            if action == ("POST", "/_fake/clear_faults"):
                self.clear_faults()
                return _Response(200, {"ok": True})
            if action == ("POST", "/_fake/seed_prs"):
                numbers = self.seed_prs(
                    int(body.get("count", 1)),
                    body.get("repo"),
                    branch_prefix=str(body.get("branch_prefix", "seed/pr-")),
                    base=body.get("base"),
                    state=str(body.get("state", "open")),
                    title=str(body.get("title", "Seeded PR {n}")),
                    body=str(body.get("body", "")),
                    labels=[str(x) for x in body.get("labels", [])],
                )
                return _Response(201, {"numbers": numbers})
            if action == ("POST", "/_fake/merge"):
                self.merge_pr(int(body["number"]), body.get("repo"))
                return _Response(200, {"ok": True})
            if action == ("POST", "/_fake/add_repo"):
                bare = self.add_repo(str(body["name"]), str(body.get("default_branch", "main")))
                return _Response(201, {"name": body["name"], "path": str(bare)})
            return _Response(404, {"message": "Not Found"})
        except (KeyError, ValueError, TypeError, re.error) as e:
            return _Response(400, {"message": f"{type(e).__name__}: {e}"})

    # ---- routes ---------------------------------------------------------------------------------------

    def _build_routes(self) -> list[tuple[str, re.Pattern[str], bool, _ROUTE]]:
        repo = r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)"
        table: list[tuple[str, str, _ROUTE]] = [
            ("GET", r"/user", self._get_user),
            ("GET", r"/users/(?P<login>[^/]+)", self._get_named_user),
            ("GET", r"/rate_limit", self._get_rate_limit),
            ("GET", repo, self._get_repo),
            ("GET", repo + r"/pulls", self._list_pulls),
            ("POST", repo + r"/pulls", self._create_pull),
            ("GET", repo + r"/pulls/(?P<n>\d+)", self._get_pull),
            ("PATCH", repo + r"/pulls/(?P<n>\d+)", self._update_pull),
            ("GET", repo + r"/pulls/(?P<n>\d+)/commits", self._list_pull_commits),
            ("GET", repo + r"/pulls/(?P<n>\d+)/merge", self._pull_merged),
            ("GET", repo + r"/issues", self._list_issues),
            ("POST", repo + r"/issues", self._create_issue),
            ("GET", repo + r"/issues/comments", self._list_repo_comments),
            ("GET", repo + r"/issues/comments/(?P<cid>\d+)", self._get_comment),
            ("PATCH", repo + r"/issues/comments/(?P<cid>\d+)", self._update_comment),
            ("DELETE", repo + r"/issues/comments/(?P<cid>\d+)", self._delete_comment),
            ("GET", repo + r"/issues/(?P<n>\d+)", self._get_issue),
            ("PATCH", repo + r"/issues/(?P<n>\d+)", self._update_issue),
            ("GET", repo + r"/issues/(?P<n>\d+)/labels", self._list_issue_labels),
            ("POST", repo + r"/issues/(?P<n>\d+)/labels", self._add_issue_labels),
            ("PUT", repo + r"/issues/(?P<n>\d+)/labels", self._set_issue_labels),
            ("DELETE", repo + r"/issues/(?P<n>\d+)/labels", self._clear_issue_labels),
            ("DELETE", repo + r"/issues/(?P<n>\d+)/labels/(?P<name>.+)", self._remove_issue_label),
            ("GET", repo + r"/issues/(?P<n>\d+)/comments", self._list_comments),
            ("POST", repo + r"/issues/(?P<n>\d+)/comments", self._create_comment),
            ("GET", repo + r"/labels", self._list_labels),
            ("POST", repo + r"/labels", self._create_label),
            ("GET", repo + r"/labels/(?P<name>.+)", self._get_label),
            ("PATCH", repo + r"/labels/(?P<name>.+)", self._update_label),
            ("DELETE", repo + r"/labels/(?P<name>.+)", self._delete_label),
            ("GET", repo + r"/branches", self._list_branches),
            ("GET", repo + r"/branches/(?P<branch>.+)", self._get_branch),
            ("GET", repo + r"/commits/(?P<sha>[^/]+)", self._get_commit),
            ("GET", repo + r"/git/commits/(?P<sha>[0-9a-fA-F]+)", self._get_git_commit),
            ("GET", repo + r"/git/ref/(?P<ref>.+)", self._get_ref),
            ("GET", repo + r"/git/refs/(?P<ref>.+)", self._get_refs_legacy),
            ("POST", repo + r"/git/refs", self._create_ref),
            ("PATCH", repo + r"/git/refs/(?P<ref>.+)", self._update_ref),
            ("DELETE", repo + r"/git/refs/(?P<ref>.+)", self._delete_ref),
        ]
        routes = [
            (
                "GET",
                re.compile(repo + r"/git/matching-refs(?:/(?P<ref>.*))?"),
                True,
                self._matching_refs,
            )
        ]
        routes += [(m, re.compile(p), False, f) for m, p, f in table]
        return routes

    # -- users, rate limit, repo

    def _get_user(self, req: _Request) -> _Response:
        data = self._user_json(self.login)
        data.update(
            {
                "name": self.login,
                "company": None,
                "blog": "",
                "location": None,
                "email": None,
                "hireable": None,
                "bio": None,
                "twitter_username": None,
                "public_repos": 0,
                "public_gists": 0,
                "followers": 0,
                "following": 0,
                "created_at": _iso(0),
                "updated_at": _iso(0),
            }
        )
        return _Response(200, data)

    def _get_named_user(self, req: _Request, login: str) -> _Response:
        known = login == self.login or any(r.owner == login for r in self._repos.values())
        if not known:
            raise _not_found()
        return _Response(200, self._user_json(login))

    def _get_rate_limit(self, req: _Request) -> _Response:
        core = self._rate()
        reset = core["reset"]

        def other(limit: int, resource: str) -> JSON:
            return {"limit": limit, "used": 0, "remaining": limit, "reset": reset, "resource": resource}

        resources = {
            "core": core,
            "search": other(30, "search"),
            "graphql": other(5000, "graphql"),
            "integration_manifest": other(5000, "integration_manifest"),
            "code_search": other(10, "code_search"),
        }
        return _Response(200, {"resources": resources, "rate": core})

    def _get_repo(self, req: _Request, repo: _Repo) -> _Response:
        return _Response(200, self._repo_json(repo, req))

    # -- pulls

    def _pull_issue(self, repo: _Repo, n: str) -> _Issue:
        issue = repo.issues.get(int(n))
        if issue is None or issue.pull is None:
            raise _not_found()
        return issue

    def _list_pulls(self, req: _Request, repo: _Repo) -> _Response:
        state = req.query.get("state", "open") or "open"
        if state not in ("open", "closed", "all"):
            raise _invalid("PullRequest", {"field": "state", "code": "invalid"})
        items = [i for i in repo.issues.values() if i.pull is not None and state in ("all", i.state)]
        head = req.query.get("head", "")
        if ":" in head:  # GitHub ignores a head filter that lacks the owner: prefix
            owner, _, branch = head.partition(":")
            items = [
                i
                for i in items
                if owner.lower() == repo.owner.lower()
                and (not branch or (i.pull is not None and i.pull.head_ref == branch))
            ]
        if req.query.get("base"):
            items = [i for i in items if i.pull and i.pull.base_ref == req.query["base"]]
        sort = req.query.get("sort", "created") or "created"
        default_direction = "desc" if sort == "created" else "asc"
        descending = (req.query.get("direction") or default_direction) == "desc"
        keys: dict[str, Callable[[_Issue], tuple[float, int]]] = {
            "created": lambda i: (i.created_at, i.number),
            "updated": lambda i: (i.updated_at, i.number),
            "popularity": lambda i: (self._comment_count(repo, i.number, req), i.number),
            "long-running": lambda i: (-i.created_at, -i.number),
        }
        if sort not in keys:
            raise _invalid("PullRequest", {"field": "sort", "code": "invalid"})
        items.sort(key=keys[sort], reverse=descending)
        return self._page(req, items, lambda i: self._pull_json(req, repo, i, full=False))

    def _create_pull(self, req: _Request, repo: _Repo) -> _Response:
        doc = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
        body = _body_object(req)
        for required in ("head", "base"):
            if not isinstance(body.get(required), str) or not body[required]:
                raise _invalid("PullRequest", {"field": required, "code": "missing_field"}, doc=doc)
        if "issue" in body:
            raise _invalid(
                "PullRequest",
                {"code": "custom", "message": "fakegithub cannot convert issues to pull requests"},
                doc=doc,
            )
        title = body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise _invalid("PullRequest", {"field": "title", "code": "missing_field"}, doc=doc)
        head: str = body["head"]
        base: str = body["base"]
        owner, sep, branch = head.partition(":")
        if not sep:
            owner, branch = repo.owner, head
        if owner.lower() != repo.owner.lower():
            raise _invalid("PullRequest", {"field": "head", "code": "invalid"}, doc=doc)
        branches = self._branches(req, repo)
        if base not in branches:
            raise _invalid("PullRequest", {"field": "base", "code": "invalid"}, doc=doc)
        if branch not in branches:
            raise _invalid("PullRequest", {"field": "head", "code": "invalid"}, doc=doc)
        self._check_no_open_duplicate(req, repo, branch, base, doc=doc)
        ahead = _git_proc(repo.bare, "rev-list", "--count", f"{branches[base]}..{branches[branch]}")
        if ahead.returncode == 0 and ahead.stdout.strip() == "0":
            raise _invalid(
                "PullRequest",
                {"code": "custom", "message": f"No commits between {base} and {branch}"},
                doc=doc,
            )
        now = self._now()
        pull = _Pull(
            next(self._ids),
            branch,
            base,
            branches[branch],
            branches[base],
            draft=bool(body.get("draft", False)),
            maintainer_can_modify=bool(body.get("maintainer_can_modify", False)),
        )
        body_text = body.get("body")
        issue = _Issue(
            repo.next_number,
            next(self._ids),
            title,
            body_text if isinstance(body_text, str) else None,
            self.login,
            now,
            now,
            pull=pull,
        )
        repo.issues[issue.number] = issue
        repo.next_number += 1
        self._set_pull_refs(repo, {issue.number: pull.head_sha})
        data = self._pull_json(req, repo, issue, full=True)
        return _Response(201, data, {"Location": data["url"]})

    def _check_no_open_duplicate(
        self, req: _Request, repo: _Repo, branch: str, base: str, *, doc: str = DOCS, exclude: int = 0
    ) -> None:
        for other in repo.issues.values():
            if (
                other.pull is not None
                and other.number != exclude
                and other.state == "open"
                and other.pull.head_ref == branch
                and other.pull.base_ref == base
            ):
                message = f"A pull request already exists for {repo.owner}:{branch}."
                raise _invalid("PullRequest", {"code": "custom", "message": message}, doc=doc)

    def _get_pull(self, req: _Request, repo: _Repo, n: str) -> _Response:
        return _Response(200, self._pull_json(req, repo, self._pull_issue(repo, n), full=True))

    def _update_pull(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._pull_issue(repo, n)
        assert issue.pull is not None
        body = _body_object(req)
        if "base" in body and body["base"] not in self._branches(req, repo):
            raise _invalid("PullRequest", {"field": "base", "code": "invalid"})
        if "state" in body:
            self._set_state(req, repo, issue, body["state"], None)
        if "base" in body:
            issue.pull.base_ref = body["base"]
        self._apply_common_edits(issue, body)
        return _Response(200, self._pull_json(req, repo, issue, full=True))

    def _apply_common_edits(self, issue: _Issue, body: JSON) -> None:
        if isinstance(body.get("title"), str):
            issue.title = body["title"]
        if "body" in body and (body["body"] is None or isinstance(body["body"], str)):
            issue.body = body["body"]
        issue.updated_at = self._now()

    def _set_state(self, req: _Request, repo: _Repo, issue: _Issue, state: Any, reason: Any) -> None:
        if state not in ("open", "closed"):
            resource = "PullRequest" if issue.pull else "Issue"
            raise _invalid(resource, {"field": "state", "code": "invalid"})
        now = self._now()
        if state == "closed" and issue.state == "open":
            self._refresh_pull(req, repo, issue)
            issue.state, issue.closed_at = "closed", now
            if issue.pull is None:
                issue.state_reason = reason if reason in ("completed", "not_planned") else "completed"
        elif state == "open" and issue.state == "closed":
            pull = issue.pull
            if pull is not None:
                if pull.merged:
                    raise _invalid(
                        "PullRequest",
                        {
                            "field": "state",
                            "code": "custom",
                            "message": "state cannot be changed. The pull request has already been merged.",
                        },
                    )
                if pull.head_ref not in self._branches(req, repo):
                    raise _invalid(
                        "PullRequest",
                        {
                            "field": "state",
                            "code": "custom",
                            "message": "state cannot be changed. The head branch was deleted.",
                        },
                    )
                self._check_no_open_duplicate(req, repo, pull.head_ref, pull.base_ref, exclude=issue.number)
            else:
                issue.state_reason = "reopened"
            issue.state, issue.closed_at = "open", None
            self._refresh_pull(req, repo, issue)
        issue.updated_at = now

    def _list_pull_commits(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._pull_issue(repo, n)
        assert issue.pull is not None
        self._refresh_pull(req, repo, issue)
        commits = self._log(repo, "--reverse", f"{issue.pull.base_sha}..{issue.pull.head_sha}")
        return self._page(req, commits[:MAX_PR_COMMITS], lambda c: self._commit_json(repo, c))

    def _pull_merged(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._pull_issue(repo, n)
        if issue.pull is not None and issue.pull.merged:
            return _Response(204, empty=True)
        raise _not_found()

    # -- issues

    def _issue(self, repo: _Repo, n: str) -> _Issue:
        issue = repo.issues.get(int(n))
        if issue is None:
            raise _not_found()
        return issue

    def _list_issues(self, req: _Request, repo: _Repo) -> _Response:
        state = req.query.get("state", "open") or "open"
        if state not in ("open", "closed", "all"):
            raise _invalid("Issue", {"field": "state", "code": "invalid"})
        items = [i for i in repo.issues.values() if state in ("all", i.state)]
        wanted = [x.strip().lower() for x in req.query.get("labels", "").split(",") if x.strip()]
        if wanted:
            items = [i for i in items if all(w in i.labels for w in wanted)]
        if req.query.get("creator"):
            items = [i for i in items if i.user.lower() == req.query["creator"].lower()]
        since = _parse_iso(req.query.get("since", "")) if req.query.get("since") else None
        if since is not None:
            items = [i for i in items if i.updated_at >= since]
        sort = req.query.get("sort", "created") or "created"
        keys: dict[str, Callable[[_Issue], tuple[float, int]]] = {
            "created": lambda i: (i.created_at, i.number),
            "updated": lambda i: (i.updated_at, i.number),
            "comments": lambda i: (self._comment_count(repo, i.number, req), i.number),
        }
        if sort not in keys:
            raise _invalid("Issue", {"field": "sort", "code": "invalid"})
        items.sort(key=keys[sort], reverse=(req.query.get("direction") or "desc") == "desc")
        return self._page(req, items, lambda i: self._issue_json(req, repo, i))

    def _label_names(self, value: Any) -> list[str]:
        if isinstance(value, dict):
            value = value.get("labels")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise _invalid("Label", {"field": "labels", "code": "invalid"})
        names = []
        for item in value:
            name = item.get("name") if isinstance(item, dict) else item
            if not isinstance(name, str) or not name.strip():
                raise _invalid("Label", {"field": "name", "code": "invalid"})
            names.append(name)
        return names

    def _attach_labels(self, repo: _Repo, issue: _Issue, names: list[str], *, replace: bool) -> None:
        keys = [self._ensure_label(repo, name).name.lower() for name in names]
        if replace:
            issue.labels = []
        for key in keys:
            if key not in issue.labels:
                issue.labels.append(key)
        issue.updated_at = self._now()

    def _create_issue(self, req: _Request, repo: _Repo) -> _Response:
        body = _body_object(req)
        title = body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise _invalid("Issue", {"field": "title", "code": "missing_field"})
        now = self._now()
        text = body.get("body")
        issue = _Issue(
            repo.next_number,
            next(self._ids),
            title,
            text if isinstance(text, str) else None,
            self.login,
            now,
            now,
        )
        if body.get("labels"):
            self._attach_labels(repo, issue, self._label_names(body["labels"]), replace=True)
        repo.issues[issue.number] = issue
        repo.next_number += 1
        data = self._issue_json(req, repo, issue)
        return _Response(201, data, {"Location": data["url"]})

    def _get_issue(self, req: _Request, repo: _Repo, n: str) -> _Response:
        return _Response(200, self._issue_json(req, repo, self._issue(repo, n)))

    def _update_issue(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        body = _body_object(req)
        if "state" in body:
            self._set_state(req, repo, issue, body["state"], body.get("state_reason"))
        if "labels" in body:
            self._attach_labels(repo, issue, self._label_names(body["labels"] or []), replace=True)
        self._apply_common_edits(issue, body)
        return _Response(200, self._issue_json(req, repo, issue))

    def _list_issue_labels(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        labels = [repo.labels[k] for k in issue.labels if k in repo.labels]
        return self._page(req, labels, lambda label: self._label_json(repo, label))

    def _add_issue_labels(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        self._attach_labels(repo, issue, self._label_names(req.body), replace=False)
        return _Response(200, self._issue_labels(repo, issue))

    def _set_issue_labels(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        self._attach_labels(repo, issue, self._label_names(req.body or []), replace=True)
        return _Response(200, self._issue_labels(repo, issue))

    def _clear_issue_labels(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        issue.labels, issue.updated_at = [], self._now()
        return _Response(204, empty=True)

    def _remove_issue_label(self, req: _Request, repo: _Repo, n: str, name: str) -> _Response:
        issue = self._issue(repo, n)
        if name.lower() not in issue.labels:
            raise _not_found("Label does not exist")
        issue.labels.remove(name.lower())
        issue.updated_at = self._now()
        return _Response(200, self._issue_labels(repo, issue))

    # -- comments

    def _list_comments(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        comments = sorted((c for c in repo.comments.values() if c.number == issue.number), key=lambda c: c.id)
        since = _parse_iso(req.query["since"]) if req.query.get("since") else None
        if since is not None:
            comments = [c for c in comments if c.updated_at >= since]
        return self._page(req, comments, lambda c: self._comment_json(repo, c))

    def _list_repo_comments(self, req: _Request, repo: _Repo) -> _Response:
        comments = sorted(repo.comments.values(), key=lambda c: c.id)
        if (req.query.get("direction") or "asc") == "desc":
            comments.reverse()
        return self._page(req, comments, lambda c: self._comment_json(repo, c))

    def _create_comment(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        body = _body_object(req)
        text = body.get("body")
        if not isinstance(text, str) or not text:
            raise _invalid("IssueComment", {"field": "body", "code": "missing_field"})
        now = self._now()
        comment = _Comment(next(self._ids), issue.number, text, self.login, now, now)
        repo.comments[comment.id] = comment
        issue.updated_at = now
        data = self._comment_json(repo, comment)
        return _Response(201, data, {"Location": data["url"]})

    def _comment(self, repo: _Repo, cid: str) -> _Comment:
        comment = repo.comments.get(int(cid))
        if comment is None:
            raise _not_found()
        return comment

    def _get_comment(self, req: _Request, repo: _Repo, cid: str) -> _Response:
        return _Response(200, self._comment_json(repo, self._comment(repo, cid)))

    def _update_comment(self, req: _Request, repo: _Repo, cid: str) -> _Response:
        comment = self._comment(repo, cid)
        text = _body_object(req).get("body")
        if not isinstance(text, str) or not text:
            raise _invalid("IssueComment", {"field": "body", "code": "missing_field"})
        comment.body, comment.updated_at = text, self._now()
        return _Response(200, self._comment_json(repo, comment))

    def _delete_comment(self, req: _Request, repo: _Repo, cid: str) -> _Response:
        del repo.comments[self._comment(repo, cid).id]
        return _Response(204, empty=True)

    # -- labels

    def _label(self, repo: _Repo, name: str) -> _Label:
        label = repo.labels.get(name.lower())
        if label is None:
            raise _not_found()
        return label

    def _list_labels(self, req: _Request, repo: _Repo) -> _Response:
        labels = sorted(repo.labels.values(), key=lambda label: label.id)
        return self._page(req, labels, lambda label: self._label_json(repo, label))

    def _create_label(self, req: _Request, repo: _Repo) -> _Response:
        body = _body_object(req)
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _invalid("Label", {"field": "name", "code": "missing_field"})
        color = str(body.get("color") or DEFAULT_LABEL_COLOR).lstrip("#")
        if not _COLOR_RE.match(color):
            raise _invalid("Label", {"field": "color", "code": "invalid"})
        if name.lower() in repo.labels:
            raise _invalid("Label", {"field": "name", "code": "already_exists"})
        description = body.get("description")
        label = _Label(
            next(self._ids), name, color.lower(), description if isinstance(description, str) else None
        )
        repo.labels[name.lower()] = label
        data = self._label_json(repo, label)
        return _Response(201, data, {"Location": data["url"]})

    def _get_label(self, req: _Request, repo: _Repo, name: str) -> _Response:
        return _Response(200, self._label_json(repo, self._label(repo, name)))

    def _update_label(self, req: _Request, repo: _Repo, name: str) -> _Response:
        label = self._label(repo, name)
        body = _body_object(req)
        new_name = body.get("new_name") or body.get("name")
        if isinstance(new_name, str) and new_name.lower() != label.name.lower():
            if new_name.lower() in repo.labels:
                raise _invalid("Label", {"field": "name", "code": "already_exists"})
            old_key = label.name.lower()
            del repo.labels[old_key]
            repo.labels[new_name.lower()] = label
            for issue in repo.issues.values():
                issue.labels = [new_name.lower() if k == old_key else k for k in issue.labels]
        if isinstance(new_name, str):
            label.name = new_name
        if isinstance(body.get("color"), str):
            color = body["color"].lstrip("#")
            if not _COLOR_RE.match(color):
                raise _invalid("Label", {"field": "color", "code": "invalid"})
            label.color = color.lower()
        if "description" in body:
            label.description = body["description"]
        return _Response(200, self._label_json(repo, label))

    def _delete_label(self, req: _Request, repo: _Repo, name: str) -> _Response:
        label = self._label(repo, name)
        key = label.name.lower()
        del repo.labels[key]
        for issue in repo.issues.values():
            if key in issue.labels:
                issue.labels.remove(key)
        return _Response(204, empty=True)

    # -- branches, commits, refs

    def _list_branches(self, req: _Request, repo: _Repo) -> _Response:
        base = self._api_base(repo)
        branches = sorted(self._branches(req, repo).items())
        return self._page(
            req,
            branches,
            lambda b: {
                "name": b[0],
                "commit": {"sha": b[1], "url": f"{base}/commits/{b[1]}"},
                "protected": False,
            },
        )

    def _get_branch(self, req: _Request, repo: _Repo, branch: str) -> _Response:
        sha = self._branches(req, repo).get(branch)
        commits = self._log(repo, "-1", sha) if sha else []
        if not commits:
            raise _not_found("Branch not found")
        base = self._api_base(repo)
        quoted = _q(branch, safe="/")
        return _Response(
            200,
            {
                "name": branch,
                "commit": self._commit_json(repo, commits[0]),
                "_links": {
                    "self": f"{base}/branches/{quoted}",
                    "html": f"{self.url}/{repo.full_name}/tree/{quoted}",
                },
                "protected": False,
                "protection": {
                    "enabled": False,
                    "required_status_checks": {"enforcement_level": "off", "contexts": [], "checks": []},
                },
                "protection_url": f"{base}/branches/{quoted}/protection",
            },
        )

    def _get_commit(self, req: _Request, repo: _Repo, sha: str) -> _Response:
        resolved = self._resolve_commit(repo, sha)
        commits = self._log(repo, "-1", resolved) if resolved else []
        if not commits:
            raise _error(422, f"No commit found for SHA: {sha}")
        return _Response(200, self._commit_json(repo, commits[0]))

    def _get_git_commit(self, req: _Request, repo: _Repo, sha: str) -> _Response:
        resolved = self._resolve_commit(repo, sha) if len(sha) == 40 else None
        commits = self._log(repo, "-1", resolved) if resolved else []
        if not commits:
            raise _not_found()
        return _Response(200, self._git_commit_json(repo, commits[0]))

    def _get_ref(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        found = self._refs(req, repo).get(f"refs/{ref}")
        if found is None:
            raise _not_found()
        return _Response(200, self._ref_json(repo, found))

    def _get_refs_legacy(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        """``GET /git/refs/{ref}``: the ref itself, else (legacy GitHub behaviour) refs that start with it."""
        refs = self._refs(req, repo)
        if f"refs/{ref}" in refs:
            return _Response(200, self._ref_json(repo, refs[f"refs/{ref}"]))
        matching = [r for name, r in sorted(refs.items()) if name.startswith(f"refs/{ref}")]
        if not matching:
            raise _not_found()
        return _Response(200, [self._ref_json(repo, r) for r in matching])

    def _matching_refs(self, req: _Request, repo: _Repo, ref: str = "") -> _Response:
        refs = self._refs(req, repo)
        prefix = f"refs/{ref}" if ref else "refs/"
        return _Response(
            200, [self._ref_json(repo, r) for name, r in sorted(refs.items()) if name.startswith(prefix)]
        )

    def _create_ref(self, req: _Request, repo: _Repo) -> _Response:
        body = _body_object(req)
        ref, sha = body.get("ref"), body.get("sha")
        if not isinstance(ref, str) or not isinstance(sha, str):
            raise _invalid(
                "Reference", {"field": "ref" if not isinstance(ref, str) else "sha", "code": "missing_field"}
            )
        if not ref.startswith("refs/") or ref.count("/") < 2:
            raise _error(422, "Reference name must start with 'refs/' and have at least two slashes.")
        if _git_proc(repo.bare, "check-ref-format", ref).returncode != 0:
            raise _error(422, f"{ref} is not a valid ref name.")
        if ref in self._refs(req, repo):
            raise _error(422, "Reference already exists")
        if len(sha) != 40 or self._resolve_commit(repo, sha) is None:
            raise _error(422, "Object does not exist")
        _run_git(repo.bare, "update-ref", ref, sha, "")
        req.git_cache.clear()
        data = self._ref_json(repo, self._refs(req, repo)[ref])
        return _Response(201, data, {"Location": data["url"]})

    def _update_ref(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        body = _body_object(req)
        full = f"refs/{ref}"
        current = self._refs(req, repo).get(full)
        if current is None:
            raise _error(422, "Reference does not exist")
        sha = body.get("sha")
        if not isinstance(sha, str) or len(sha) != 40 or self._resolve_commit(repo, sha) is None:
            raise _error(422, "Object does not exist")
        ancestor = _git_proc(repo.bare, "merge-base", "--is-ancestor", current.sha, sha).returncode == 0
        if not body.get("force") and not ancestor:
            raise _error(422, "Update is not a fast forward")
        _run_git(repo.bare, "update-ref", full, sha, current.sha)
        req.git_cache.clear()
        return _Response(200, self._ref_json(repo, self._refs(req, repo)[full]))

    def _delete_ref(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        full = f"refs/{ref}"
        current = self._refs(req, repo).get(full)
        if current is None:
            raise _error(422, "Reference does not exist")
        _run_git(repo.bare, "update-ref", "-d", full, current.sha)
        req.git_cache.clear()
        return _Response(204, empty=True)


# --------------------------------------------------------------------------------------------------------
# git and small helpers
# --------------------------------------------------------------------------------------------------------

_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE")


def _git_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}


def _git_proc(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=_git_env(),
        check=False,
    )


def _run_git(cwd: Path, *args: str, input_bytes: bytes | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, input=input_bytes, env=_git_env(), check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}"
        )
    return proc.stdout.decode("utf-8", errors="replace")


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _loads_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return None


def _body_object(req: _Request) -> JSON:
    if req.body is None:
        return {}
    if not isinstance(req.body, dict):
        raise _error(400, "Problems parsing JSON")
    return req.body


# --------------------------------------------------------------------------------------------------------
# Standalone mode
# --------------------------------------------------------------------------------------------------------


def _stdin_is_pipe() -> bool:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _wait_for_stdin_eof(done: threading.Event) -> None:
    try:
        while os.read(sys.stdin.fileno(), 65536):
            pass
    except (OSError, ValueError):
        pass
    done.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakegithub",
        description="Serve a fake GitHub REST API until SIGTERM/SIGINT (or stdin EOF on a pipe).",
    )
    parser.add_argument("--repo", action="append", default=[], help="owner/name to create (repeatable)")
    parser.add_argument("--default-branch", default="main")
    parser.add_argument(
        "--token", action="append", default=[], help="accepted token (repeatable; none = no auth)"
    )
    parser.add_argument("--login", default="gitledger-bot", help="login of the authenticated user")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--root", help="directory for the bare repositories (default: a temporary directory)")
    parser.add_argument(
        "--stdin-eof",
        choices=("auto", "exit", "ignore"),
        default="auto",
        help="exit when stdin reaches EOF: auto = only when stdin is a pipe",
    )
    args = parser.parse_args(argv)
    server = FakeGitHub(tokens=args.token, login=args.login, host=args.host, port=args.port, root=args.root)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    try:
        repos = {name: str(server.add_repo(name, args.default_branch)) for name in args.repo}
        server.start()
        print(
            json.dumps({"url": server.url, "repos": repos, "tokens": args.token, "pid": os.getpid()}),
            flush=True,
        )
        if args.stdin_eof == "exit" or (args.stdin_eof == "auto" and _stdin_is_pipe()):
            threading.Thread(target=_wait_for_stdin_eof, args=(done,), daemon=True).start()
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
