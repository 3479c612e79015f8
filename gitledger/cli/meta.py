"""Habits of git and gh: ``gitledger help [COMMAND]``, ``gitledger completion SHELL``, readable metavars.

The metavars are set on the built command tree (:func:`readable`) rather than left to typer, whose
rendering of types (``TEXT``, ``<str>``, ``<list[str]>``...) changes between its versions.
"""

from __future__ import annotations

from typing import Any

import typer

from gitledger.cli.app import app
from gitledger.core.errors import UsageError

# by option name (every spelling of an option maps alike), then by argument name
OPTION_METAVARS = {
    "--task": "TASK",
    "--step": "STEP",
    "--content": "TEXT",
    "--content-file": "FILE",
    "--arg": "NAME=VALUE",
    "--check": "SPEC",
    "--on-unconfirmed": "fail|retry|skip",
    "--lease": "SECONDS",
    "--settle": "SECONDS",
    "--remote": "REMOTE",
    "--github-repo": "OWNER/NAME",
    "--repo": "PATH",
    "--limit": "N",
    "--ref": "REF",
    "--title": "TEXT",
    "--body": "TEXT",
    "--body-file": "FILE",
    "--base": "BRANCH",
    "--trailers": "auto|git|api|none",
    "--commit-api-limit": "N",
    "--git-dir": "PATH",
}
ARGUMENT_METAVARS = {
    "key": "KEY",
    "command": "COMMAND",
    "remote": "REMOTE",
    "url": "URL",
    "number": "NUMBER",
    "agent": "AGENT",
    "shell": "bash|zsh|fish",
    "topic": "COMMAND",
}
SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_GITLEDGER_COMPLETE"


def subcommands(command: Any) -> dict[str, Any]:
    """The subcommands of a group (click's Group and typer's own group alike), else {}."""
    found = getattr(command, "commands", None)
    return dict(found) if isinstance(found, dict) else {}


def _no_type(ctx: Any) -> None:
    return None


def readable(command: Any) -> Any:
    """Give every value-taking parameter of ``command`` and its subcommands a readable metavar."""
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False) or param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            param.metavar = ARGUMENT_METAVARS.get(param.name or "", (param.name or "VALUE").upper())
            if hasattr(param, "display_type_rich"):  # newer typer also prints the type: <list[str]>
                param.display_type_rich = _no_type
        else:
            named = [OPTION_METAVARS[o] for o in param.opts if o in OPTION_METAVARS]
            param.metavar = named[0] if named else "VALUE"
    for sub in subcommands(command).values():
        readable(sub)
    return command


@app.command("help")
def help_command(
    ctx: typer.Context,
    topic: list[str] | None = typer.Argument(None, help="A command, e.g. 'run-step' or 'hooks install'."),
) -> None:
    """Show the help of gitledger or of one command (the same as COMMAND --help)."""
    root = ctx.find_root()
    command, context = root.command, root
    for name in topic or []:
        found = subcommands(command).get(name)
        if found is None:
            where = " ".join(["gitledger", *(topic or [])[: (topic or []).index(name)]])
            raise UsageError(f"no command {name!r} in '{where}'; see '{where} --help'")
        command = found
        context = type(root)(found, info_name=name, parent=context)
    typer.echo(command.get_help(context))


@app.command("completion")
def completion_command(
    shell: str = typer.Argument(..., help="bash, zsh or fish."),
) -> None:
    """Print the shell completion script for bash, zsh or fish.

    bash:  eval "$(gitledger completion bash)"      (in ~/.bashrc)
    zsh:   eval "$(gitledger completion zsh)"       (in ~/.zshrc, after compinit)
    fish:  gitledger completion fish > ~/.config/fish/completions/gitledger.fish
    """
    if shell not in SHELLS:
        raise UsageError(f"cannot complete for {shell!r}; use one of: {', '.join(SHELLS)}")
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="gitledger", complete_var=COMPLETE_VAR, shell=shell))


def enable_completion() -> None:
    """Register typer's completion classes (the script's callback reaches main() with COMPLETE_VAR)."""
    from typer._completion_classes import completion_init

    completion_init()
