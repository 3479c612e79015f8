"""GitHub settings: which repository, token and API, and how patient (see :mod:`gitledger.github.client`).

No PyGithub here: the pre-push hook and the session resolve settings without loading the client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gitledger.core.errors import GitledgerError, UsageError
from gitledger.core.remotes import is_owner_repo, parse_remote_url

if TYPE_CHECKING:
    from gitledger.git.repo import GitRepo

DEFAULT_API_URL = "https://api.github.com"
TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN")


class GitHubError(GitledgerError):
    """GitHub could not be queried or refused a request; the message never contains the token."""


class GitHubSettingsError(UsageError):
    """GitHub settings are missing or invalid (no token, no repository, a bad variable): exit 2."""


class WriteUnknownError(GitHubError):
    """A write got no definite answer (5xx, timeout, dropped connection): it may or may not have happened."""


# -- settings -------------------------------------------------------------------------------------------


def strip_userinfo(url: str) -> str:
    """A URL without its ``user:password@`` part, safe to show."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^@/]*@", r"\1", url.strip())


DAY = 86400.0  # the most any GitHub tuning value may ask for, in seconds


def _number(env: Mapping[str, str], name: str, default: float, minimum: float, maximum: float) -> float:
    """A tuning value; ``maximum`` keeps it sane (a huge timeout overflowed the clock, huge retries never
    ended)."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not minimum <= value <= maximum:
        raise GitHubSettingsError(
            f"{name}={text!r} is not a number from {minimum:g} to {maximum:g}; fix or unset it"
        )
    return value


@dataclass(frozen=True)
class GitHubSettings:
    """Everything needed to talk to one GitHub repository."""

    repo: str
    token: str = field(repr=False)
    api_url: str = DEFAULT_API_URL
    timeout: float = 20.0
    retries: int = 4
    backoff: float = 1.0
    max_wait: float = 60.0
    write_interval: float = 1.0

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]

    @classmethod
    def resolve(
        cls,
        repo: str | None = None,
        api_url: str | None = None,
        git_repo: GitRepo | None = None,
        env: Mapping[str, str] | None = None,
    ) -> GitHubSettings:
        """Settings from the arguments, the environment and the ``origin`` remote (see module doc)."""
        import os

        environ = os.environ if env is None else env
        token = next((environ[v].strip() for v in TOKEN_VARS if environ.get(v, "").strip()), "")
        if not token:
            raise GitHubSettingsError(
                "no GitHub token: set GITHUB_TOKEN (or GH_TOKEN) to a token that can read the repository's "
                "pull requests and issues (and write them, for 'github comment' and closing duplicates)"
            )
        full = _repository(repo, git_repo)
        base = (api_url or environ.get("GITHUB_API_URL", "").strip() or DEFAULT_API_URL).rstrip("/")
        if not re.match(r"^https?://[^/\s]+", base):
            raise GitHubSettingsError(
                f"GitHub API URL {strip_userinfo(base)!r} is not an http(s) URL; fix GITHUB_API_URL "
                "or github.api_url"
            )
        return cls(
            repo=full,
            token=token,
            api_url=base,
            timeout=_number(environ, "GITLEDGER_GITHUB_TIMEOUT", 20.0, 1.0, DAY),
            retries=int(_number(environ, "GITLEDGER_GITHUB_RETRIES", 4, 0, 1000)),
            backoff=_number(environ, "GITLEDGER_GITHUB_BACKOFF", 1.0, 0.0, DAY),
            max_wait=_number(environ, "GITLEDGER_GITHUB_MAX_WAIT", 60.0, 0.0, DAY),
            write_interval=_number(environ, "GITLEDGER_GITHUB_WRITE_INTERVAL", 1.0, 0.0, DAY),
        )


def _repository(repo: str | None, git_repo: GitRepo | None) -> str:
    if repo:
        text = repo.strip()
        if not is_owner_repo(text):
            raise GitHubSettingsError(f"GitHub repository {text!r} must look like OWNER/NAME")
        return text
    url = git_repo.remote_url("origin") if git_repo is not None else None
    parsed = parse_remote_url(url) if url else None
    if parsed:
        return parsed
    where = f" (origin is {strip_userinfo(url)!r})" if url else " (there is no 'origin' remote)"
    raise GitHubSettingsError(
        f"cannot tell which GitHub repository to use{where}: pass --github-repo OWNER/NAME or set "
        "github.repo in .gitledger.yml"
    )


__all__ = [
    "DEFAULT_API_URL",
    "TOKEN_VARS",
    "GitHubError",
    "GitHubSettings",
    "GitHubSettingsError",
    "WriteUnknownError",
    "parse_remote_url",
    "strip_userinfo",
]
