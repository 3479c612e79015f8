"""Render the reliability figures (JSON from the suite) as the Markdown table of docs/reliability.md.

Regenerate (from the repository root)::

    GITLEDGER_STRESS=full GITLEDGER_RELIABILITY_REPORT=docs/reliability.json python -m pytest -q tests/faults
    python tests/faults/report.py docs/reliability.json --update docs/reliability.md

Without ``--update`` the table is printed. With it, the part of the file between the two marker lines
``<!-- figures:start -->`` and ``<!-- figures:end -->`` is replaced.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.faults.tally import FIGURES

START, END = "<!-- figures:start -->", "<!-- figures:end -->"
MUST_BE_ZERO = ("duplicates", "events_lost", "sentinels")

ROWS: list[tuple[str, str]] = [
    ("Crash matrix: cases run (check kind x crash point)", "matrix.cases"),
    ("Crash matrix: crashes injected (SIGKILL)", "matrix.crashes"),
    ("Crash matrix: effects counted in reality", "matrix.effects"),
    ("Crash matrix: duplicate effects", "matrix.duplicates"),
    ("Crash matrix: ledger events checked", "matrix.events"),
    ("Crash matrix: ledger events lost", "matrix.events_lost"),
    ("Stress: concurrent processes x keys", "stress.processes*stress.keys"),
    ("Stress: `run-step` processes started", "stress.runs"),
    ("Stress: crashes (GITLEDGER_FAULT or outside SIGKILL)", "stress.crashes"),
    ("Stress: effects counted in reality", "stress.effects"),
    ("Stress: duplicate effects", "stress.duplicates"),
    ("Stress: ledger events checked", "stress.events"),
    ("Stress: ledger events lost", "stress.events_lost"),
    ("Stress: stale git lock files removed after kills", "stress.stale_locks"),
    ("Bad inputs tried (hostile names, malformed configs, damaged ledgers)", "inputs.bad"),
    ("Property-test examples (hypothesis)", "inputs.property_examples"),
    ("Shell-injection sentinels that appeared", "inputs.sentinels"),
]


def value(figures: dict[str, int], spec: str) -> str:
    if "*" in spec:
        return " x ".join(str(figures.get(part, 0)) for part in spec.split("*"))
    return str(figures.get(spec, 0))


def render(data: dict[str, Any]) -> str:
    figures: dict[str, int] = data["figures"]
    unknown = set(figures) - set(FIGURES)
    if unknown:
        raise SystemExit(f"unknown figures in the report: {sorted(unknown)}")
    tests = data.get("tests", {})
    lines = [
        "| Figure | Value |",
        "|---|---:|",
        *(f"| {label} | {value(figures, spec)} |" for label, spec in ROWS),
        "",
        f"Run: {data.get('generated')}, commit {data.get('commit', '?')}, size `{data.get('size')}`, "
        f"{data.get('git')}, "
        f"Python {data.get('python')}, {data.get('cpus')} CPUs; tests in tests/faults: "
        f"{tests.get('passed', 0)} passed, {tests.get('failed', 0)} failed, "
        f"{tests.get('skipped', 0)} skipped.",
    ]
    bad = [name for name, n in figures.items() if n and name.rsplit(".", 1)[1] in MUST_BE_ZERO]
    if bad or tests.get("failed"):
        lines.append("")
        lines.append(f"**Attention:** non-zero {', '.join(bad) or 'failures'} — this run found a problem.")
    return "\n".join(lines) + "\n"


def update(path: Path, table: str) -> None:
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{path} has no '{START}' ... '{END}' block")
    head, rest = text.split(START, 1)
    _old, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{table}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("report", type=Path, help="the JSON written by the suite")
    parser.add_argument("--update", type=Path, help="replace the figures block of this Markdown file")
    args = parser.parse_args(argv)
    table = render(json.loads(args.report.read_text(encoding="utf-8")))
    if args.update:
        update(args.update, table)
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
