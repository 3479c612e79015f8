"""``run-step`` without the CLI framework: the fast skip, and a fresh step too.

Agents call ``run-step`` for every step of every restart. Importing typer (and with it click and
pydantic) costs more than the whole answer on a done key and most of a fresh step (see
docs/design.md), so :func:`try_run` reads the arguments of a plain ``run-step ... -- COMMAND`` call
itself and runs the step through the same feature code (:mod:`gitledger.features.steps`) and the
same rendering as the typer command, which therefore prints exactly the same bytes.

Anything unusual returns None before anything is read or written, and the typer command runs
instead (and reports what is wrong): an unknown or repeated option, a missing value, ``--help``, a
value typer would refuse (``--lease x``), unreadable content. From the point where the step is
asked for, errors are the command's own: they propagate to :func:`gitledger.cli.main`, which prints
them the same way for both paths. ``GITLEDGER_NO_FASTPATH=1`` always takes the typer path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitledger.core.errors import GitledgerError

_VALUE_OPTIONS = {
    "-t": "task",
    "--task": "task",
    "-s": "step",
    "--step": "step",
    "--content": "content",
    "--content-file": "content_file",
    "--arg": "arg",
    "-c": "check",
    "--check": "check",
    "--on-unconfirmed": "on_unconfirmed",
    "--lease": "lease",
    "--settle": "settle",
    "--github-repo": "github_repo",
    "--remote": "remote",
    "--repo": "repo",
}
_REPEATABLE = {"arg", "check"}
_FLAGS = {"--json": "json", "--allow-offline": "allow_offline"}


def parse(argv: Sequence[str]) -> dict[str, Any] | None:
    """The options of a plain ``run-step ... -- COMMAND`` call, or None when anything is unusual."""
    if len(argv) < 2 or argv[0] != "run-step" or "--" not in argv:
        return None
    split = list(argv).index("--")
    options, command = list(argv[1:split]), list(argv[split + 1 :])
    if not command:
        return None
    values: dict[str, Any] = {"arg": [], "check": [], "command": command}
    i = 0
    while i < len(options):
        word = options[i]
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in _FLAGS and not eq:
            if _FLAGS[name] in values:
                return None
            values[_FLAGS[name]] = True
            i += 1
            continue
        field = _VALUE_OPTIONS.get(name)
        if field is None:
            return None
        if eq:
            value = inline
            i += 1
        elif i + 1 < len(options):
            value = options[i + 1]
            i += 2
        else:
            return None
        if field in _REPEATABLE:
            values[field].append(value)
        elif field in values:
            return None
        else:
            values[field] = value
    if "task" not in values or "step" not in values:
        return None
    return values


def try_run(argv: Sequence[str]) -> int | None:
    """Run a plain ``run-step`` call and return its exit code; None to let the typer command run it."""
    if os.environ.get("GITLEDGER_NO_FASTPATH"):
        return None
    values = parse(argv)
    if values is None:
        return None
    try:
        request = _request(values)
    except (GitledgerError, OSError, ValueError):
        return None  # the typer command reports it, in its own words
    return _run(values, request)


def _opt(values: dict[str, Any], name: str) -> str | None:
    value = values.get(name)
    return value if isinstance(value, str) else None


def _request(values: dict[str, Any]) -> Any:
    from gitledger.cli.parse import content_from_options
    from gitledger.features.steps import StepRequest

    lease, settle = _opt(values, "lease"), _opt(values, "settle")
    return StepRequest(
        values["task"],
        values["step"],
        content_from_options(
            _opt(values, "content"),
            _opt(values, "content_file"),
            values["arg"],
        ),
        values["check"],
        _opt(values, "on_unconfirmed"),
        float(lease) if lease is not None else None,
        float(settle) if settle is not None else None,
    )


def _run(values: dict[str, Any], request: Any) -> int:
    from gitledger.cli.render import report_step, say
    from gitledger.features.steps import run_step
    from gitledger.session import open_session

    repo, github_repo = _opt(values, "repo"), _opt(values, "github_repo")
    json_out = bool(values.get("json"))
    with open_session(Path(repo) if repo is not None else None, github_repo) as session:
        result = run_step(
            session,
            request,
            values["command"],
            remote=_opt(values, "remote"),
            allow_offline=bool(values.get("allow_offline")),
            stdout_to_stderr=json_out,
            github_repo=github_repo,
        )
    for warning in result.extra.get("warnings", ()):
        say(f"warning: {warning}")
    report_step(result.to_json(), json_out)
    return result.exit_code
