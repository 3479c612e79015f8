"""Inspection and repair of the ledger: list, show, log, resolve and reconcile (typed; no printing)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from gitledger.core.errors import EXIT_IN_PROGRESS, CheckError, GitledgerError, UsageError
from gitledger.core.events import Entry, Event
from gitledger.session import Session


def list_entries(
    session: Session, progress: Callable[[Iterable[Entry]], Iterator[Entry]] = iter
) -> list[dict[str, Any]]:
    """One summary per ledger entry (key, task, step, state, outcome, ref, updated_at, duplicate).

    ``progress`` wraps the loop over the entries (the CLI shows a count on a terminal)."""
    return [entry.summary() for entry in progress(session.store.entries())]


def load_entry(session: Session, key: str) -> Entry:
    """The entry of ``key``; a usage error when the ledger has none."""
    from gitledger.core.keys import parse_key

    entry = session.store.load(parse_key(key))
    if not entry.exists:
        raise UsageError(f"no ledger entry for {key}; see 'gitledger list'")
    return entry


def log_events(session: Session, key: str | None, limit: int) -> list[Event]:
    """The newest ``limit`` events of one key (or of the whole ledger), oldest first."""
    if limit <= 0:
        raise UsageError("--limit must be a positive number")
    entries = [load_entry(session, key)] if key is not None else list(session.store.entries())
    events = sorted((e for entry in entries for e in entry.events), key=lambda e: str(e.get("at")))
    return events[-limit:]


def resolve(
    session: Session, key: str, *, done: bool, ref: str | None, forget: bool, force: bool = False
) -> dict[str, Any]:
    """Settle an entry by hand (``done`` or ``forget``); returns the entry's new summary.

    ``forget`` refuses (:data:`EXIT_IN_PROGRESS`) while a live owner holds the claim, unless ``force``:
    the next run would act while the first command still runs.
    """
    from gitledger.core.events import DONE, FORGOTTEN
    from gitledger.core.keys import Names, StepKey
    from gitledger.core.protocol import StepRunner
    from gitledger.core.store import ANY_VERSION

    if done == forget:
        raise UsageError("give exactly one of --done and --forget")
    if ref is not None and not done:
        raise UsageError("--ref goes with --done")
    if ref is not None and not _utf8(ref):
        shown = ref.encode("utf-8", "backslashreplace").decode()
        raise UsageError(f"--ref {shown!r} is not valid UTF-8 text; pass it as UTF-8")
    if key != key.strip():  # (parse_key strips it for reading; a change is made to the exact key only)
        raise UsageError(
            f"{key!r} is not a gitledger key: it has spaces around it; pass the key as 'gitledger list' "
            "shows it"
        )
    load_entry(session, key)
    intent = session.store.intent(key)
    if intent is None:
        raise UsageError(f"no intent recorded for {key}; the ledger's intents ref is damaged")
    step = StepKey(intent.task, intent.step, intent.digest, Names())
    runner = StepRunner(session.store)
    holder = runner.holder(session.store.load(intent).folded) if forget and not force else None
    if holder is not None:
        owner = holder.get("owner") or {}
        raise GitledgerError(
            f"{key} is held by a live owner (pid {owner.get('pid')} on {owner.get('host')}, lease until "
            f"{holder.get('lease_until', 'no deadline')}): forgetting it now would let the next run act "
            "while that command still runs; wait for it to finish, or pass --force if you know it is gone",
            exit_code=EXIT_IN_PROGRESS,
        )
    if done:
        event = runner.event(step, DONE, outcome="resolved", ref=ref, by="resolve")
    else:
        event = runner.event(step, FORGOTTEN, by="resolve")
    session.store.append(intent, event, ANY_VERSION)
    summary: dict[str, Any] = session.store.load(intent).summary()
    return summary


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def pending(session: Session) -> list[Entry]:
    """The entries left attempting (candidates for :func:`reconcile`)."""
    from gitledger.core.events import ATTEMPTING

    return [e for e in session.store.entries() if e.folded.state == ATTEMPTING]


def reconcile(
    session: Session,
    entries: Iterable[Entry],
    progress: Callable[[Iterable[Entry]], Iterator[Entry]] = iter,
) -> list[dict[str, Any]]:
    """Query reality for each attempting entry whose owner is gone and settle what can be settled.

    Found → done (already_existed); absent → failed (retryable); ledger-only → unconfirmed.
    """
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import StepRunner, reconcile_entry, reconcile_specs

    results: list[dict[str, Any]] = []
    runner = StepRunner(session.store)
    for entry in progress(entries):
        intent = session.store.intent(entry.key)
        if intent is None:
            continue
        step = StepKey(intent.task, intent.step, intent.digest, session.config.names)
        specs = reconcile_specs(entry.folded.claim or {}, session.config.step(intent.step).checks or ())
        try:
            outcome, ref = reconcile_entry(runner, step, entry, session.checks(specs))
        except CheckError as exc:  # this entry stays as it was; the others are still settled
            results.append({"key": entry.key, "result": "unknown", "ref": None, "error": exc.message})
            continue
        results.append({"key": entry.key, "result": outcome, "ref": ref})
    return results


__all__ = ["list_entries", "load_entry", "log_events", "pending", "reconcile", "resolve"]
