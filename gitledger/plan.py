"""From a step's options to what the protocol needs: key, checks and policy (no CLI framework here).

Shared by the typer command and the fast skip path (:mod:`gitledger.fastpath`), so both decide the
same way.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitledger.checks import Check
from gitledger.errors import UsageError
from gitledger.keys import Content, StepKey
from gitledger.ledger import printable
from gitledger.protocol import StepPolicy
from gitledger.workspace import Workspace


def content_from_options(content: str | None, content_file: Path | None, args: list[str] | None) -> Content:
    """Turn the mutually exclusive content options into :class:`Content`."""
    given = sum(x is not None and x != [] for x in (content, content_file, args))
    if given > 1:
        raise UsageError("use only one of --content, --content-file and --arg")
    if content is not None:
        return Content.text(content)
    if content_file is not None:
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


@dataclass
class StepPlan:
    key: StepKey
    checks: list[Check]
    policy: StepPolicy


def _first(*values: float | None) -> float:
    return next(v for v in values if v is not None)


def plan_step(
    ws: Workspace,
    task: str,
    step: str,
    content: Content,
    checks: list[str] | None,
    on_unconfirmed: str | None,
    lease: float | None,
) -> StepPlan:
    """Combine options, the step's settings in .gitledger.yml and the defaults (in that order)."""
    cfg = ws.config
    step_cfg = cfg.step(step)
    return StepPlan(
        StepKey.derive(task, step, content, cfg.names),
        ws.checks(checks or step_cfg.checks or ()),
        StepPolicy(
            on_unconfirmed=on_unconfirmed or step_cfg.on_unconfirmed or cfg.on_unconfirmed or "fail",
            lease=_first(lease, step_cfg.lease, cfg.lease, StepPolicy.lease),
        ),
    )


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
