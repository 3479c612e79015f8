"""The fast skip path: answer ``run-step`` on an already-done key without loading the CLI framework.

Agents call ``run-step`` for every step of every restart, and most of those calls find the step done.
Importing typer costs more than the whole answer (see docs/design.md), so :func:`try_skip` reads the
arguments of a plain ``run-step`` call, and when the key is ``done`` prints exactly what the full
command prints and returns its exit code. Everything else returns None and the full command runs:
unknown or unusual arguments, ``--help``, any error (the full command reports it), any state but
done. It only reads; it never writes the ledger.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

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
    "--github-repo": "github_repo",
    "--remote": "remote",  # a done key is skipped in any claim mode: the remote is not needed
    "--repo": "repo",
}
_REPEATABLE = {"arg", "check"}
_FLAGS = {"--json": "json"}


def parse(argv: Sequence[str]) -> dict[str, object] | None:
    """The options of a plain ``run-step ... -- COMMAND`` call, or None when anything is unusual."""
    if len(argv) < 2 or argv[0] != "run-step" or "--" not in argv:
        return None
    split = list(argv).index("--")
    options, command = list(argv[1:split]), list(argv[split + 1 :])
    if not command:
        return None
    values: dict[str, object] = {"arg": [], "check": [], "command": command}
    i = 0
    while i < len(options):
        word = options[i]
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in _FLAGS and not eq:
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
            values[field].append(value)  # type: ignore[attr-defined]
        elif field in values:
            return None
        else:
            values[field] = value
    if "task" not in values or "step" not in values:
        return None
    return values


def try_skip(argv: Sequence[str]) -> int | None:
    """Exit code 0 after printing ``skipped`` when the step is done; None to run the full command."""
    if os.environ.get("GITLEDGER_NO_FASTPATH"):
        return None
    values = parse(argv)
    if values is None:
        return None
    try:
        return _skip(values)
    except (GitledgerError, OSError, ValueError):
        return None


def _skip(v: dict[str, object]) -> int | None:
    from gitledger.cli.parse import content_from_options
    from gitledger.cli.render import report_step
    from gitledger.features.steps import StepRequest, peek_done
    from gitledger.local.command import check_command
    from gitledger.session import open_session

    def opt(name: str) -> str | None:
        value = v.get(name)
        return value if isinstance(value, str) else None

    content_file = opt("content_file")
    content = content_from_options(
        opt("content"),
        Path(content_file) if content_file is not None else None,
        list(v["arg"]),  # type: ignore[call-overload]
    )
    lease = opt("lease")
    request = StepRequest(
        str(v["task"]),
        str(v["step"]),
        content,
        list(v["check"]),  # type: ignore[call-overload]
        opt("on_unconfirmed"),
        float(lease) if lease is not None else None,
    )
    with open_session(opt("repo"), opt("github_repo")) as session:
        check_command(list(v["command"]), session.cwd)  # type: ignore[call-overload]
        result = peek_done(session, request)
    if result is None:
        return None
    report_step(result.to_json(), bool(v.get("json")))
    return 0
