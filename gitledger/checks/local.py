"""Checks that query local reality: git refs and history, files, and user commands."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gitledger.errors import CheckError, GitledgerError
from gitledger.git import GitRepo, git_env, last_line
from gitledger.keys import TRAILER_TOKEN, StepKey

CMD_TIMEOUT = 300.0
NETWORK_TIMEOUT = 60.0


def step_env(step: StepKey) -> dict[str, str]:
    """The GITLEDGER_* variables describing a step, for commands and check commands."""
    return {
        "GITLEDGER_KEY": step.key,
        "GITLEDGER_TASK": step.task,
        "GITLEDGER_STEP": step.step,
        "GITLEDGER_DIGEST": step.digest,
        "GITLEDGER_BRANCH": step.branch,
        "GITLEDGER_LABEL": step.label,
        "GITLEDGER_TRAILER": step.trailer,
        "GITLEDGER_MARKER": step.marker,
    }


@dataclass
class BranchCheck:
    """The key's convention branch exists locally, as a remote-tracking branch, or on REMOTE."""

    repo: GitRepo
    remote: str | None = None
    queries_reality: bool = True

    @property
    def spec(self) -> str:
        return f"branch:{self.remote}" if self.remote else "branch"

    def find(self, step: StepKey) -> str | None:
        branch = step.branch
        refs = [f"refs/heads/{branch}"]
        listed = self.repo.out(
            "for-each-ref", "--format=%(refname) %(objectname)", f"refs/remotes/*/{branch}", check=False
        )
        local = self.repo.resolve(refs[0])
        if local:
            return f"{refs[0]}@{local}"
        for line in listed.splitlines():
            name, _, oid = line.partition(" ")
            if name.endswith("/" + branch):
                return f"{name}@{oid}"
        if self.remote:
            try:
                proc = self.repo.run(
                    "ls-remote", "--heads", "--", self.remote, refs[0], timeout=NETWORK_TIMEOUT
                )
            except GitledgerError as exc:
                raise CheckError(f"cannot list branches of remote {self.remote!r}: {exc}") from exc
            for line in proc.stdout.decode().splitlines():
                oid, _, name = line.partition("\t")
                if name == refs[0]:
                    return f"{self.remote}:{name}@{oid}"
        return None


@dataclass
class TrailerCheck:
    """A commit reachable from HEAD or any local or remote-tracking branch carries the key's trailer."""

    repo: GitRepo
    spec: str = "trailer"
    queries_reality: bool = True

    def find(self, step: StepKey) -> str | None:
        proc = self.repo.run(
            "log",
            "--branches",
            "--remotes",
            *(["HEAD"] if self.repo.resolve("HEAD") else []),
            "--fixed-strings",
            f"--grep={step.trailer}",
            f"--format=%H%x00%(trailers:key={TRAILER_TOKEN},valueonly,separator=%x01)",
            check=False,
        )
        if proc.returncode != 0:
            if not self.repo.resolve("HEAD") and not self.repo.out("for-each-ref", "--count=1"):
                return None  # no commits at all: nothing can carry the trailer
            raise CheckError(f"git log failed: {last_line(proc.stderr)}")
        for line in proc.stdout.decode(errors="replace").splitlines():
            oid, _, values = line.partition("\0")
            if step.key in (v.strip() for v in values.split("\x01")):
                return oid
        return None


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
        return str(target) if target.exists() else None


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
        if proc.returncode == 0:
            return proc.stdout.decode(errors="replace").strip() or self.spec
        if proc.returncode == 1:
            return None
        detail = last_line(proc.stderr) if proc.stderr.strip() else "no message"
        raise CheckError(f"check command exited {proc.returncode} (expected 0 or 1): {detail}")


__all__ = ["BranchCheck", "CommandCheck", "FileCheck", "TrailerCheck", "git_env", "step_env"]
