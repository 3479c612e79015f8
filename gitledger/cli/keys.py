"""``gitledger key``: print a step's key and derived names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gitledger.cli.app import ARG, CONTENT, CONTENT_FILE, JSON_OUT, REPO, STEP, TASK, app
from gitledger.cli.parse import content_from_options

if TYPE_CHECKING:
    from gitledger.core.keys import Names


def _names(repo: Path | None) -> Names:
    """The branch and label prefixes of the repository's .gitledger.yml, as run-step uses them (the
    defaults outside a git repository, unless --repo names one)."""
    from gitledger.session import Session

    session = Session.discover(repo)
    try:
        return session.config.names
    finally:
        session.close()


@app.command("key")
def key_command(
    task: str = TASK,
    step: str = STEP,
    content: str | None = CONTENT,
    content_file: str | None = CONTENT_FILE,
    arg: list[str] | None = ARG,
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """Print the stable key of a step and the names derived from it (branch, label, trailer, marker).

    The branch and label use the prefixes of the repository's .gitledger.yml, as run-step does.
    """
    from gitledger.core.keys import StepKey

    step_key = StepKey.derive(task, step, content_from_options(content, content_file, arg), _names(repo))
    data = step_key.as_dict()
    if json_out:
        typer.echo(json.dumps(data))
    else:
        width = max(len(k) for k in data)
        for name, value in data.items():
            typer.echo(f"{name:<{width}}  {value}")
