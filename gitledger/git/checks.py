"""Checks that query git: the key's convention branch, and commits carrying the key's trailer."""

from __future__ import annotations

from dataclasses import dataclass

from gitledger.core.errors import CheckError, GitledgerError, last_line
from gitledger.core.keys import TRAILER_TOKEN, StepKey
from gitledger.git.repo import GitRepo

NETWORK_TIMEOUT = 60.0


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


__all__ = ["BranchCheck", "TrailerCheck"]
