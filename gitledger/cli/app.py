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


@app.callback()
def _root() -> None:
    """Crash-safe idempotency for agents: run each side effect once per intent."""
