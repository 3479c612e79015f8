"""gitledger: crash-safe idempotency for autonomous agents, with the ledger inside the git repository.

The Python API (see docs/python-api.md)::

    import gitledger
    from gitledger import checks

    with gitledger.Ledger.open(".") as ledger:

        @ledger.idempotent(step="notify")
        def notify(task_id: str, channel: str, payload: dict) -> dict: ...

        with ledger.step("T-1", "push", checks=[checks.branch("origin")]) as s:
            if s.should_run:
                ...
                s.done(ref="...")

Names are imported on first use (a module ``__getattr__``), so ``import gitledger`` stays cheap and
never imports typer, PyGithub or PyYAML.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gitledger._version import __version__

_LAZY = {
    "Ledger": "gitledger.api",
    "StepContext": "gitledger.api",
    "key_of": "gitledger.api",
    "StepInProgressError": "gitledger.api",
    "StepUnconfirmedError": "gitledger.api",
    "StepNotFinishedError": "gitledger.api",
    "ResultNotRecordableError": "gitledger.api",
    "PayloadMismatchError": "gitledger.core.protocol",
    "StepResult": "gitledger.core.protocol",
    "GitledgerError": "gitledger.core.errors",
    "UsageError": "gitledger.core.errors",
    "CheckError": "gitledger.core.errors",
    "StepKey": "gitledger.core.keys",
    "MemoryStore": "gitledger.core.store",
}

__all__ = [
    "CheckError",
    "GitledgerError",
    "Ledger",
    "MemoryStore",
    "PayloadMismatchError",
    "ResultNotRecordableError",
    "StepContext",
    "StepInProgressError",
    "StepKey",
    "StepNotFinishedError",
    "StepResult",
    "StepUnconfirmedError",
    "UsageError",
    "__version__",
    "checks",
    "key_of",
]


def __getattr__(name: str) -> Any:
    if name == "checks":
        return importlib.import_module("gitledger.checks")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gitledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from gitledger import checks
    from gitledger.api import (
        Ledger,
        ResultNotRecordableError,
        StepContext,
        StepInProgressError,
        StepNotFinishedError,
        StepUnconfirmedError,
        key_of,
    )
    from gitledger.core.errors import CheckError, GitledgerError, UsageError
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import PayloadMismatchError, StepResult
    from gitledger.core.store import MemoryStore
