"""The ledger store interface, and an in-memory implementation for fast tests.

A store keeps one :class:`~gitledger.core.events.Entry` per key. Its only write is :meth:`Store.append`,
a compare-and-swap at the level of one key: the event is appended only when the entry's version is
still ``expected`` (the version the caller decided on). A caller that loses re-reads and decides again.
Writes to other keys never make an append fail.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from gitledger.core.events import Entry, Event, encode_event, parse_events
from gitledger.core.keys import StepKey

ANY_VERSION = "*"


@dataclass(frozen=True)
class Intent:
    """What a key stands for; stored once per key."""

    key: str
    task: str
    step: str
    digest: str

    @classmethod
    def of(cls, step_key: StepKey) -> Intent:
        global _last_intent
        last = _last_intent  # one read: the heartbeat thread asks too
        if last[0] is step_key:  # a step asks for its intent to load, claim and record
            return last[1]
        intent = cls(step_key.key, step_key.task, step_key.step, step_key.digest)
        _last_intent = (step_key, intent)
        return intent


_last_intent: tuple[StepKey | None, Intent] = (None, Intent("", "", "", ""))


class Store(Protocol):
    def load(self, key: str | Intent) -> Entry:
        """The entry for ``key`` (an entry with ``version=None`` when there is none)."""
        ...

    def append(self, intent: Intent, event: Event, expected: str | None) -> str | None:
        """Append ``event`` if the entry's version is ``expected`` (or ``expected`` is ANY_VERSION).

        Returns the new version, or None when the entry changed since ``expected`` was read.
        """
        ...

    def entries(self) -> Iterator[Entry]:
        """Every entry, in key order."""
        ...

    def intent(self, key: str) -> Intent | None:
        """The intent recorded for ``key`` (task, step, digest), or None when there is none."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    """A thread-safe in-memory store with the same semantics as the git store."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._intents: dict[str, Intent] = {}
        self._lock = threading.Lock()

    def _entry(self, key: str) -> Entry:
        data = self._data.get(key)
        if data is None:
            return Entry(key, [], None)
        events, bad = parse_events(data)
        return Entry(key, events, hashlib.sha1(data).hexdigest(), bad, location=f"memory:{key}")

    def load(self, key: str | Intent) -> Entry:
        with self._lock:
            return self._entry(key.key if isinstance(key, Intent) else key)

    def append(self, intent: Intent, event: Event, expected: str | None) -> str | None:
        with self._lock:
            current = self._entry(intent.key).version
            if expected != ANY_VERSION and current != expected:
                return None
            self._data[intent.key] = self._data.get(intent.key, b"") + encode_event(event)
            self._intents.setdefault(intent.key, intent)
            return self._entry(intent.key).version

    def entries(self) -> Iterator[Entry]:
        with self._lock:
            keys = sorted(self._data)
        for key in keys:
            yield self.load(key)

    def intent(self, key: str) -> Intent | None:
        with self._lock:
            return self._intents.get(key)

    def corrupt(self, key: str, raw: bytes) -> None:
        """Test helper: append raw bytes to an entry."""
        with self._lock:
            self._data[key] = self._data.get(key, b"") + raw

    def close(self) -> None:
        pass


class SerialStore:
    """A store shared by threads: its calls are serialised (the git store's one ``cat-file`` pipe is not
    thread-safe). Used by the Python API and the MCP proxy's worker threads."""

    def __init__(self, store: Store) -> None:
        self.inner = store
        self._lock = threading.RLock()

    def load(self, key: str | Intent) -> Entry:
        with self._lock:
            return self.inner.load(key)

    def append(self, intent: Intent, event: Event, expected: str | None) -> str | None:
        with self._lock:
            return self.inner.append(intent, event, expected)

    def entries(self) -> Iterator[Entry]:
        with self._lock:
            return iter(list(self.inner.entries()))

    def intent(self, key: str) -> Intent | None:
        with self._lock:
            return self.inner.intent(key)

    def close(self) -> None:
        with self._lock:
            self.inner.close()
