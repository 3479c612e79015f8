"""Output for people and programs, with no CLI framework: the fast skip uses it too."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` made safe for a terminal line: control characters (newlines, escape sequences, which a
    forged ledger entry may carry) are shown as ``\\xNN`` instead of being sent to the terminal."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def terminal_width(stream: TextIO) -> int | None:
    """The width of the terminal ``stream`` writes to (COLUMNS wins), or None when it is no terminal."""
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    import shutil  # only on a terminal: the fast skip's output usually goes to a pipe

    return max(20, shutil.get_terminal_size((100, 24)).columns)


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "\u2026"


def say(message: str) -> None:
    """A human message on stderr (stdout is kept for results and --json), control characters shown."""
    print(f"gitledger: {printable(message)}", file=sys.stderr, flush=True)


def report_step(data: dict[str, Any], json_out: bool) -> None:
    """Print a step's result: one JSON object on stdout, or one human line on stderr (clipped to a
    terminal's width; the full values are in --json and 'gitledger show')."""
    if json_out:
        print(json.dumps(data, ensure_ascii=False), flush=True)
        return
    line = f"gitledger: {data['status']} {data['key']}"
    if data.get("ref"):
        line += f" ({data['ref']})"
    if data.get("message"):
        line += f": {data['message']}"
    line = printable(line)
    width = terminal_width(sys.stderr)
    print(clip(line, width) if width else line, file=sys.stderr, flush=True)


def _fit(natural: list[int], headers: list[str], width: int) -> list[int]:
    """Column widths that fit ``width``: the widest clippable column gives up a character at a time;
    the first column (the key, or the time) only when nothing else can."""
    widths = list(natural)
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    for keep_first in (True, False):
        floor = [min(n, max(len(h), 8)) for n, h in zip(natural, headers, strict=True)]
        if keep_first:
            floor[0] = natural[0]
        while excess > 0:
            room = [i for i, w in enumerate(widths) if w > floor[i]]
            if not room:
                break
            widest = max(room, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
    return widths


def table(rows: list[dict[str, Any]], columns: list[str], out: TextIO | None = None) -> None:
    """Rows on stdout: on a terminal an aligned table clipped to its width; elsewhere (a pipe, a file)
    tab-separated values without a header, one row a line, as gh does. Control characters (tabs and
    newlines too) are shown escaped, so a field never spans two cells or lines."""
    out = sys.stdout if out is None else out
    if not rows:
        return
    cells = [[("" if row.get(c) is None else printable(str(row.get(c)))) for c in columns] for row in rows]
    width = terminal_width(out)
    if width is None:
        for r in cells:
            print("\t".join(r), file=out)
        return
    headers = [c.upper() for c in columns]
    natural = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    widths = _fit(natural, headers, width)
    for r in [headers, *cells]:
        print("  ".join(clip(v, w).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip(), file=out)


class Progress:
    """``label n/total`` on stderr while a loop runs, only when stderr is a terminal (never in a pipe,
    a file or a log), redrawn at most ten times a second and erased at the end."""

    def __init__(self, label: str, total: int | None = None, *, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.active = terminal_width(self.stream) is not None
        self._shown = 0
        self._last = 0.0

    def __call__(self, items: Iterable[T]) -> Iterator[T]:
        done = 0
        try:
            for item in items:
                self.update(done)
                yield item
                done += 1
        finally:
            self.finish()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def phase(self, label: str, done: int | None = None) -> None:
        """A new label (drawn at once), and optionally how many items it has done so far."""
        if label != self.label:
            self.label, self.total, self._last = label, None, 0.0
        if done is None:
            self._draw(label)
        else:
            self.update(done)

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.active or now - self._last < 0.1:
            return
        self._last = now
        self._draw(f"{self.label} {done}/{self.total}" if self.total else f"{self.label} {done}")

    def _draw(self, text: str) -> None:
        if not self.active:
            return
        self._last = time.monotonic()
        self.stream.write("\r" + text.ljust(self._shown))
        self.stream.flush()
        self._shown = len(text)

    def finish(self) -> None:
        if self.active and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0


__all__ = ["Progress", "clip", "printable", "report_step", "say", "table", "terminal_width"]
