"""``gitledger key``: print a step's key and derived names."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from gitledger.cli.app import JSON_OUT, app
from gitledger.errors import UsageError
from gitledger.keys import Content


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
