"""The one exception family of gitledger.

Every error a user can cause or meet carries a message written for that user (what was wrong, what to
do) and the exit code the CLI returns for it. The CLI prints ``gitledger: <message>`` on one line of
stderr and exits with ``exit_code``.

Exit codes (the CLI contract):

====  ==========================================================
 0    created, skipped, already_existed
 1    an error of gitledger itself or of its environment
 2    usage or configuration error (bad flag, bad YAML, bad spec)
 3    unconfirmed: a ledger-only step was left attempting
 70   internal error: a bug in gitledger (one line; GITLEDGER_DEBUG=1 shows the traceback)
 75   in_progress: another live owner holds the step
 N    the guarded command's own non-zero exit code
====  ==========================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNCONFIRMED = 3
EXIT_INTERNAL = 70  # sysexits' EX_SOFTWARE
EXIT_IN_PROGRESS = 75


class GitledgerError(Exception):
    """Base of every error gitledger raises on purpose."""

    exit_code: int = EXIT_ERROR

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(GitledgerError):
    """Bad arguments: wrong flag combination, invalid task or step name, unknown check spec."""

    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    """A ``.gitledger.yml`` that cannot be used."""


class GitError(GitledgerError):
    """git failed or the path is not a usable repository."""


class DamagedObjectError(GitError):
    """git has the object but cannot read all of it (a torn or overwritten object file)."""


class CorruptLedgerError(GitledgerError):
    """One ledger entry cannot be parsed; other entries stay readable."""


class CheckError(GitledgerError):
    """An existence check could not query reality (network down, bad token, command error).

    The step must not act when this is raised: not knowing is not the same as absent.
    """


class ConflictError(GitledgerError):
    """A compare-and-swap kept losing against concurrent writers."""


def last_line(stderr: bytes) -> str:
    """The last non-blank line a process wrote to stderr, without git's ``fatal:``/``error:`` prefix."""
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ").removeprefix("error: ") if lines else "no message"
