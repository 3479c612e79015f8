"""Trailers of commit messages as git reads them: ``git interpret-trailers --parse``, one process a batch.

For messages that exist only as text (the audit's API fallback reads commit messages from GitHub, not
commit objects). git decides what a trailer is: only the last paragraph, a ``(cherry picked from ...)``
line allowed, continuation lines folded, a ``Key: value`` line in prose not taken. Each message is
written to a file of a temporary directory and ``git interpret-trailers --parse --in-place`` replaces
it with its trailers, so a batch of messages costs one process (a few, past the command-line limit).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gitledger.core.errors import GitError, git_message
from gitledger.git.repo import git_env

_FILES_PER_PROCESS = 500  # keeps the command line short on every system


def parse_trailers(messages: Sequence[str]) -> list[list[tuple[str, str]]]:
    """The ``(key, value)`` trailers of each message, in order, as ``git interpret-trailers --parse``
    reads them (keys as written; continuation lines unfolded)."""
    if not messages:
        return []
    with tempfile.TemporaryDirectory(prefix="gitledger-trailers-") as tmp:
        paths = [Path(tmp, f"{n}.msg") for n in range(len(messages))]
        for path, message in zip(paths, messages, strict=True):
            path.write_bytes(message.encode("utf-8", "surrogateescape"))
        for start in range(0, len(paths), _FILES_PER_PROCESS):
            names = [p.name for p in paths[start : start + _FILES_PER_PROCESS]]
            try:
                proc = subprocess.run(
                    ["git", "interpret-trailers", "--parse", "--in-place", *names],
                    cwd=tmp,  # no repository: its trailer.* configuration does not change the reading
                    env={**git_env(), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
                    capture_output=True,
                    check=False,
                )
            except FileNotFoundError as exc:
                raise GitError("git is not installed or not on PATH; install git") from exc
            if proc.returncode != 0:
                detail = git_message(proc.stderr) or f"exit {proc.returncode}"
                raise GitError(f"git interpret-trailers failed: {detail}")
        return [_pairs(path.read_bytes().decode("utf-8", "replace")) for path in paths]


def _pairs(text: str) -> list[tuple[str, str]]:
    found = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            found.append((key.strip(), value.strip()))
    return found


def trailer_values(messages: Sequence[str], key: str) -> list[list[str]]:
    """The values of the ``key`` trailers (compared without case, as git does) of each message."""
    wanted = key.lower()
    return [[v for k, v in pairs if k.lower() == wanted] for pairs in parse_trailers(messages)]


__all__ = ["parse_trailers", "trailer_values"]
