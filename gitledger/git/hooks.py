"""The git commands the hooks need, run with the environment cleaned of the hook's GIT_* variables."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gitledger.core.errors import GitError, UsageError, cannot_open
from gitledger.core.keys import KEY_RE, TRAILER_TOKEN

_HEADS = "refs/heads/"

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


def run_git(
    args: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    try:
        # a path in bytes that are not UTF-8 stays that path (os.fsdecode's surrogateescape)
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            check=False,
        )
    except FileNotFoundError as exc:
        if cwd is not None and not os.path.isdir(cwd):  # the directory is missing, not git
            raise GitError(f"{cwd} is not a directory; give a git repository's path") from exc
        raise GitError("git is not installed or not on PATH; install git") from exc
    if check and proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        detail = lines[-1] if lines else f"exit code {proc.returncode}"
        where = f" in {cwd}" if cwd is not None else ""
        raise GitError(f"git {args[0]} failed{where}: {detail}")
    return proc


def hooks_path(repo: Path) -> Path:
    """The hooks directory git uses for ``repo`` (any path in a work tree, or a git directory).

    Follows ``core.hooksPath``, absolute or relative (git takes a relative one from the top of the work
    tree, or from the git directory of a bare repository), and the common directory of linked work trees.
    """
    if not os.path.isdir(repo):  # False, not an OSError, for a name too long
        raise UsageError(f"{repo} is not a directory; pass --repo a path inside a git repository")
    proc = run_git(["rev-parse", "--git-path", "hooks"], cwd=repo, check=False)
    if proc.returncode != 0:  # not a repository: a usage error, exit 2 as everywhere else
        raise cannot_open(repo, proc.stderr.encode() or f"exit {proc.returncode}".encode())
    path = Path(proc.stdout.rstrip("\n"))
    return Path(os.path.abspath(path if path.is_absolute() else repo / path))


def absolute_git_dir(repo: Path) -> str:
    proc = run_git(["rev-parse", "--absolute-git-dir"], cwd=repo, env=no_git_env(), check=False)
    if proc.returncode != 0:
        raise GitError(f"{repo} is not inside a git repository")
    return proc.stdout.rstrip("\n")


def remote_heads(git_dir: str, target: str, branches: Iterable[str]) -> dict[str, str]:
    """The subset of ``branches`` that exist on ``target`` (a remote name or URL), with their commits."""
    wanted = sorted(set(branches))
    if not wanted:
        return {}
    proc = run_git(
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
    proc = run_git(
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


def has_commit(git_dir: str, sha: str) -> bool:
    """Whether the repository has commit ``sha``."""
    proc = run_git(
        ["--git-dir", git_dir, "cat-file", "-e", f"{sha}^{{commit}}"], env=no_git_env(), check=False
    )
    return proc.returncode == 0


__all__ = [
    "absolute_git_dir",
    "has_commit",
    "hooks_path",
    "no_git_env",
    "remote_heads",
    "run_git",
    "trailer_keys",
]
