"""The pre-push check: refuse a push that would make a duplicate of a step's branch or pull request.

Artifacts outside git (a GitHub pull request for a key) are found by *existence finders*: callables
``finder(key) -> artifact URL or None`` passed to :func:`check_push`. The hook asks
:func:`existence_finders` for them, which is where such finders get plugged in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitledger.core.errors import GitledgerError, UsageError
from gitledger.core.keys import KEY_RE, Names, branch_for
from gitledger.git.hooks import absolute_git_dir, has_commit, remote_heads, trailer_keys

ALLOW_DUPLICATE_ENV = "GITLEDGER_ALLOW_DUPLICATE"
_HEADS = "refs/heads/"
OVERRIDE_HINT = f"to push anyway: '{ALLOW_DUPLICATE_ENV}=1 git push ...' or 'git push --no-verify'"

ExistenceFinder = Callable[[str], str | None]
"""``finder(key)`` returns the URL of an existing artifact for ``key`` (a pull request), else None.

A finder that cannot tell (network down) raises :class:`gitledger.errors.CheckError`: not knowing is not
the same as absent, so the push is refused with the override hint.
"""


# --- the pre-push check ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Push:
    """A remote branch the push would create, and one key found in the commits it adds."""

    local_sha: str
    remote_ref: str
    key: str

    @property
    def branch(self) -> str:
        return self.remote_ref.removeprefix(_HEADS)


@dataclass(frozen=True)
class Conflict:
    """A push that would duplicate an existing artifact of the same key."""

    key: str
    remote_ref: str
    artifact: str
    """What already exists: ``branch 'NAME' on REMOTE`` or the URL an existence finder returned."""

    def message(self) -> str:
        branch = self.remote_ref.removeprefix(_HEADS)
        return (
            f"refusing to create branch '{branch}': key {self.key} already has {self.artifact} "
            "(a duplicate in the making)"
        )


def parse_push_lines(text: str) -> list[Push]:
    """Parse what the pre-push hook feeds ``check-push``: lines of ``<local sha> <remote ref> <key>``."""
    pushes: list[Push] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if (
            len(parts) != 3
            or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", parts[0])
            or not parts[1].startswith(_HEADS)
            or not KEY_RE.match(parts[2])
        ):
            raise UsageError(
                f"check-push input line {number} is not '<local sha> refs/heads/<branch> <key>': {line!r}"
            )
        pushes.append(Push(parts[0], parts[1], parts[2]))
    return pushes


def _worktree(git_dir: Path | str) -> Path | None:
    """The work tree of a git directory (where .gitledger.yml lives), or None for a bare repository."""
    path = Path(git_dir)
    if path.name == ".git":
        return path.parent
    linked = path / "gitdir"  # a linked worktree's git dir points back at the worktree's .git file
    if linked.is_file():
        return Path(linked.read_text().strip()).parent
    return None


def _builds_on(git_dir: str, push: Push, existing_sha: str) -> bool:
    """Whether every commit of ``push`` that carries its key is already in ``existing_sha``.

    Then the new branch continues the existing one's work (its history was merely not in the
    remote-tracking refs) rather than doing the step again. Unknown remote commits prove nothing.
    """
    if not has_commit(git_dir, existing_sha):
        return False
    return push.key not in trailer_keys(git_dir, [push.local_sha, "--not", existing_sha])


def check_push(
    repo: Path,
    remote: str,
    pushes: Iterable[Push],
    *,
    url: str | None = None,
    names: Names | None = None,
    finders: Sequence[ExistenceFinder] = (),
) -> list[Conflict]:
    """The conflicts that make a push a duplicate in the making; empty when it may go ahead.

    ``repo`` is any path in the repository or its git directory; ``remote`` names the remote (or is the
    URL) and ``url`` is where the push goes (default: ``remote``), asked with ``git ls-remote``. For each
    push, a conflict is reported when the remote already has the key's convention branch under a name
    other than the one being created, unless the keyed commits are already part of that branch (the
    push builds on it); otherwise each of ``finders`` is asked about the key. A push whose branch already
    exists on the remote is an update and never conflicts. Git runs without the hook's GIT_* variables.
    """
    todo = list(dict.fromkeys(pushes))
    if not todo:
        return []
    git_dir = absolute_git_dir(repo)
    convention = {push.key: branch_for(push.key, names) for push in todo}
    heads = remote_heads(git_dir, url or remote, [*convention.values(), *(p.branch for p in todo)])

    conflicts: list[Conflict] = []
    ask_finders: list[Push] = []
    for push in todo:
        if push.branch in heads:
            continue
        existing = convention[push.key]
        if existing == push.branch or existing not in heads:
            ask_finders.append(push)
        elif not _builds_on(git_dir, push, heads[existing]):
            conflicts.append(Conflict(push.key, push.remote_ref, f"branch '{existing}' on {remote}"))

    found: dict[str, list[str]] = {}
    for push in ask_finders:
        if push.key not in found:
            found[push.key] = [found_url for finder in finders if (found_url := finder(push.key))]
        conflicts.extend(Conflict(push.key, push.remote_ref, artifact) for artifact in found[push.key])
    return conflicts


def existence_finders(repo: Path, remote: str, url: str) -> list[ExistenceFinder]:
    """The existence finders the pre-push hook passes to :func:`check_push` besides the branch check.

    The GitHub pull-request finder is used when the push goes to a GitHub repository (from the remote
    URL, or ``github.repo`` in .gitledger.yml) and a token is set (GITHUB_TOKEN or GH_TOKEN): a PR in
    any state for the key — on its convention branch or carrying its label — means the branch being
    pushed would become a duplicate. Without a token the hook stays offline and checks branches only.
    It is called only when a pushed commit carries a key, and imports PyGithub only then.
    """
    from gitledger import config as config_mod
    from gitledger.core.remotes import parse_remote_url
    from gitledger.github.settings import TOKEN_VARS

    if not any(os.environ.get(var, "").strip() for var in TOKEN_VARS):
        return []
    cfg = config_mod.load(_worktree(repo))
    full_name = cfg.github_repo or parse_remote_url(url)
    if full_name is None:
        return []

    def github_pull(key: str) -> str | None:
        from gitledger.core.errors import CheckError
        from gitledger.core.keys import KeyRef
        from gitledger.session import open_session

        try:
            with open_session(repo, full_name) as session:
                found = session.github().find_pull(KeyRef(key, cfg.names), marker_scan=False)
        except GitledgerError as exc:
            raise CheckError(f"cannot ask GitHub about {key}: {exc}") from exc
        return f"pull request {found.html_url}" if found else None

    return [github_pull]
