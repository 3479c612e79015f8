"""``OWNER/NAME`` of a GitHub repository from a git remote URL (pure string work, standard library).

Used wherever a repository is named by its remote: the agent guard's keys, the audit, the pre-push
hook, the GitHub settings.
"""

from __future__ import annotations

import re

# patterns as text: re compiles (and caches) one on first use
# '.' or '..' names no repository: in an API path (/repos/../..) it would climb out of /repos
_OWNER_REPO = r"^(?!\.\.?/)[A-Za-z0-9_.-]+/(?!\.\.?$)[A-Za-z0-9_.-]+$"
_REMOTE_PATTERNS = (
    # https://github.com/o/r(.git), http(s)://user:pass@host/o/r.git, git://host/o/r.git
    r"^(?:https?|git)://(?:[^@/]*@)?[^/]+/(?P<owner>[^/]+)/(?P<name>[^/]+?)(?:\.git)?/?$",
    # ssh://git@host(:port)/o/r.git
    r"^ssh://(?:[^@/]*@)?[^/]+/(?P<owner>[^/]+)/(?P<name>[^/]+?)(?:\.git)?/?$",
    # git@github.com:o/r.git (scp-like; a local path has no "host:" in front)
    r"^(?:[^@/:]+@)?[A-Za-z0-9.-]+:(?P<owner>[^/]+)/(?P<name>[^/]+?)(?:\.git)?/?$",
)


def is_owner_repo(text: str) -> bool:
    """True for ``OWNER/NAME`` made of the characters GitHub allows."""
    return re.match(_OWNER_REPO, text) is not None


def parse_remote_url(url: str) -> str | None:
    """``OWNER/NAME`` from a git remote URL, or None when the URL names no such repository."""
    text = url.strip()
    for pattern in _REMOTE_PATTERNS:
        match = re.match(pattern, text)
        if match:
            full = f"{match['owner']}/{match['name']}"
            return full if is_owner_repo(full) else None
    return None


__all__ = ["is_owner_repo", "parse_remote_url"]
