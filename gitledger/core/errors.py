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
 129  interrupted by SIGHUP; 130 by SIGINT (Ctrl-C); 143 by SIGTERM (128 + the signal)
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


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP reached the CLI outside the guarded command's run.

    A ``BaseException`` like KeyboardInterrupt (no ``except Exception`` swallows it), but its own class:
    the CLI framework turns KeyboardInterrupt into a silent exit 130, and this one must reach
    :func:`gitledger.cli.main` to be reported in one line with the right exit code.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def disk_full(exc: BaseException) -> str | None:
    """What a full disk (``ENOSPC``, ``EDQUOT``) made fail, in words (``"No space left on device: PATH"``);
    None for any other error. Nothing is half-written by it: a journal record is whole or never
    confirmed, a fold's pack is renamed into place only once written."""
    import errno

    if not isinstance(exc, OSError) or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    return f"{exc.strerror}: {exc.filename}" if exc.filename else str(exc.strerror)


def git_message(stderr: bytes) -> str:
    """git's whole relevant message on one line: every ``fatal:``/``error:`` line (without the prefix),
    joined with "; " (git often gives the cause first and a generic line last); without such lines, the
    last non-blank line. Bounded, so a flood of errors stays one readable line."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    relevant = [line.split(":", 1)[1].strip() for line in lines if line.startswith(("fatal:", "error:"))]
    text = "; ".join(dict.fromkeys(relevant)) if relevant else (lines[-1] if lines else "no message")
    return text if len(text) <= 2000 else text[:1997] + "..."


def cannot_open(path: object, stderr: bytes) -> GitledgerError:
    """The error for git refusing to open the repository at ``path``: not a repository, or another
    user's (``safe.directory``), are usage errors that say what to do; anything else is git's message."""
    if b"not a git repository" in stderr:
        return UsageError(f"{path} is not inside a git repository; run 'git init' there or pass --repo PATH")
    if b"dubious ownership" in stderr:
        lines = stderr.decode(errors="replace").splitlines()
        fix = next((line.strip() for line in lines if "git config" in line), "see 'git help config'")
        return UsageError(
            f"git refuses to open {path}: the repository belongs to another user (safe.directory); "
            f"to trust it: {fix}"
        )
    return GitError(f"git cannot open {path}: {git_message(stderr)}")
