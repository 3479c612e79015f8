"""The typer application object shared by the command modules."""

from __future__ import annotations

from dataclasses import dataclass

import typer

from gitledger.cli.render import say as say  # the commands import it from here

app = typer.Typer(
    name="gitledger",
    help=(
        "Crash-safe idempotency for agents. Wrap a side-effecting command in 'gitledger run-step' and "
        "it runs once per intent, even across crashes and restarts: the ledger lives in the git "
        "repository (refs/notes/gitledger) and reality is queried before every action."
    ),
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    # -h like git and gh; subcommands inherit it from this context
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from gitledger._version import __version__

        typer.echo(f"gitledger {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Crash-safe idempotency for agents: run each side effect once per intent."""


@dataclass(frozen=True)
class Invocation:
    """What main() was called with, for commands that must see it (``run-step`` looks for '--')."""

    raw_args: tuple[str, ...]


def emit_json(data: object) -> None:
    import json

    typer.echo(json.dumps(data, ensure_ascii=False))


REPO = typer.Option(
    None,
    "--repo",
    help="Path inside the git repository (default: the current directory).",
    show_default=False,
)
JSON_OUT = typer.Option(False, "--json", help="Print JSON for programs instead of a table.")

# options shared by several commands
TASK = typer.Option(..., "--task", "-t", help="Task id, stable across restarts (e.g. an issue id).")
STEP = typer.Option(..., "--step", "-s", help="Step name within the task (e.g. open-pr).")
CONTENT = typer.Option(None, "--content", help="Text the step is about; hashed into the key.")
CONTENT_FILE = typer.Option(
    None,
    "--content-file",
    help="File whose bytes (at most 16 MiB) are hashed into the key ('-': standard input).",
)
ARG = typer.Option(
    None, "--arg", help="NAME=VALUE hashed as canonical JSON (order does not matter); repeatable."
)
