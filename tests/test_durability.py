"""``durability``: which writes reach the disk before what (issue 14).

A claim must be on the disk before its action starts: it is the one write the protocol rests on (lost
to a power cut, the retry would not know that an effect may exist). An outcome is written after the
effect, so losing it is the gap the protocol is built for (a claim whose owner is gone: the checks
decide, or the step is unconfirmed); with ``fsync`` (the default) it reaches the disk with the next sync
of the journal (anyone's next claim), a fold, or the exit of its process. ``full`` syncs every event
before its append returns, ``none`` nothing. The order of system calls is read with ``strace``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitledger.config import load as load_config
from gitledger.core.errors import UsageError
from gitledger.git.journal_io import sync_later, sync_left
from testing.repos import gitledger_argv, run_gitledger

needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")

STEPS = """
import os, sys
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult, StepRunner
from gitledger.git.repo import GitRepo
from gitledger.git.store import GitStore

store = GitStore(GitRepo.discover(sys.argv[1]), sys.argv[2])
runner = StepRunner(store)
marker = os.open(os.devnull, os.O_WRONLY)
for i in range(3):
    def act(i=i):
        os.write(marker, b"ACTION")
        return ActionResult(ok=True)
    assert runner.run(StepKey.derive("T-1", f"s{i}"), [LedgerCheck()], act).status == "created"
os.write(marker, b"END")
"""

_CALL = re.compile(r"^\d+\s+(\w+)\((\d+)(?:, \"(.*)\")?")


def traced(argv: list[str], cwd: Path, trace: Path) -> list[str]:
    """Run ``argv`` under strace; its journal writes, journal syncs and markers, in order: ``C`` a claim
    written, ``D`` an outcome written, ``S`` the journal synced, ``A`` the action, ``E`` the end."""
    strace = ["strace", "-f", "-qq", "-e", "signal=none", "-s", "4096", "-o", str(trace)]
    trace_calls = ["-e", "trace=pwrite64,fdatasync,write,execve"]
    proc = subprocess.run(strace + trace_calls + argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    journal_fds: set[str] = set()
    out: list[str] = []
    for line in trace.read_text().splitlines():
        call = _CALL.match(line)
        if call is None:
            if re.search(r'execve\("[^"]*/true", .* = 0$', line):  # the command's own program
                out.append("A")
            continue
        name, fd, text = call.groups()
        if name == "pwrite64" and text and "state" in text:
            journal_fds.add(fd)
            out.append("C" if re.search(r"state\W+attempting", text) else "D")
        elif name == "fdatasync" and fd in journal_fds:
            out.append("S")
        elif name == "write" and text in ("ACTION", "END"):
            out.append(text[0])
    return out


@needs_strace
@pytest.mark.parametrize(
    ("durability", "expected"),
    [
        # the claim before its action; the outcome with the next claim's sync, the last one at exit
        ("fsync", "CSAD" + "CSAD" + "CSAD" + "ES"),
        ("full", "CSADS" * 3 + "E"),
        ("none", "CAD" * 3 + "E"),
    ],
)
def test_what_reaches_the_disk_before_what(
    repo: Path, tmp_path: Path, durability: str, expected: str
) -> None:
    argv = [sys.executable, "-c", STEPS, str(repo), durability]
    assert "".join(traced(argv, repo, tmp_path / "trace")) == expected


@needs_strace
def test_a_run_step_process_syncs_its_outcome_before_it_exits(repo: Path, tmp_path: Path) -> None:
    argv = gitledger_argv("run-step", "--task", "T-1", "--step", "s", "--", "true")
    assert "".join(traced(argv, repo, tmp_path / "trace")) == "CSADS"


def _lose_the_outcome(repo: Path) -> None:
    """What a power cut leaves of an outcome that was written but not synced: the zeros it overwrote."""
    path = repo / ".git" / "gitledger.journal"
    data = path.read_bytes()
    end = data.index(b"\0")
    last = data.rindex(b"\n", 0, end - 1) + 1
    assert b'"state":"done"' in data[last:end]
    with open(path, "r+b") as fh:
        fh.seek(last)
        fh.write(bytes(end - last))
        os.fsync(fh.fileno())


@pytest.mark.parametrize(
    ("check", "status", "code"),
    [("file:made.txt", "already_existed", 0), ("ledger", "unconfirmed", 3)],
)
def test_an_outcome_lost_to_a_power_cut_never_runs_the_action_again(
    repo: Path, check: str, status: str, code: int
) -> None:
    action = ["--", "sh", "-c", "echo x >> made.txt; echo ran >> runs.log"]
    step = ["run-step", "--task", "T-1", "--step", "s", "--check", check, "--json"]
    first = run_gitledger(*step, *action, cwd=repo)
    assert first.returncode == 0, first.stderr
    _lose_the_outcome(repo)

    again = run_gitledger(*step, *action, cwd=repo)
    assert again.returncode == code, again.stderr
    assert f'"status": "{status}"' in again.stdout
    assert (repo / "runs.log").read_text() == "ran\n"


@pytest.mark.parametrize("value", ["fsync", "full", "none"])
def test_durability_settings(repo: Path, value: str) -> None:
    (repo / ".gitledger.yml").write_text(f"durability: {value}\n")
    assert load_config(repo).durability == value


def test_a_durability_that_is_not_one_of_them_is_one_line(repo: Path) -> None:
    (repo / ".gitledger.yml").write_text("durability: always\n")
    with pytest.raises(UsageError, match="durability is 'always'; use one of: fsync, full, none"):
        load_config(repo)


def test_a_sync_left_for_later_that_fails_is_said_not_raised(capfd: pytest.CaptureFixture[str]) -> None:
    """At a close or an exit there is nobody to raise to: the events were written and acted on."""
    read, write = os.pipe()  # fdatasync of a pipe fails (EINVAL)
    try:
        sync_later(write)
        sync_left(write)
        assert "gitledger: syncing the ledger journal failed (" in capfd.readouterr().err
        sync_left(write)  # nothing left for later: nothing done, nothing said
        assert capfd.readouterr().err == ""
    finally:
        os.close(read)
        os.close(write)
