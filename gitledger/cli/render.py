"""Output for people and programs, with no CLI framework: the fast skip uses it too."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` made safe for a terminal line: control characters (newlines, escape sequences, which a
    forged ledger entry may carry) are shown as ``\\xNN`` instead of being sent to the terminal."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def report_step(data: dict[str, Any], json_out: bool) -> None:
    """Print a step's result: one JSON object on stdout, or one human line on stderr."""
    if json_out:
        print(json.dumps(data, ensure_ascii=False), flush=True)
        return
    line = f"gitledger: {data['status']} {data['key']}"
    if data.get("ref"):
        line += f" ({data['ref']})"
    if data.get("message"):
        line += f": {data['message']}"
    print(printable(line), file=sys.stderr, flush=True)


def table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """A plain aligned table on stdout."""
    if not rows:
        return
    cells = [[("" if row.get(c) is None else printable(str(row.get(c)))) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


__all__ = ["printable", "report_step", "table"]
