"""``gitledger hooks``: install the git hooks, and the check the pre-push hook calls."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gitledger.cli.app import JSON_OUT, app, emit_json
from gitledger.core.errors import CheckError, GitledgerError

if TYPE_CHECKING:
    from gitledger.features.hooks.install import HookChange

hooks_app = typer.Typer(
    name="hooks",
    help=(
        "Git hooks for agent repositories. commit-msg adds the 'Gitledger-Key: <key>' trailer when "
        "GITLEDGER_KEY is set (as inside 'gitledger run-step'); pre-push refuses to create a branch whose "
        "new commits carry a key whose branch already exists on the remote under another name. "
        "Existing hooks are chained, never overwritten. See docs/hooks.md."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
app.add_typer(hooks_app)

REPO = typer.Option(
    Path("."),
    "--repo",
    help="Any path inside the repository (or its git directory). Default: the current directory.",
    file_okay=False,
)


@hooks_app.command("install")
def install_command(
    force: bool = typer.Option(
        False,
        "--force",
        help="Replace gitledger hooks written by another gitledger version. Foreign hooks are always "
        "kept and chained, never replaced.",
    ),
    json_out: bool = JSON_OUT,
    repo: Path = REPO,
) -> None:
    """Install the commit-msg and pre-push hooks into the repository's hooks directory.

    The directory is the one git uses (core.hooksPath is honoured). A hook already there that gitledger
    did not write is renamed to NAME.gitledger-chained and runs first; its failure still stops the commit
    or push. Running install again changes nothing. The hooks run this Python to start gitledger, and
    'gitledger' from PATH when it is gone.
    """
    from gitledger.features.hooks.install import install

    _report(install(repo, force=force), json_out)


@hooks_app.command("uninstall")
def uninstall_command(json_out: bool = JSON_OUT, repo: Path = REPO) -> None:
    """Remove the gitledger hooks and put back, byte for byte, any hook they had chained.

    Hooks that gitledger did not write are left alone.
    """
    from gitledger.features.hooks.install import uninstall

    _report(uninstall(repo), json_out)


def _report(changes: list[HookChange], json_out: bool) -> None:
    if json_out:
        emit_json([{"hook": c.name, "path": str(c.path), "action": c.action} for c in changes])
        return
    for change in changes:
        typer.echo(change.describe())


@hooks_app.command("check-push", hidden=True)
def check_push_command(
    remote: str = typer.Argument(..., help="The remote name git passes to pre-push (or the URL)."),
    url: str = typer.Argument(..., help="The URL git pushes to."),
    git_dir: Path = typer.Option(..., "--git-dir", help="The absolute git directory of the repository."),
    sync_ledger: bool = typer.Option(
        False, "--sync-ledger", help="Run 'gitledger sync REMOTE' once the check passed."
    ),
) -> None:
    """Internal, run by the pre-push hook: refuse a push that would duplicate a key's branch.

    Reads '<local sha> refs/heads/<branch> <key>' lines on standard input, one per new remote branch
    and key found in its new commits. Exits 1, naming the existing branch, when the remote already has
    the key's convention branch under another name.
    """
    from gitledger.features.hooks.prepush import (
        OVERRIDE_HINT,
        check_push,
        existence_finders,
        parse_push_lines,
    )

    pushes = parse_push_lines(sys.stdin.read())
    if pushes:
        try:
            conflicts = check_push(
                git_dir, remote, pushes, url=url, finders=existence_finders(git_dir, remote, url)
            )
        except CheckError as exc:
            raise CheckError(
                f"{exc.message}; cannot tell whether this push is a duplicate, {OVERRIDE_HINT}"
            ) from exc
        for conflict in conflicts:
            typer.echo(f"gitledger: {conflict.message()}", err=True)
        if conflicts:
            raise GitledgerError(f"push refused; {OVERRIDE_HINT}")
    if sync_ledger:
        status = run_ledger_sync(remote)
        if status != 0:
            raise GitledgerError(
                f"'gitledger sync {remote}' failed and gitledger.pushLedger is true, so the push is "
                "stopped; fix the sync, or push with --no-verify",
                exit_code=status,
            )


def run_ledger_sync(remote: str) -> int:
    """The one place the pre-push hook runs ``gitledger sync REMOTE`` (``gitledger.pushLedger=true``).

    Returns sync's exit code. Sync runs in this process with the hook's GIT_* variables removed (the git
    processes it starts inherit the environment).
    """
    from gitledger.cli.render import printable
    from gitledger.cli.sync import sync_command
    from gitledger.git.hooks import no_git_env

    clean = no_git_env()
    os.environ.clear()
    os.environ.update(clean)
    try:
        sync_command(remote, json_out=False, repo=None)
    except GitledgerError as exc:
        print(f"gitledger: {printable(exc.message)}", file=sys.stderr)
        return exc.exit_code
    return 0
