"""The fake GitHub's state (repositories, issues, pull requests, comments, labels), its request and
response records, errors, and the git helpers that read the bare repositories."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from pathlib import Path
from typing import Any

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
