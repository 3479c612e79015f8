"""Build large ledgers fast, without running the protocol N times, and check they read back.

- gitledger: the store's own object writer puts every intent blob and note blob, their trees and one
  commit on each ledger ref into one pack, at exactly the paths :class:`~gitledger.git.store.GitStore`
  writes (notes at ``ab/cd/<rest of the intent oid>``, intents at ``ab/cd/<rest of the key digest>``),
  so the store reads it as if the entries had been recorded one by one and folded (the tip's objects as
  a fold packs them, which ``git gc`` keeps as they are; older versions, which a fold leaves and gc
  deltifies, are not there).
- JSON file and SQLite: one bulk write each.

Every entry holds the two events a real ``created`` step leaves: ``attempting`` then ``done``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import git
from gitledger.core.events import ATTEMPTING, DONE, Event, encode_event
from gitledger.core.keys import StepKey, key_digest
from gitledger.core.owner import Owner
from gitledger.core.protocol import StepRunner, iso
from gitledger.core.store import Intent, MemoryStore, Store
from gitledger.git.repo import GitRepo
from gitledger.git.store import INTENTS_REF, NOTES_REF, GitStore, fanout, intent_bytes

BUILD_OWNER = Owner("bench-host", "bench-boot", 4242, "1", "0123456789abcdef")


def make_steps(n: int, prefix: str = "entry") -> list[StepKey]:
    """``n`` distinct step keys (the existing entries of a ledger of size ``n``)."""
    return [StepKey.derive(f"{prefix}-{i}", "step") for i in range(n)]


def entry_events(step: StepKey, at: float = 1_790_000_000.0) -> list[Event]:
    """The events of a step that was claimed and then done (``created``), as the protocol writes."""
    runner = StepRunner(MemoryStore(), BUILD_OWNER, clock=lambda: at)
    claim = runner.event(step, ATTEMPTING, lease_until=iso(at + 900), checks=["ledger"])
    done = runner.event(step, DONE, outcome="created")
    return [claim, done]


def build_git(repo_path: Path, steps: list[StepKey]) -> None:
    """Write a ledger of ``steps`` (all done) into a repository whose ledger refs do not exist yet.

    The objects go through the store's own writer, as one fold of every entry would write them: one
    pack (blobs deflated, trees stored), fan-out levels spliced, one commit on each ledger ref."""
    with GitRepo.discover(repo_path) as repo:
        if repo.read(NOTES_REF) is not None or repo.read(INTENTS_REF) is not None:
            raise RuntimeError(f"{repo_path} already has a ledger; build into a fresh repository")
        store = GitStore(repo, "none")
        intents: dict[tuple[str, ...], str] = {}
        notes: dict[tuple[str, ...], str] = {}
        for step in steps:
            intent_oid = store.write_object("blob", intent_bytes(Intent.of(step)))
            intents[tuple(fanout(key_digest(step.key)))] = intent_oid
            note = b"".join(encode_event(e) for e in entry_events(step))
            notes[tuple(fanout(intent_oid))] = store.write_object("blob", note)
        updates: list[tuple[str, str, str | None]] = []
        for ref, changes, message in (
            (INTENTS_REF, intents, f"gitledger: intent bulk import of {len(steps)} entries"),
            (NOTES_REF, notes, f"gitledger: done bulk import of {len(steps)} entries"),
        ):
            if changes:
                updates.append((ref, store.commit(store.trees.put_many(None, changes), [], message), None))
        with repo.lock():
            if not store.move_refs(updates):
                raise RuntimeError(f"{repo_path}: a ledger ref appeared while the ledger was built")
        store.close()


def git_ledger_count(repo_path: Path) -> dict[str, int]:
    """Entries under each ledger ref, counted by git itself (after folding the journal into them)."""
    with GitRepo.discover(repo_path) as repo:
        GitStore(repo).flush()
    counts = {}
    for name, ref in (("notes", NOTES_REF), ("intents", INTENTS_REF)):
        listing = git("ls-tree", "-r", "--name-only", ref, cwd=repo_path)
        counts[name] = len(listing.splitlines()) if listing else 0
    return counts


def build_items(steps: list[StepKey]) -> Iterator[tuple[Intent, list[Event]]]:
    for step in steps:
        yield Intent.of(step), entry_events(step)


def verify_sample(store: Store, steps: list[StepKey], sample: int, seed: int = 7) -> dict[str, Any]:
    """Load ``sample`` random keys through the store's own ``load``; each must be done (created)."""
    rng = random.Random(seed)
    chosen = rng.sample(steps, min(sample, len(steps)))
    bad = []
    for step in chosen:
        folded = store.load(Intent.of(step)).folded
        if folded.state != DONE or folded.done is None or folded.done.get("outcome") != "created":
            bad.append(step.key)
    if bad:
        raise RuntimeError(f"built ledger does not read back: {len(bad)} keys wrong, e.g. {bad[0]}")
    return {"sampled": len(chosen), "ok": True}


def verify_git(repo_path: Path, steps: list[StepKey], sample: int) -> dict[str, Any]:
    counts = git_ledger_count(repo_path)
    if counts != {"notes": len(steps), "intents": len(steps)}:
        raise RuntimeError(f"built ledger has {counts}, expected {len(steps)} of each")
    with GitRepo.discover(repo_path) as repo:
        result = verify_sample(GitStore(repo), steps, sample)
    return {**result, "count": counts["notes"]}
