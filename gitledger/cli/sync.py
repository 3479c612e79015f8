"""``gitledger sync`` and ``gitledger init``: share the ledger through a git remote."""

from __future__ import annotations

from pathlib import Path

import typer

from gitledger.cli.app import JSON_OUT, REPO, app, emit_json, say
from gitledger.cli.render import Progress


@app.command("sync")
def sync_command(
    remote: str | None = typer.Argument(
        None, help="Remote name (default: 'remote' in .gitledger.yml, else gitledger.remote, else origin)."
    ),
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """Fetch the remote's ledger, merge it into the local one (no event is ever lost) and push it back.

    The push carries a lease on the remote's old values; when someone else pushed first, sync fetches,
    merges and tries again. Running it twice changes nothing the second time.
    """
    from gitledger.features.sync import sync
    from gitledger.git.sync import REF_KINDS
    from gitledger.session import open_session

    with open_session(repo) as session, Progress("syncing the ledger") as progress:
        name, report = sync(session, remote, lambda phase: progress.phase(f"syncing the ledger: {phase}"))
    if json_out:
        emit_json(report.to_json())
        return
    if not report.changed:
        say(f"the ledger is in sync with '{name}'")
        return
    parts = [f"{REF_KINDS[ref]} {how}" for ref, how in sorted(report.local.items())]
    if report.notes_merged:
        parts.append(f"events of {report.notes_merged} key(s) merged")
    if report.pushed:
        parts.append("pushed " + " and ".join(REF_KINDS[ref] for ref in report.pushed))
    say(f"synced with '{name}': " + "; ".join(parts))


@app.command("flush")
def flush_command(json_out: bool = JSON_OUT, repo: Path | None = REPO) -> None:
    """Fold the ledger's journal into refs/notes/gitledger now.

    gitledger records each event in a journal in the git directory (fsync'd, one line per event) and
    folds it into the notes in batches: every 2 048 events or 2 MiB of journal, and before anything
    leaves the machine (sync, the pre-push hook, remote claims). gitledger's own commands always see
    both. Run flush before reading the ledger with git itself (git notes, git log refs/notes/gitledger)
    or copying the refs by other means.
    """
    from gitledger.features.sync import flush
    from gitledger.session import open_session

    with open_session(repo) as session:
        folded = flush(session)
    if json_out:
        emit_json({"folded": folded})
        return
    say(f"folded {folded} event(s) into refs/notes/gitledger" if folded else "the journal is empty")


@app.command("init")
def init_command(
    remote: str | None = typer.Option(
        None, "--remote", help="Remote to share the ledger with (default: as for sync)."
    ),
    undo: bool = typer.Option(False, "--undo", help="Remove exactly what init adds."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the changes without making them."),
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """Configure a remote so 'git fetch' brings the ledger and the pre-push hook syncs it.

    Adds fetch refspecs for the ledger refs (into refs/gitledger/remotes/REMOTE/) and sets
    gitledger.remote and gitledger.pushLedger=true. It adds no push refspecs: those would replace
    git's default push behaviour. Running it twice adds nothing twice; --undo reverts it.
    """
    from gitledger.features.sync import init
    from gitledger.session import open_session

    with open_session(repo) as session:
        name, changes = init(session, remote, undo=undo, dry_run=dry_run)
    if json_out:
        emit_json({"remote": name, "undo": undo, "dry_run": dry_run, "changes": changes})
        return
    prefix = "would have " if dry_run else ""
    for change in changes:
        say(prefix + change)
    if not changes:
        state = "not set up" if undo else "already set up"
        say(f"nothing to {'undo' if undo else 'do'}: '{name}' is {state} for the ledger")
