"""Real, visible, countable effects for each check kind, and ways to count them in reality.

Every effect is written so that it cannot happen after gitledger's death: the process that makes it
is gitledger's direct child (``exec``, or a shell builtin), which dies with gitledger
(``PR_SET_PDEATHSIG``). A shell that forked a git and was killed would leave that git running on its own
(the documented limit for grandchildren), and the count would race with the rerun.

Counts come from reality, not from the ledger:

- ``branch``: the convention branch exists (0/1), plus every time the command *started* while the
  branch already existed (the command logs that first) — that would be a duplicate attempt;
- ``trailer``: distinct commits carrying ``Gitledger-Key: <key>`` reachable from any branch (each effect
  puts its commit on a branch of its own, so a second effect would be visible as a second commit);
- ``file``: the checked file exists (0/1: it appears whole, by a hard link of a file written before),
  plus every time the command *started* while it already existed (logged first, as for ``branch``);
- ``cmd``, ``ledger``: lines appended to the key's effect file (one ``echo >>`` per effect).

An effect killed half-way must be no effect to the check as well as to the count: ``echo x >> f``
creates ``f`` before it writes the line, and a kill between the two left an empty file that the
count saw as no effect and a check for the file's existence as one (the racy crash variant then
failed now and then). So ``file`` appears whole and ``cmd``'s check asks for a line (``test -s``);
- ``github-pr``: pull requests on the fake GitHub whose body carries the key's marker;
- ``github-comment``: comments on the issue whose body carries the key's marker.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The command waits for this file before its effect when the test asks for it ($GO), so that a crash
# right after the command started (during-effect) deterministically comes before the effect.
WAIT_FOR_GO = 'while [ ! -e "$GO" ]; do sleep 0.02; done; '

FX = "$FX_DIR"  # a directory outside the repository for effect files

STEP_CONFIG = {
    # reconcile takes cmd: checks from .gitledger.yml only, so the cmd kind's check lives there
    "cmd": ['cmd:test -s "$FX_DIR/cmd/$GITLEDGER_KEY" && echo "cmd/$GITLEDGER_KEY" || exit 1'],
}


@dataclass(frozen=True)
class Kind:
    name: str
    checks: tuple[str, ...]
    effect: str  # sh script run as the guarded command
    queryable: bool = True  # False: only the ledger knows (unconfirmed after a crash)
    github: bool = False
    extra_args: tuple[str, ...] = field(default=())


# a commit with the trailer on a branch of its own, so that two effects would be two commits
TRAILER_EFFECT = " && ".join(
    [
        'c=$(git commit-tree "$(git rev-parse "HEAD^{tree}")" -p HEAD -m work -m "$GITLEDGER_TRAILER")',
        'exec git update-ref "refs/heads/fx/$GITLEDGER_KEY/$$" "$c"',
    ]
)

KINDS: dict[str, Kind] = {
    "ledger": Kind("ledger", ("ledger",), f'echo x >> "{FX}/ledger/$GITLEDGER_KEY"', queryable=False),
    "branch": Kind(
        "branch",
        ("branch",),
        'if git show-ref -q --verify "refs/heads/$GITLEDGER_BRANCH"; then '
        f'echo dup >> "{FX}/branch-dup/$GITLEDGER_KEY"; fi; exec git branch "$GITLEDGER_BRANCH"',
    ),
    "trailer": Kind(
        "trailer",
        ("trailer",),
        TRAILER_EFFECT,
    ),
    "file": Kind(
        "file",
        ("file:out/{key}",),
        'mkdir -p out && if [ -e "out/$GITLEDGER_KEY" ]; then '
        f'echo dup >> "{FX}/file-dup/$GITLEDGER_KEY"; fi; '
        f'echo x > "{FX}/file-tmp/$GITLEDGER_KEY.$$" && '
        f'exec ln "{FX}/file-tmp/$GITLEDGER_KEY.$$" "out/$GITLEDGER_KEY"',
    ),
    "cmd": Kind("cmd", (), f'echo x >> "{FX}/cmd/$GITLEDGER_KEY"'),
    "github-pr": Kind(
        "github-pr",
        ("github-pr",),
        'exec "$PYTHON" -m gitledger github open-pr --title "Agent change" --body "made by an agent"',
        github=True,
    ),
    "github-comment": Kind(
        "github-comment",
        ("github-comment:1",),
        'exec "$PYTHON" -m gitledger github comment 1 --body "agent says hi"',
        github=True,
    ),
}
LOCAL_KINDS = [k for k, v in KINDS.items() if not v.github]


def fx_dirs(fx: Path) -> None:
    for sub in ("ledger", "branch-dup", "cmd", "file-dup", "file-tmp"):
        (fx / sub).mkdir(parents=True, exist_ok=True)


def lines(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


def trailer_commits(repo: Path) -> dict[str, int]:
    """Per key: distinct commits with its trailer reachable from any branch (one git process)."""
    out = subprocess.run(
        ["git", "log", "--branches", "--format=%H%x00%(trailers:key=Gitledger-Key,valueonly,separator=%x01)"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: dict[str, set[str]] = {}
    for line in out.splitlines():
        oid, _, values = line.partition("\0")
        for value in values.split("\x01"):
            if value.strip():
                counts.setdefault(value.strip(), set()).add(oid)
    return {key: len(oids) for key, oids in counts.items()}


def branches(repo: Path) -> set[str]:
    out = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.splitlines())


@dataclass
class Reality:
    """Counts effects for keys of any kind in one repository (and its fake GitHub, if any)."""

    repo: Path
    fx: Path
    github: Any = None  # testing.fakegithub.FakeGitHub

    def count(self, kind: str, key: str, branch: str) -> int:
        return self.counts(kind, [(key, branch)])[key]

    def counts(self, kind: str, keys: list[tuple[str, str]]) -> dict[str, int]:
        """{key: effects} for (key, convention branch) pairs of one kind."""
        if kind == "branch":
            existing = branches(self.repo)
            return {k: (b in existing) + lines(self.fx / "branch-dup" / k) for k, b in keys}
        if kind == "trailer":
            found = trailer_commits(self.repo)
            return {k: found.get(k, 0) for k, _b in keys}
        if kind == "file":
            return {k: (self.repo / "out" / k).exists() + lines(self.fx / "file-dup" / k) for k, _b in keys}
        if kind in ("cmd", "ledger"):
            return {k: lines(self.fx / kind / k) for k, _b in keys}
        if kind == "github-pr":
            pulls = self.github.pulls()
            return {k: sum(f"gitledger:{k} " in (p["body"] or "") for p in pulls) for k, _b in keys}
        if kind == "github-comment":
            comments = self.github.comments(1)
            return {k: sum(f"gitledger:{k} " in (c["body"] or "") for c in comments) for k, _b in keys}
        raise KeyError(kind)


def processes_with(marker: str, session: int = 0) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (e.g. ``CASE=<uuid>``) or that are in
    ``session`` (when not 0). A process in the middle of an ``execve`` (the ``sh`` of an effect
    starting ``mkdir``) can show an empty environment before the new program's is set up; its session
    holds through the ``execve``."""
    needle = marker.encode() + b"\0"
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()  # state, ppid, process group, session, ...
            if fields[0] in (b"Z", b"X"):
                continue
            if session and int(fields[3]) == session:
                pids.append(int(entry))
                continue
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read() + b"\0"
        except OSError:
            continue
        if b"\0" + needle in b"\0" + env:
            pids.append(int(entry))
    return pids


def wait_for_no_process_with(marker: str, session: int = 0, timeout: float = 30.0) -> None:
    """Wait until no process started for this case is left (orphans of a killed run): two scans
    0.1 s apart that find none, by environment and by ``session`` (:func:`processes_with`; the
    environment reads empty for a moment in an ``execve``, the session does not)."""
    deadline = time.monotonic() + timeout
    clean = 0
    while clean < 2:
        if processes_with(marker, session):
            clean = 0
            if time.monotonic() > deadline:
                raise AssertionError(f"still running for {marker}: {processes_with(marker, session)}")
            time.sleep(0.02)
        else:
            clean += 1
            if clean < 2:
                time.sleep(0.1)
