"""Turning command-line options into typed values, with no CLI framework: the fast skip uses it too."""

from __future__ import annotations

import sys
from pathlib import Path

from gitledger.core.errors import UsageError
from gitledger.core.keys import Content

# What '-' read from standard input, kept: the fast skip and, when it cannot answer, the full command
# both ask for the content, and standard input can be read only once.
_STDIN: list[bytes] = []


def read_stdin_once() -> bytes:
    """All of standard input as bytes, read on the first call and returned again on later ones."""
    if not _STDIN:
        _STDIN.append(sys.stdin.buffer.read() if sys.stdin is not None else b"")
    return _STDIN[0]


def content_from_options(content: str | None, content_file: Path | None, args: list[str] | None) -> Content:
    """Turn the mutually exclusive content options into :class:`Content`."""
    given = sum(x is not None and x != [] for x in (content, content_file, args))
    if given > 1:
        raise UsageError("use only one of --content, --content-file and --arg")
    if content is not None:
        return Content.text(content)
    if content_file is not None:
        if str(content_file) == "-":
            return Content.raw(read_stdin_once())
        try:
            return Content.raw(content_file.read_bytes())
        except OSError as exc:
            raise UsageError(f"cannot read --content-file {content_file}: {exc.strerror}") from exc
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


__all__ = ["content_from_options", "read_stdin_once"]
