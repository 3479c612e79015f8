"""Inspection and repair: ``list``, ``show``, ``log``, ``resolve``, ``reconcile``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gitledger.cli.app import JSON_OUT, REPO, app, emit_json, say
from gitledger.cli.render import Progress, printable, table
from gitledger.core.errors import GitledgerError, UsageError


@app.command("list")
def list_command(json_out: bool = JSON_OUT, repo: Path | None = REPO) -> None:
    """List every ledger entry: key, state (marked DUPLICATE when its effect was made twice), outcome,
    ref and last update; --json adds task, step and the number of events."""
    from gitledger.features.inspect import list_entries
    from gitledger.session import open_session

    with open_session(repo) as session:
        rows = list_entries(session, Progress("reading the ledger"))
    if json_out:
        emit_json(rows)
        return
    if not rows:
        say("the ledger is empty")
        return
    for row in rows:
        if row["duplicate"]:
            row["state"] = f"{row['state']} (DUPLICATE)"
    table(rows, ["key", "state", "outcome", "ref", "updated_at"])


def _event_row(event: dict[str, Any]) -> dict[str, Any]:
    owner = event.get("owner")
    owner = owner if isinstance(owner, dict) else {}  # a damaged event is shown, not a crash
    detail = event.get("ref") or event.get("message") or ""
    if event.get("state") == "attempting":
        checks = event.get("checks")
        checks = ",".join(map(str, checks)) if isinstance(checks, list) else checks or ""
        detail = f"lease until {event.get('lease_until')}; checks {checks}"
    return {
        "at": event.get("at"),
        "state": event.get("state"),
        "outcome": event.get("outcome"),
        "host": owner.get("host"),
        "pid": owner.get("pid"),
        "detail": detail,
    }


def _clean(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if not k.startswith("_")}


@app.command("show")
def show_command(key: str, json_out: bool = JSON_OUT, repo: Path | None = REPO) -> None:
    """Show one entry: its state and every event recorded for it."""
    from gitledger.features.inspect import load_entry
    from gitledger.session import open_session

    with open_session(repo) as session:
        entry = load_entry(session, key)
    summary = entry.summary()
    summary["intent_object"] = entry.location
    summary["corrupt_lines"] = [{"line": b.number, "error": b.error, "text": b.text} for b in entry.bad_lines]
    if json_out:
        summary["events"] = [_clean(e) for e in entry.events]
        emit_json(summary)
        return
    for name in ("key", "task", "step", "state", "outcome", "ref", "updated_at", "intent_object"):
        typer.echo(f"{name:<14} {printable(str(summary[name])) if summary[name] is not None else ''}")
    if summary["duplicate"]:
        typer.echo("duplicate      yes: the effect was created more than once")
    for bad in entry.bad_lines:
        typer.echo(printable(f"corrupt line {bad.number}: {bad.error}: {bad.text}"))
    typer.echo("")
    table([_event_row(e) for e in entry.events], ["at", "state", "outcome", "host", "pid", "detail"])


@app.command("log")
def log_command(
    key: str | None = typer.Argument(None, help="Only this key's history."),
    limit: int = typer.Option(50, "--limit", "-n", help="Show the newest N events."),
    reverse: bool = typer.Option(
        False, "--reverse", help="Oldest first (like git log --reverse: the same newest N events)."
    ),
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """The ledger's history, newest first like git log: who did what, when, on which host."""
    from gitledger.features.inspect import log_events
    from gitledger.session import open_session

    if limit <= 0:
        raise UsageError("--limit must be a positive number")
    with open_session(repo) as session:
        events = log_events(session, key, limit)  # oldest first
    if not reverse:
        events.reverse()
    if json_out:
        emit_json([_clean(e) for e in events])
        return
    rows = [{**_event_row(e), "key": e.get("key")} for e in events]
    table(rows, ["at", "key", "state", "outcome", "host", "pid", "detail"])


@app.command("resolve")
def resolve_command(
    key: str,
    done: bool = typer.Option(False, "--done", help="Record that the effect exists (checked by a person)."),
    ref: str | None = typer.Option(None, "--ref", help="With --done: where the effect is (URL, commit)."),
    forget: bool = typer.Option(
        False, "--forget", help="Retire the entry with a tombstone; the next run-step acts again."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="With --forget: retire the entry even while a live owner holds its claim (its command runs).",
    ),
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """Settle an entry by hand: mark it done, or forget it so the step runs again. Nothing is deleted.

    --forget refuses (exit 75) while a live owner holds the entry's claim: the next run would act while
    the first command still runs. Wait for it, or pass --force when you know it is gone.
    """
    from gitledger.features.inspect import resolve
    from gitledger.session import open_session

    if done == forget:
        raise UsageError("give exactly one of --done and --forget")
    if ref is not None and not done:
        raise UsageError("--ref goes with --done")
    if ref is not None:
        from gitledger.core.keys import require_printable
        from gitledger.local.command import MAX_REF

        require_printable(ref, "--ref")
        if len(ref.encode("utf-8", "surrogateescape")) > MAX_REF:  # as run-step keeps a ref
            limit = MAX_REF // 1024
            raise UsageError(f"--ref is longer than {limit} KiB; give where the effect is (a URL, an id)")
    if force and not forget:
        raise UsageError("--force goes with --forget")
    with open_session(repo) as session:
        state = resolve(session, key, done=done, ref=ref, forget=forget, force=force)
    if json_out:
        emit_json(state)
    else:
        say(f"{key} is now {state['state']}")


@app.command("reconcile")
def reconcile_command(json_out: bool = JSON_OUT, repo: Path | None = REPO) -> None:
    """Query reality for every entry left attempting by a gone owner and settle what can be settled.

    Found → done (already_existed); absent → failed (retryable); ledger-only → reported unconfirmed;
    a check that cannot query reality → left as it was, reported unknown (exit 1).
    Check commands (cmd:) are taken from .gitledger.yml only, never from the ledger itself.
    """
    from gitledger.features.inspect import pending, reconcile
    from gitledger.session import open_session

    with open_session(repo) as session:
        entries = pending(session)
        results = reconcile(session, entries, Progress("reconciling", len(entries)))
    if json_out:
        emit_json(results)
    elif results:
        table(results, ["key", "result", "ref"])
    else:
        say("nothing to reconcile")
    failed = [r for r in results if r.get("error")]
    if failed:
        raise GitledgerError(
            f"{len(failed)} of {len(results)} entries left as they were (result 'unknown'), e.g. "
            f"{failed[0]['error']}; run reconcile again once the checks can query reality"
        )
