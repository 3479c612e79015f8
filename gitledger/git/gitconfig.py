"""A remote's URL read from git's configuration files, without starting git — when that is exact.

``git remote get-url`` costs a process start (~3 ms here), which the agent hook pays on every
guarded call. For the common configuration — ``[remote "NAME"]`` with a plain ``url =`` line, no
``include``/``includeIf``, no ``insteadOf`` rewriting, no configuration from the environment — the
answer is just the first ``url`` of that remote in git's files, read in git's order (system, global,
repository, worktree). Anything else, or anything this reader does not fully understand (quotes,
escapes, continuation lines, the old ``[remote.NAME]`` form, ``.git/remotes`` files, an unreadable
file), answers :data:`UNKNOWN` and the caller asks git. So this reader is either exactly git's
answer or no answer at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from gitledger.core.programs import find_program

UNKNOWN = object()  # "ask git": this reader cannot be sure of git's answer

_DANGER = ("include", "insteadof")  # configuration that changes which file or URL counts
_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def _section(line: str) -> tuple[str, str | None] | None:
    """(name, subsection) of a ``[name "subsection"]`` header, None for any other form."""
    end = line.find("]")
    rest = line[end + 1 :].strip()
    if end < 0 or (rest and rest[0] not in "#;"):
        return None  # no "]", or "[section] key = value" on one line
    header = line[1:end]
    name, space, sub = header.partition(' "')
    if space:
        if not (sub.endswith('"') and '"' not in sub[:-1] and not name.endswith(" ")):
            return None
        return (name, sub[:-1]) if name and set(name) <= _NAME else None
    return (name, None) if name and set(name) <= _NAME else None  # "." (the old form) is not in _NAME


def _entry(line: str) -> tuple[str, str | None] | None:
    """(key, value) of ``key = value`` (value None for a bare boolean key), None for any other form."""
    text = line.split("#", 1)[0].split(";", 1)[0]
    key, equals, value = text.partition("=")
    key = key.strip()
    if not key or not key[0].isalpha() or not set(key) <= _NAME:
        return None
    return key, value.strip() if equals else None


def _system_files(env: Mapping[str, str]) -> list[Path]:
    if env.get("GIT_CONFIG_NOSYSTEM", "").lower() in ("1", "true", "yes", "on"):
        return []
    if "GIT_CONFIG_SYSTEM" in env:
        return [Path(env["GIT_CONFIG_SYSTEM"])]
    # git's compiled-in sysconfdir: /etc for a git installed under /usr, else PREFIX/etc; both are read
    # when git lives elsewhere, so a file either of them might mean is never missed
    files = [Path("/etc/gitconfig")]
    git = find_program("git", env.get("PATH") or os.defpath)
    if git:
        prefix = Path(os.path.realpath(git)).parent.parent
        if prefix != Path("/usr"):
            files.append(prefix / "etc" / "gitconfig")
    return files


def _global_files(env: Mapping[str, str]) -> list[Path]:
    if "GIT_CONFIG_GLOBAL" in env:
        return [Path(env["GIT_CONFIG_GLOBAL"])]
    files = []
    xdg = env.get("XDG_CONFIG_HOME") or (f"{env['HOME']}/.config" if env.get("HOME") else "")
    if xdg:
        files.append(Path(xdg) / "git" / "config")
    if env.get("HOME"):
        files.append(Path(env["HOME"]) / ".gitconfig")
    return files


def _lines(path: Path) -> Iterator[str] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return iter(())
    except (OSError, UnicodeDecodeError):
        return None
    if any(word in text.lower() for word in _DANGER):
        return None
    return iter(text.splitlines())


def remote_url(name: str, git_dir: Path, common_dir: Path, env: Mapping[str, str] | None = None) -> object:
    """The first ``remote.NAME.url`` in git's configuration files, None when no file defines one,
    or :data:`UNKNOWN` when only git can tell."""
    env = os.environ if env is None else env
    if any(k in env for k in ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG")):
        return UNKNOWN
    if (common_dir / "remotes" / name).exists() or (common_dir / "branches" / name).exists():
        return UNKNOWN
    outside = [*_system_files(env), *_global_files(env)]
    files = [*outside, common_dir / "config", git_dir / "config.worktree"]
    found: str | None = None
    for path in files:
        lines = _lines(path)
        if lines is None:
            return UNKNOWN
        inside = False
        for raw in lines:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if "\\" in line or ('"' in line and not line.startswith("[")):
                return UNKNOWN  # escapes, quoted values, continuation lines: git's job
            if line.startswith("["):
                section = _section(line)
                if section is None:
                    return UNKNOWN  # "[section] key = value", the old [remote.NAME] form, ...
                inside = section[0].lower() == "remote" and section[1] == name
                if inside and path in outside:
                    return UNKNOWN  # git counts a remote only when the repository's own files name it
                continue
            entry = _entry(line)
            if entry is None:
                return UNKNOWN
            if inside and entry[0].lower() == "url":
                if not entry[1]:
                    return UNKNOWN  # an empty url resets the list in newer git, is an error in older
                found = found or entry[1]
    return found


__all__ = ["UNKNOWN", "remote_url"]
