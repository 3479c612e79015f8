"""The typer application object shared by the command modules."""

from __future__ import annotations

import typer

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
)


def _version(value: bool) -> None:
    if value:
        from gitledger import __version__

        typer.echo(f"gitledger {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Crash-safe idempotency for agents: run each side effect once per intent."""


RAW_ARGS: list[str] = []  # the arguments main() was called with (to see whether '--' was given)


def emit_json(data: object) -> None:
    import json

    typer.echo(json.dumps(data, ensure_ascii=False))


def say(message: str) -> None:
    """A human message on stderr (stdout is kept for results and --json)."""
    typer.echo(f"gitledger: {message}", err=True)


REPO = typer.Option(
    None,
    "--repo",
    help="Path inside the git repository (default: the current directory).",
    show_default=False,
)
JSON_OUT = typer.Option(False, "--json", help="Print JSON for programs instead of a table.")
