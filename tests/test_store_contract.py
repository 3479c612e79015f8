"""One contract, every store: the in-memory store the core is tested on and the git store users get
answer the same way (load, append with a version check, entries, intents)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitledger.core.events import Event
from gitledger.core.keys import StepKey
from gitledger.core.store import ANY_VERSION, Intent, MemoryStore, SerialStore, Store
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore
from testing.repos import init_repo


@pytest.fixture(params=["memory", "git", "serial-git"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        made: Store = MemoryStore()
    else:
        made = GitStore(GitRepo.discover(init_repo(tmp_path / "repo")))
        if request.param == "serial-git":
            made = SerialStore(made)
    yield made
    made.close()


def intent(step: str) -> Intent:
    return Intent.of(StepKey.derive("T-1", step))


def event(i: Intent, state: str, n: int = 0) -> Event:
    return {"v": 1, "id": f"{n:012x}", "key": i.key, "task": i.task, "step": i.step, "state": state}


def test_a_missing_key_has_no_version_and_no_events(store: Store) -> None:
    entry = store.load(intent("a"))
    assert entry.version is None and entry.events == [] and not entry.exists
    assert store.intent(intent("a").key) is None


def test_append_checks_the_version_and_returns_the_new_one(store: Store) -> None:
    a = intent("a")
    first = store.append(a, event(a, "attempting", 1), None)
    assert first is not None and store.load(a).version == first
    assert store.append(a, event(a, "done", 2), None) is None  # stale: the entry exists now
    second = store.append(a, event(a, "done", 3), first)
    assert second is not None and second != first
    assert [e["id"] for e in store.load(a.key).events] == [f"{1:012x}", f"{3:012x}"]
    assert store.load(a).folded.state == "done"


def test_any_version_appends_whatever_the_entry_is(store: Store) -> None:
    a = intent("a")
    store.append(a, event(a, "attempting", 1), None)
    assert store.append(a, event(a, "done", 2), ANY_VERSION) is not None
    assert len(store.load(a).events) == 2


def test_entries_in_key_order_and_intents_recorded(store: Store) -> None:
    made = [intent(s) for s in ("c", "a", "b")]
    for n, i in enumerate(made):
        store.append(i, event(i, "attempting", n), None)
    assert [e.key for e in store.entries()] == sorted(i.key for i in made)
    for i in made:
        assert store.intent(i.key) == i
