"""Installing and removing gitledger's git hooks (see :mod:`gitledger.features.hooks.prepush` for the check).

Two POSIX sh hooks ship with gitledger. Their canonical sources are the top-level ``hooks/`` directory
of the source tree; built wheels carry them as the package data of ``gitledger._hookscripts``.

- ``commit-msg`` adds ``Gitledger-Key: <key>`` to the message, once, when ``GITLEDGER_KEY`` is set.
- ``pre-push`` finds the keys in the commits a new remote branch would add and, only if there are any,
  runs ``gitledger hooks check-push`` (:func:`gitledger.features.hooks.prepush.check_push`).

:func:`install` writes both into the repository's effective hooks directory (``core.hooksPath`` is
honoured). A hook that is already there and is not ours is never deleted: it is renamed to
``<name>.gitledger-chained`` and our script runs it first. :func:`uninstall` puts it back unchanged.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from gitledger.core.errors import GitledgerError, UsageError
from gitledger.git.hooks import hooks_path

HOOK_NAMES: tuple[str, ...] = ("commit-msg", "pre-push")
HOOK_VERSION = 1
"""Bump with any change to the scripts that an installed copy must not silently keep (also in hooks/*)."""

CHAINED_SUFFIX = ".gitledger-chained"

_MARKER_RE = re.compile(rb"^# gitledger-hook v([0-9]+)[ \t]*\r?$", re.MULTILINE)
_MARKER_SEARCH_BYTES = 512
_INSTALL_PYTHON_RE = re.compile(rb"^INSTALL_PYTHON=.*$", re.MULTILINE)


# --- the scripts ----------------------------------------------------------------------------------


def hook_source(name: str) -> bytes:
    """The canonical script of hook ``name`` as shipped with this gitledger."""
    if name not in HOOK_NAMES:
        raise UsageError(f"{name!r} is not a gitledger hook; the hooks are {', '.join(HOOK_NAMES)}")
    try:
        return resources.files("gitledger._hookscripts").joinpath(name).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        pass  # a source checkout: the package exists only in built wheels and editable installs
    path = Path(__file__).resolve().parents[3] / "hooks" / name
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
    """The hooks directory git uses for ``repo`` (see :func:`gitledger.git.hooks.hooks_path`)."""
    return hooks_path(repo)


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
