"""``mcp-proxy`` in ``gitledger --help``: the command itself never reaches typer (see cli.mcp_proxy)."""

from __future__ import annotations

import typer

from gitledger.cli.app import app
from gitledger.cli.mcp_proxy import HELP


@app.command(
    "mcp-proxy",
    help="Serve MCP in front of another MCP server, guarding its write tools (see docs/mcp.md).",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def mcp_proxy_help() -> None:
    """Only reached through typer when main() did not dispatch it (e.g. an embedding caller)."""
    typer.echo(HELP)
