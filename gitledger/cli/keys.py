"""``gitledger key``: print a step's key and derived names."""

from __future__ import annotations

import json

import typer

from gitledger.cli.app import ARG, CONTENT, CONTENT_FILE, JSON_OUT, STEP, TASK, app
from gitledger.cli.parse import content_from_options


@app.command("key")
def key_command(
    task: str = TASK,
    step: str = STEP,
    content: str | None = CONTENT,
    content_file: str | None = CONTENT_FILE,
    arg: list[str] | None = ARG,
    json_out: bool = JSON_OUT,
) -> None:
    """Print the stable key of a step and the names derived from it (branch, label, trailer, marker)."""
    from gitledger.core.keys import StepKey

    step_key = StepKey.derive(task, step, content_from_options(content, content_file, arg))
    data = step_key.as_dict()
    if json_out:
        typer.echo(json.dumps(data))
    else:
        width = max(len(k) for k in data)
        for name, value in data.items():
            typer.echo(f"{name:<{width}}  {value}")
