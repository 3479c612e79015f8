"""Public face of :mod:`gitledger.core.errors` (the exception family and the exit-code table).

Users import ``gitledger.errors``; the definitions live in the core. Nothing inside gitledger imports
this module.
"""

from gitledger.core.errors import (
    EXIT_ERROR,
    EXIT_IN_PROGRESS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_UNCONFIRMED,
    EXIT_USAGE,
    CheckError,
    ConfigError,
    ConflictError,
    CorruptLedgerError,
    DamagedObjectError,
    GitError,
    GitledgerError,
    UsageError,
)

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_IN_PROGRESS",
    "EXIT_OK",
    "EXIT_UNCONFIRMED",
    "EXIT_USAGE",
    "CheckError",
    "ConfigError",
    "ConflictError",
    "CorruptLedgerError",
    "DamagedObjectError",
    "GitError",
    "GitledgerError",
    "UsageError",
]
