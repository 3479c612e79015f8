"""Checks that query this machine: a file exists, or a user's command decides."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gitledger.core.errors import CheckError, git_message
from gitledger.core.keys import StepKey
from gitledger.local.command import step_env

CMD_TIMEOUT = 300.0


@dataclass
class FileCheck:
    """A file exists (relative paths are taken from the repository's top, or the current directory)."""

    path: str
    base: Path
    queries_reality: bool = True

    @property
    def spec(self) -> str:
        return f"file:{self.path}"

    def find(self, step: StepKey) -> str | None:
        target = Path(os.path.expandvars(self.path.replace("{key}", step.key)))
        if not target.is_absolute():
            target = self.base / target
        try:
            return str(target) if target.exists() else None
        except OSError as exc:  # e.g. a name too long for the system: the check cannot tell
            raise CheckError(f"cannot look for the file: {exc.strerror or exc}") from exc


@dataclass
class CommandCheck:
    """A shell command decides: exit 0 = exists (stdout is the ref), 1 = absent, anything else = error.

    The command gets the step's GITLEDGER_* variables; the key never reaches the shell unquoted.
    """

    command: str
    cwd: Path
    queries_reality: bool = True

    @property
    def spec(self) -> str:
        return f"cmd:{self.command}"

    def find(self, step: StepKey) -> str | None:
        env = dict(os.environ)
        env.update(step_env(step))
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", self.command],
                cwd=self.cwd,
                env=env,
                capture_output=True,
                timeout=CMD_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise CheckError(f"check command did not finish within {CMD_TIMEOUT:.0f} s") from exc
        except OSError as exc:  # e.g. a command longer than the system takes (E2BIG)
            raise CheckError(f"cannot start the check command: {exc.strerror or exc}") from exc
        if proc.returncode == 0:
            return proc.stdout.decode(errors="replace").strip() or self.spec
        if proc.returncode == 1:
            return None
        detail = git_message(proc.stderr) if proc.stderr.strip() else "no message"
        raise CheckError(f"check command exited {proc.returncode} (expected 0 or 1): {detail}")


__all__ = ["CommandCheck", "FileCheck"]
