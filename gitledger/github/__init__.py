"""The GitHub adapter: the only package that imports PyGithub.

``from gitledger.github import GitHubContext`` (docs/github.md) keeps working: the names below load on
first use, so importing a submodule such as :mod:`gitledger.github.checks` costs no PyGithub import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_FACE = {
    "DEFAULT_API_URL": "gitledger.github.settings",
    "GitHubError": "gitledger.github.settings",
    "GitHubSettings": "gitledger.github.settings",
    "GitHubSettingsError": "gitledger.github.settings",
    "WriteUnknownError": "gitledger.github.settings",
    "parse_remote_url": "gitledger.github.settings",
    "strip_userinfo": "gitledger.github.settings",
    "ApiCalls": "gitledger.github.transport",
    "SafeRetry": "gitledger.github.transport",
    "rate_limit_wait": "gitledger.github.transport",
    "MAX_BODY": "gitledger.github.client",
    "FoundPull": "gitledger.github.port",
    "Comment": "gitledger.github.port",
    "GitHubClient": "gitledger.github.port",
    "GitHubContext": "gitledger.github.client",
    "PullInfo": "gitledger.github.port",
    "describe": "gitledger.github.client",
    "is_unknown_outcome": "gitledger.github.client",
}

__all__ = [
    "DEFAULT_API_URL",
    "MAX_BODY",
    "ApiCalls",
    "Comment",
    "FoundPull",
    "GitHubClient",
    "GitHubContext",
    "GitHubError",
    "GitHubSettings",
    "GitHubSettingsError",
    "PullInfo",
    "SafeRetry",
    "WriteUnknownError",
    "describe",
    "is_unknown_outcome",
    "parse_remote_url",
    "rate_limit_wait",
    "strip_userinfo",
]


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module 'gitledger.github' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from gitledger.github.client import MAX_BODY, GitHubContext, describe, is_unknown_outcome
    from gitledger.github.port import Comment, FoundPull, GitHubClient, PullInfo
    from gitledger.github.settings import (
        DEFAULT_API_URL,
        GitHubError,
        GitHubSettings,
        GitHubSettingsError,
        WriteUnknownError,
        parse_remote_url,
        strip_userinfo,
    )
    from gitledger.github.transport import ApiCalls, SafeRetry, rate_limit_wait
