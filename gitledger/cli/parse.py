"""Turning command-line options into typed values, with no CLI framework: the fast skip uses it too."""

from __future__ import annotations

import sys
from typing import BinaryIO

from gitledger.core.errors import UsageError
from gitledger.core.keys import Content

MAX_CONTENT_FILE = 16 * 1024 * 1024  # a message, a diff, a file to upload; hash anything larger yourself

# What '-' read from standard input, kept: the fast skip and, when it cannot answer, the full command
# both ask for the content, and standard input can be read only once. A read that failed (too large)
# is kept as its error: read again, what is left of standard input would be hashed as the content.
_STDIN: list[bytes | UsageError] = []


def read_stdin_once(option: str) -> bytes:
    """All of standard input as bytes (at most :data:`MAX_CONTENT_FILE`), read on the first call and
    returned again on later ones (or its error raised again); ``option`` (e.g. ``--content-file``) is
    named in errors. Closed standard input is an error, not empty content."""
    if not _STDIN:
        if sys.stdin is None:
            raise UsageError(
                f"{option} - reads standard input, which is closed; pipe the content in or give a file"
            )
        try:
            _STDIN.append(_read_capped(sys.stdin.buffer, f"{option} - (standard input)"))
        except UsageError as exc:
            _STDIN.append(exc)
    kept = _STDIN[0]
    if isinstance(kept, UsageError):
        raise UsageError(str(kept))
    return kept


def read_file_option(path: str, option: str) -> bytes:
    """The bytes of the file ``option`` names (``-``: standard input), at most :data:`MAX_CONTENT_FILE`."""
    if not path:
        raise UsageError(f"{option} is given an empty path; give a file's path, or '-' for standard input")
    if path == "-":
        return read_stdin_once(option)
    try:
        with open(path, "rb") as fh:
            return _read_capped(fh, f"{option} {path}")
    except OSError as exc:
        raise UsageError(f"cannot read {option} {path}: {exc.strerror}; give a readable file") from exc


def _read_capped(fh: BinaryIO, what: str) -> bytes:
    try:
        data = fh.read(MAX_CONTENT_FILE + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {what}: {exc.strerror}") from exc
    if len(data) > MAX_CONTENT_FILE:
        mib = MAX_CONTENT_FILE // (1024 * 1024)
        instead = (
            "; hash it yourself and pass the digest with --content" if what.startswith("--content") else ""
        )
        raise UsageError(f"{what} is larger than {mib} MiB, the most gitledger reads{instead}")
    return data


def content_from_options(content: str | None, content_file: str | None, args: list[str] | None) -> Content:
    """Turn the mutually exclusive content options into :class:`Content`."""
    given = sum(x is not None and x != [] for x in (content, content_file, args))
    if given > 1:
        raise UsageError("use only one of --content, --content-file and --arg")
    if content is not None:
        return Content.text(content)
    if content_file is not None:
        return Content.raw(read_file_option(content_file, "--content-file"))
    if args:
        pairs: dict[str, str] = {}
        for item in args:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise UsageError(f"--arg {item!r} is not NAME=VALUE; write it like --arg pr=42")
            if name in pairs:
                raise UsageError(f"--arg {name} is given twice; give each name once")
            pairs[name] = value
        return Content.args(pairs)
    return Content.empty()


__all__ = [
    "MAX_CONTENT_FILE",
    "content_from_options",
    "read_file_option",
    "read_stdin_once",
]
