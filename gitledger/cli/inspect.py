"""Inspection and repair: ``list``, ``show``, ``log``, ``resolve``, ``reconcile``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO, cast

import typer

from gitledger.cli.app import JSON_OUT, REPO, app, emit_json, say
from gitledger.errors import EXIT_IN_PROGRESS, GitledgerError, UsageError


def table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """A plain aligned table on stdout."""
    if not rows:
        return
    from gitledger.ledger import printable

    cells = [[("" if row.get(c) is None else printable(str(row.get(c)))) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    typer.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


@app.command("list")
def list_command(json_out: bool = JSON_OUT, repo: Path | None = REPO) -> None:
    """List every ledger entry: key, task, step, state, outcome, ref, last update, duplicates."""
    from gitledger.workspace import open_workspace

    with open_workspace(repo) as ws:
        rows = [entry.summary() for entry in ws.store.entries()]
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


def _load(ws: Any, key: str) -> Any:
    from gitledger.keys import parse_key

    entry = ws.store.load(parse_key(key))
    if not entry.exists:
        raise UsageError(f"no ledger entry for {key}; see 'gitledger list'")
    return entry


def _event_row(event: dict[str, Any]) -> dict[str, Any]:
    owner = event.get("owner") or {}
    detail = event.get("ref") or event.get("message") or ""
    if event.get("state") == "attempting":
        detail = f"lease until {event.get('lease_until')}; checks {','.join(event.get('checks') or [])}"
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
    from gitledger.workspace import open_workspace

    with open_workspace(repo) as ws:
        entry = _load(ws, key)
    summary = entry.summary()
    summary["intent_object"] = entry.location
    summary["corrupt_lines"] = [{"line": b.number, "error": b.error, "text": b.text} for b in entry.bad_lines]
    if json_out:
        summary["events"] = [_clean(e) for e in entry.events]
        emit_json(summary)
        return
    from gitledger.ledger import printable

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
    limit: int = typer.Option(50, "--limit", "-n", help="Show at most this many events (newest last)."),
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """The ledger's history: who did what, when, on which host (all keys, or one)."""
    from gitledger.workspace import open_workspace

    if limit <= 0:
        raise UsageError("--limit must be a positive number")
    with open_workspace(repo) as ws:
        entries = [_load(ws, key)] if key else list(ws.store.entries())
    events = sorted((e for entry in entries for e in entry.events), key=lambda e: str(e.get("at")))
    events = events[-limit:]
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
    from gitledger.keys import Names, StepKey
    from gitledger.ledger import DONE, FORGOTTEN
    from gitledger.protocol import StepRunner
    from gitledger.store import ANY_VERSION
    from gitledger.workspace import open_workspace

    if done == forget:
        raise UsageError("give exactly one of --done and --forget")
    if ref is not None and not done:
        raise UsageError("--ref goes with --done")
    if force and not forget:
        raise UsageError("--force goes with --forget")
    with open_workspace(repo) as ws:
        _load(ws, key)
        intent = ws.store.intent(key)
        if intent is None:
            raise UsageError(f"no intent recorded for {key}; the ledger's intents ref is damaged")
        step = StepKey(intent.task, intent.step, intent.digest, Names())
        runner = StepRunner(ws.store)
        holder = runner.holder(ws.store.load(intent).folded) if forget and not force else None
        if holder is not None:
            owner = holder.get("owner") or {}
            raise GitledgerError(
                f"{key} is held by a live owner (pid {owner.get('pid')} on {owner.get('host')}, lease until "
                f"{holder.get('lease_until', 'no deadline')}): forgetting it now would let the next run act "
                "while that command still runs; wait for it to finish, or pass --force if you know it is "
                "gone",
                exit_code=EXIT_IN_PROGRESS,
            )
        if done:
            event = runner.event(step, DONE, outcome="resolved", ref=ref, by="resolve")
        else:
            event = runner.event(step, FORGOTTEN, by="resolve")
        ws.store.append(intent, event, ANY_VERSION)
        state = ws.store.load(intent).summary()
    if json_out:
        emit_json(state)
    else:
        say(f"{key} is now {state['state']}")


@app.command("reconcile")
def reconcile_command(json_out: bool = JSON_OUT, repo: Path | None = REPO) -> None:
    """Query reality for every entry left attempting by a gone owner and settle what can be settled.

    Found → done (already_existed); absent → failed (retryable); ledger-only → reported unconfirmed.
    Check commands (cmd:) are taken from .gitledger.yml only, never from the ledger itself.
    """
    from gitledger.checks.specs import validate_spec
    from gitledger.keys import StepKey
    from gitledger.ledger import ATTEMPTING
    from gitledger.protocol import StepRunner, reconcile_entry
    from gitledger.workspace import open_workspace

    results: list[dict[str, Any]] = []
    with open_workspace(repo) as ws:
        runner = StepRunner(ws.store)
        pending = [e for e in ws.store.entries() if e.folded.state == ATTEMPTING]
        quiet = json_out or len(pending) <= 20
        with typer.progressbar(
            pending, label="reconciling", file=cast(TextIO, _Null()) if quiet else None
        ) as bar:
            for entry in bar:
                intent = ws.store.intent(entry.key)
                if intent is None:
                    continue
                step = StepKey(intent.task, intent.step, intent.digest, ws.config.names)
                claim = entry.folded.claim or {}
                # The claim's checks come from the ledger, which anyone with push access can write:
                # never a command from there, and nothing that is not a valid spec.
                specs = [
                    s
                    for s in claim.get("checks") or []
                    if isinstance(s, str) and not s.startswith("cmd:") and validate_spec(s) is None
                ]
                specs += [s for s in ws.config.step(intent.step).checks or () if s.startswith("cmd:")]
                outcome, ref = reconcile_entry(runner, step, entry, ws.checks(specs))
                results.append({"key": entry.key, "result": outcome, "ref": ref})
    if json_out:
        emit_json(results)
    elif results:
        table(results, ["key", "result", "ref"])
    else:
        say("nothing to reconcile")


class _Null:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
