"""Git hooks for agent repositories: installing them, and the pre-push duplicate check.

Two POSIX sh hooks ship with gitledger. Their canonical sources are the top-level ``hooks/`` directory
of the source tree; built wheels carry them as the package data of ``gitledger._hookscripts``.

- ``commit-msg`` adds ``Gitledger-Key: <key>`` to the message, once, when ``GITLEDGER_KEY`` is set.
- ``pre-push`` finds the keys in the commits a new remote branch would add and, only if there are any,
  runs ``gitledger hooks check-push``, which calls :func:`check_push`: a push is refused when the remote
  already has a key's convention branch under another name (a duplicate in the making).

:func:`install` writes both into the repository's effective hooks directory (``core.hooksPath`` is
honoured). A hook that is already there and is not ours is never deleted: it is renamed to
``<name>.gitledger-chained`` and our script runs it first. :func:`uninstall` puts it back unchanged.

Artifacts outside git (a GitHub pull request for a key) are found by *existence finders*: callables
``finder(key) -> artifact URL or None`` passed to :func:`check_push`. The hook asks
:func:`existence_finders` for them, which is where such finders get plugged in.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from gitledger.core.errors import GitError, GitledgerError, UsageError
from gitledger.core.keys import KEY_RE, TRAILER_TOKEN, Names, branch_for

HOOK_NAMES: tuple[str, ...] = ("commit-msg", "pre-push")
HOOK_VERSION = 1
"""Bump with any change to the scripts that an installed copy must not silently keep (also in hooks/*)."""

CHAINED_SUFFIX = ".gitledger-chained"
ALLOW_DUPLICATE_ENV = "GITLEDGER_ALLOW_DUPLICATE"
OVERRIDE_HINT = f"to push anyway: '{ALLOW_DUPLICATE_ENV}=1 git push ...' or 'git push --no-verify'"

_MARKER_RE = re.compile(rb"^# gitledger-hook v([0-9]+)[ \t]*\r?$", re.MULTILINE)
_MARKER_SEARCH_BYTES = 512
_INSTALL_PYTHON_RE = re.compile(rb"^INSTALL_PYTHON=.*$", re.MULTILINE)
_HEADS = "refs/heads/"

ExistenceFinder = Callable[[str], str | None]
"""``finder(key)`` returns the URL of an existing artifact for ``key`` (a pull request), else None.

A finder that cannot tell (network down) raises :class:`gitledger.core.errors.CheckError`: not knowing is not
the same as absent, so the push is refused with the override hint.
"""

# GIT_* variables that configure how git reaches remotes or reads configuration; every other GIT_*
# variable (GIT_DIR, GIT_INDEX_FILE, GIT_PREFIX, GIT_WORK_TREE, ...) describes the repository the hook
# runs for, relative to git's own working directory, and is dropped (as pre-commit's ``no_git_env``).
_KEEP_GIT_VARS = frozenset(
    {
        "GIT_ALLOW_PROTOCOL",
        "GIT_ASKPASS",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_SYSTEM",
        "GIT_EXEC_PATH",
        "GIT_HTTP_PROXY_AUTHMETHOD",
        "GIT_HTTP_USER_AGENT",
        "GIT_PROTOCOL_FROM_USER",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_SSL_CAINFO",
        "GIT_SSL_NO_VERIFY",
        "GIT_TERMINAL_PROMPT",
    }
)
_KEEP_GIT_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "GIT_TRACE")


def no_git_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: ``os.environ``) without the GIT_* variables git sets while a hook runs.

    Inside a hook git exports GIT_DIR, GIT_INDEX_FILE, GIT_PREFIX and friends, sometimes as paths
    relative to its own working directory; a git started from Python with those would act on the wrong
    repository or index. Variables that only say how to reach remotes or read config are kept.
    """
    env = os.environ if environ is None else environ
    return {
        name: value
        for name, value in env.items()
        if not name.startswith("GIT_") or name in _KEEP_GIT_VARS or name.startswith(_KEEP_GIT_PREFIXES)
    }


def _git(
    args: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH; install git") from exc
    if check and proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        detail = lines[-1] if lines else f"exit code {proc.returncode}"
        where = f" in {cwd}" if cwd is not None else ""
        raise GitError(f"git {args[0]} failed{where}: {detail}")
    return proc


# --- the scripts ----------------------------------------------------------------------------------


def hook_source(name: str) -> bytes:
    """The canonical script of hook ``name`` as shipped with this gitledger."""
    if name not in HOOK_NAMES:
        raise UsageError(f"{name!r} is not a gitledger hook; the hooks are {', '.join(HOOK_NAMES)}")
    try:
        return resources.files("gitledger._hookscripts").joinpath(name).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        pass  # a source checkout: the package exists only in built wheels and editable installs
    path = Path(__file__).resolve().parent.parent / "hooks" / name
    try:
        return path.read_bytes()
    except OSError as exc:
        raise GitledgerError(
            f"the {name} hook script is missing from this gitledger installation; reinstall gitledger"
        ) from exc


def hook_version(script: bytes) -> int | None:
    """The version in a script's ``# gitledger-hook vN`` marker line, or None for a foreign hook."""
    match = _MARKER_RE.search(script[:_MARKER_SEARCH_BYTES])
    return int(match.group(1)) if match else None


def render_hook(name: str, python: str | None = None) -> bytes:
    """The script to install: the canonical one with ``INSTALL_PYTHON`` set to ``python`` (if given).

    The hook runs ``"$INSTALL_PYTHON" -m gitledger``; when that interpreter is gone it falls back to
    ``gitledger`` on PATH (the canonical scripts, as the pre-commit framework runs them, always do).
    """
    source = hook_source(name)
    if python is None:
        return source
    line = b"INSTALL_PYTHON=" + os.fsencode(shlex.quote(python))
    return _INSTALL_PYTHON_RE.sub(lambda _match: line, source, count=1)


# --- install / uninstall --------------------------------------------------------------------------


def hooks_dir(repo: Path) -> Path:
    """The hooks directory git uses for ``repo`` (any path in a work tree, or a git directory).

    Follows ``core.hooksPath``, absolute or relative (git takes a relative one from the top of the work
    tree, or from the git directory of a bare repository), and the common directory of linked work trees.
    """
    if not repo.is_dir():
        raise UsageError(f"{repo} is not a directory; pass --repo a path inside a git repository")
    proc = _git(["rev-parse", "--git-path", "hooks"], cwd=repo, check=False)
    if proc.returncode != 0:
        raise GitError(f"{repo} is not inside a git repository; pass --repo a path inside one")
    path = Path(proc.stdout.rstrip("\n"))
    return Path(os.path.abspath(path if path.is_absolute() else repo / path))


HookAction = Literal[
    "installed",
    "chained",
    "unchanged",
    "updated",
    "replaced",
    "removed",
    "restored",
    "not-installed",
    "kept-foreign",
]


@dataclass(frozen=True)
class HookChange:
    """What :func:`install` or :func:`uninstall` did to one hook."""

    name: str
    path: Path
    action: HookAction

    def describe(self) -> str:
        chained = f"{self.name}{CHAINED_SUFFIX}"
        text = {
            "installed": "installed",
            "chained": f"installed; the hook that was there is kept as {chained} and runs first",
            "unchanged": "already installed",
            "updated": "rewritten (same version; the interpreter path or local edits differed)",
            "replaced": "replaced a gitledger hook of another version",
            "removed": "removed",
            "restored": f"removed; the original hook is back from {chained}",
            "not-installed": "not installed; nothing to do",
            "kept-foreign": "not a gitledger hook; left alone",
        }[self.action]
        return f"{self.name}: {text} ({self.path})"


def _read(path: Path) -> bytes | None:
    """A hook's bytes; None when absent; b"" when it exists but cannot be read (a broken link)."""
    if not os.path.lexists(path):
        return None
    if path.is_dir():
        raise GitledgerError(f"{path} is a directory, not a hook; move it away and try again")
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _write_hook(path: Path, content: bytes) -> None:
    """Write an executable hook atomically, replacing whatever ``path`` is (a symlink is not followed)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


@contextmanager
def _fs_errors(directory: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        where = exc.filename or directory
        raise GitledgerError(f"cannot change the hooks in {directory}: {exc.strerror} ({where})") from exc


def install(repo_path: Path, force: bool = False, *, python: str | None = None) -> list[HookChange]:
    """Install the gitledger hooks into the hooks directory of the repository at ``repo_path``.

    A foreign hook is renamed to ``<name>.gitledger-chained`` (bytes, mode and symlink-ness kept) and
    runs first; it is never deleted. Installing again is idempotent. A gitledger hook of another version
    is replaced only with ``force``. ``python`` is the interpreter the hook records to run
    ``python -m gitledger`` (default: this one). Refusals (another version without ``force``, a taken
    ``.gitledger-chained`` name) are found before anything is changed.
    """
    directory = hooks_dir(repo_path)
    interpreter = sys.executable if python is None else python
    plan: list[tuple[str, Path, bytes, HookAction]] = []
    for name in HOOK_NAMES:
        target = directory / name
        chained = directory / f"{name}{CHAINED_SUFFIX}"
        content = render_hook(name, interpreter)
        existing = _read(target)
        action: HookAction
        if existing is None:
            action = "installed"
        else:
            version = hook_version(existing)
            if version is None:
                if os.path.lexists(chained):
                    raise GitledgerError(
                        f"{target} is not a gitledger hook and {chained.name} already exists beside it; "
                        "move one of them away, then run 'gitledger hooks install' again"
                    )
                action = "chained"
            elif version == HOOK_VERSION:
                action = "unchanged" if existing == content else "updated"
            elif force:
                action = "replaced"
            else:
                raise GitledgerError(
                    f"{target} is a gitledger hook of version {version}, this gitledger installs version "
                    f"{HOOK_VERSION}; run 'gitledger hooks install --force' to replace it"
                )
        plan.append((name, target, content, action))

    changes: list[HookChange] = []
    with _fs_errors(directory):
        directory.mkdir(parents=True, exist_ok=True)
        for name, target, content, action in plan:
            if action == "chained":
                chained = directory / f"{name}{CHAINED_SUFFIX}"
                os.rename(target, chained)
                try:
                    _write_hook(target, content)
                except BaseException:
                    os.rename(chained, target)
                    raise
            elif action != "unchanged":
                _write_hook(target, content)
            changes.append(HookChange(name, target, action))
    return changes


def uninstall(repo_path: Path) -> list[HookChange]:
    """Remove the gitledger hooks (any version) and put back the hooks they chained, byte for byte.

    A foreign hook is left alone. When our hook is gone but a chained original is still there, the
    original is put back.
    """
    directory = hooks_dir(repo_path)
    changes: list[HookChange] = []
    with _fs_errors(directory):
        for name in HOOK_NAMES:
            target = directory / name
            chained = directory / f"{name}{CHAINED_SUFFIX}"
            existing = _read(target)
            if existing is not None and hook_version(existing) is None:
                changes.append(HookChange(name, target, "kept-foreign"))
                continue
            if existing is not None:
                os.unlink(target)
            if os.path.lexists(chained):
                os.rename(chained, target)
                changes.append(HookChange(name, target, "restored"))
            else:
                action: HookAction = "removed" if existing is not None else "not-installed"
                changes.append(HookChange(name, target, action))
    return changes


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


def _git_dir(repo: Path) -> str:
    proc = _git(["rev-parse", "--absolute-git-dir"], cwd=repo, env=no_git_env(), check=False)
    if proc.returncode != 0:
        raise GitError(f"{repo} is not inside a git repository")
    return proc.stdout.rstrip("\n")


def _worktree(git_dir: Path | str) -> Path | None:
    """The work tree of a git directory (where .gitledger.yml lives), or None for a bare repository."""
    path = Path(git_dir)
    if path.name == ".git":
        return path.parent
    linked = path / "gitdir"  # a linked worktree's git dir points back at the worktree's .git file
    if linked.is_file():
        return Path(linked.read_text().strip()).parent
    return None


def remote_heads(git_dir: str, target: str, branches: Iterable[str]) -> dict[str, str]:
    """The subset of ``branches`` that exist on ``target`` (a remote name or URL), with their commits."""
    wanted = sorted(set(branches))
    if not wanted:
        return {}
    proc = _git(
        ["--git-dir", git_dir, "ls-remote", "--heads", "--", target, *(_HEADS + b for b in wanted)],
        env=no_git_env(),
        check=False,
    )
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise GitError(
            f"cannot list the branches of {target}: {lines[-1] if lines else 'git ls-remote failed'}"
        )
    heads: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        branch = ref.removeprefix(_HEADS)
        if branch in wanted:
            heads[branch] = sha
    return heads


def trailer_keys(git_dir: str, revisions: Sequence[str]) -> set[str]:
    """The valid ``Gitledger-Key`` trailer values in the commits ``git log REVISIONS`` lists."""
    proc = _git(
        [
            "--git-dir",
            git_dir,
            "-c",
            "log.showSignature=false",
            "log",
            f"--format=%(trailers:key={TRAILER_TOKEN},valueonly)",
            *revisions,
            "--",
        ],
        env=no_git_env(),
    )
    return {line.strip() for line in proc.stdout.splitlines() if KEY_RE.match(line.strip())}


def _builds_on(git_dir: str, push: Push, existing_sha: str) -> bool:
    """Whether every commit of ``push`` that carries its key is already in ``existing_sha``.

    Then the new branch continues the existing one's work (its history was merely not in the
    remote-tracking refs) rather than doing the step again. Unknown remote commits prove nothing.
    """
    has_commit = _git(
        ["--git-dir", git_dir, "cat-file", "-e", f"{existing_sha}^{{commit}}"], env=no_git_env(), check=False
    )
    if has_commit.returncode != 0:
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
    git_dir = _git_dir(repo)
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
    from gitledger.github.settings import TOKEN_VARS, parse_remote_url

    if not any(os.environ.get(var, "").strip() for var in TOKEN_VARS):
        return []
    cfg = config_mod.load(_worktree(repo))
    full_name = cfg.github_repo or parse_remote_url(url)
    if full_name is None:
        return []

    def github_pull(key: str) -> str | None:
        from gitledger.core.errors import CheckError, GitledgerError
        from gitledger.core.keys import KeyRef
        from gitledger.session import open_session

        try:
            with open_session(repo, full_name) as session:
                found = session.github().find_pull(KeyRef(key, cfg.names), marker_scan=False)
        except GitledgerError as exc:
            raise CheckError(f"cannot ask GitHub about {key}: {exc}") from exc
        return f"pull request {found.html_url}" if found else None

    return [github_pull]
