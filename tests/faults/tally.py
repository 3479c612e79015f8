"""The figures of the reliability suite, collected while the tests run.

Tests add to :data:`TALLY`; ``tests/faults/conftest.py`` writes it as JSON at the end of the session
when ``GITLEDGER_RELIABILITY_REPORT=PATH`` is set, and ``tests/faults/report.py`` renders the table.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

REPORT_ENV = "GITLEDGER_RELIABILITY_REPORT"
STRESS_ENV = "GITLEDGER_STRESS"

# What each figure means (the report prints these next to the numbers).
FIGURES: dict[str, str] = {
    "matrix.cases": "crash-matrix cases run (check kind x crash point)",
    "matrix.crashes": "crashes injected in the matrix (process died of SIGKILL)",
    "matrix.effects": "effects counted in reality at the end of the matrix cases",
    "matrix.duplicates": "duplicate effects in the matrix (must be 0)",
    "matrix.events_lost": "ledger events lost in the matrix (must be 0)",
    "matrix.events": "ledger events checked in the matrix (each parsed, each in the audit history)",
    "stress.processes": "stress: concurrent worker processes",
    "stress.keys": "stress: keys",
    "stress.runs": "stress: gitledger run-step processes started",
    "stress.crashes": "stress: runs that died of SIGKILL (GITLEDGER_FAULT or an outside kill)",
    "stress.effects": "stress: effects counted in reality",
    "stress.duplicates": "stress: duplicate effects (must be 0)",
    "stress.events_lost": "stress: ledger events lost (must be 0)",
    "stress.events": "stress: ledger events checked",
    "stress.stale_locks": "stress: stale git lock files left by killed git processes and removed",
    "housekeeping.steps": "housekeeping: steps by 8 writers beside a gc/repack/maintenance/prune loop",
    "housekeeping.rounds": "housekeeping: rounds of the six housekeeping commands run meanwhile",
    "housekeeping.events_lost": "housekeeping: ledger events lost (must be 0)",
    "inputs.bad": "bad inputs tried (hostile names, malformed configs, corrupted ledgers)",
    "inputs.property_examples": "property-test examples run (hypothesis)",
    "inputs.sentinels": "shell-injection sentinels that appeared (must be 0)",
}


class Tally:
    """Thread-safe counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, name: str, amount: int = 1) -> None:
        if name not in FIGURES:
            raise KeyError(f"unknown figure {name!r}; add it to FIGURES")
        with self._lock:
            self.counts[name] += amount

    def set_max(self, name: str, value: int) -> None:
        if name not in MAXIMA:
            raise KeyError(f"{name!r} is not a maximum; add it to MAXIMA")
        with self._lock:
            self.counts[name] = max(self.counts[name], value)


MAXIMA = frozenset({"stress.processes", "stress.keys"})  # figures kept with set_max, not added up

TALLY = Tally()


def full_size() -> bool:
    return os.environ.get(STRESS_ENV, "").strip().lower() == "full"
