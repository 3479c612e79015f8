"""Public face of the check factories (``gitledger.checks.branch()``, ``.github_pr()``, ...).

The definitions live in :mod:`gitledger.core.checks`; a :class:`~gitledger.api.Ledger` binds the
specs they return to its repository. Nothing inside gitledger imports this module.
"""

from gitledger.core.checks import (
    CallableCheck,
    Check,
    CheckSpec,
    LedgerCheck,
    branch,
    command,
    file,
    github_branch,
    github_comment,
    github_pr,
    ledger,
    trailer,
)

__all__ = [
    "CallableCheck",
    "Check",
    "CheckSpec",
    "LedgerCheck",
    "branch",
    "command",
    "file",
    "github_branch",
    "github_comment",
    "github_pr",
    "ledger",
    "trailer",
]
