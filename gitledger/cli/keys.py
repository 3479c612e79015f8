"""``gitledger key``: print a step's key and derived names."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from gitledger.cli.app import JSON_OUT, app
from gitledger.plan import content_from_options

TASK = typer.Option(..., "--task", "-t", help="Task id, stable across restarts (e.g. an issue id).")
STEP = typer.Option(..., "--step", "-s", help="Step name within the task (e.g. open-pr).")
CONTENT = typer.Option(None, "--content", help="Text the step is about; hashed into the key.")
CONTENT_FILE = typer.Option(
    None, "--content-file", help="File whose bytes are hashed into the key.", dir_okay=False
)
ARG = typer.Option(
    None, "--arg", help="NAME=VALUE hashed as canonical JSON (order does not matter); repeatable."
)


@app.command("key")
def key_command(
    task: str = TASK,
    step: str = STEP,
    content: str | None = CONTENT,
    content_file: Path | None = CONTENT_FILE,
    arg: list[str] | None = ARG,
    json_out: bool = JSON_OUT,
) -> None:
    """Print the stable key of a step and the names derived from it (branch, label, trailer, marker)."""
    from gitledger.keys import StepKey

    step_key = StepKey.derive(task, step, content_from_options(content, content_file, arg))
    data = step_key.as_dict()
    if json_out:
        typer.echo(json.dumps(data))
    else:
        width = max(len(k) for k in data)
        for name, value in data.items():
            typer.echo(f"{name:<{width}}  {value}")
