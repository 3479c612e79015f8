"""A local, stateful fake of the GitHub REST API, backed by real bare git repositories.

The real PyGithub client (or ``requests``, ``curl``, ``gh api``...) talks to it over HTTP on 127.0.0.1:

    with FakeGitHub(tokens=["t"]) as server:
        bare = server.add_repo("acme/widgets")          # a real bare repository: `git push <bare> main`
        gh = Github(auth=Auth.Token("t"), **server.pygithub_kwargs())
        gh.get_repo("acme/widgets").create_pull(title="x", head="feature", base="main")

Standalone (for examples, benchmarks and other processes)::

    python -m testing.fakegithub --repo acme/widgets --token T [--port 0]

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

import itertools
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from testing.fakegithub.faults import Fault, Injection, RecordedRequest
from testing.fakegithub.render import Render
from testing.fakegithub.routes_issues import IssueRoutes
from testing.fakegithub.routes_pulls import PullRoutes
from testing.fakegithub.routes_repo import RepoRoutes
from testing.fakegithub.serving import Serving
from testing.fakegithub.state import (
    _LOG_FIELDS,
    _LOG_FORMAT,
    DEFAULT_LABEL_COLOR,
    JSON,
    _Commit,
    _git_proc,
    _Issue,
    _Label,
    _Pull,
    _Ref,
    _Repo,
    _Request,
    _run_git,
    _scratch_request,
)
from testing.fakegithub.transport import _Server

# --------------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------------


class FakeGitHub(Render, Serving, RepoRoutes, PullRoutes, IssueRoutes):
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
