"""gitledger: crash-safe idempotency for autonomous agents, with the ledger inside the git repository."""

from __future__ import annotations

__version__ = "0.1.0"
