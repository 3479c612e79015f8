"""Owner identity: the host name decides nothing; machine id, boot id and pid namespace together do.

Unit tests on forged owners, then real processes: gitledger runs with injected machine ids (two
"machines" with one host name), and, where ``unshare`` works, inside a real pid + UTS namespace with
the host's own host name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gitledger.core.events import ATTEMPTING
from gitledger.core.owner import Owner, is_dead, machine_id, pid_namespace, process_start
from gitledger.core.protocol import StepRunner, iso
from gitledger.core.store import MemoryStore
from testing.repos import gitledger_argv, run_gitledger

HERE = Owner.current()


def claim_by(owner: Owner | dict[str, object], lease_until: float | None = 2e9) -> dict[str, object]:
    data = owner.to_json() if isinstance(owner, Owner) else owner
    event: dict[str, object] = {"id": "c1", "state": ATTEMPTING, "owner": data, "at": iso(0)}
    if lease_until is not None:
        event["lease_until"] = iso(lease_until)
    return event


def exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_this_machine_has_a_full_identity() -> None:
    assert HERE.machine and HERE.boot and HERE.pidns.startswith("pid:[")
    assert len(HERE.machine) == 32 and HERE.machine not in Path("/etc/machine-id").read_text()
    assert HERE.same_machine(replace(HERE, pid=1, session="other"))


@pytest.mark.parametrize("field", ["machine", "boot", "pidns"])
def test_one_differing_field_makes_another_machine(field: str) -> None:
    dead = replace(HERE, pid=exited_pid(), start="0", session="gone", **{field: "something-else"})
    assert not HERE.same_machine(dead) and not is_dead(dead, HERE)
    runner = StepRunner(MemoryStore(), owner=HERE)
    assert runner.held(claim_by(dead))  # the lease decides: still valid
    assert not runner.held(claim_by(dead, lease_until=time.time() - 1))


def test_same_host_name_dead_pid_but_another_machine_is_held_by_its_lease() -> None:
    """The duplicate of issue 16.1: same host name, a pid that does not exist here."""
    twin = replace(HERE, machine="f" * 32, pid=exited_pid(), start="0", session="twin")
    assert twin.host == HERE.host
    assert StepRunner(MemoryStore(), owner=HERE).held(claim_by(twin))


def test_old_events_without_identity_fields_count_as_another_machine() -> None:
    old = {"host": HERE.host, "boot": HERE.boot, "pid": exited_pid(), "start": "0", "session": "old"}
    runner = StepRunner(MemoryStore(), owner=HERE)
    assert runner.held(claim_by(old))
    assert not runner.held(claim_by(old, lease_until=time.time() - 1))


def test_pid_reuse_on_this_machine_is_seen_at_once() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = process_start(proc.pid)
        assert start
        runner = StepRunner(MemoryStore(), owner=HERE)
        live = replace(HERE, pid=proc.pid, start=start, session="live")
        reused = replace(HERE, pid=proc.pid, start=str(int(start) - 1), session="earlier")
        assert runner.held(claim_by(live, lease_until=None))
        assert not runner.held(claim_by(reused, lease_until=None))  # the pid now belongs to someone else
    finally:
        proc.kill()
        proc.wait()


def test_machine_id_override_is_hashed_and_cannot_join_another_boot() -> None:
    code = "from gitledger.core.owner import Owner; o = Owner.current(); print(o.machine, o.boot, o.pidns)"
    env = {**os.environ, "GITLEDGER_MACHINE_ID": "twin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    machine, boot, pidns = out.stdout.split()
    assert machine != machine_id() and machine != "twin" and len(machine) == 32
    assert (boot, pidns) == (HERE.boot, pid_namespace())


# -- real processes -----------------------------------------------------------------------------------


def _start(repo: Path, counter: Path, machine: str, seconds: float, *extra: str) -> subprocess.Popen[str]:
    # exec: the command is the sleep itself, so it dies with its gitledger (no grandchild outlives it)
    script = f"exec sleep {seconds}" if seconds >= 30 else f'sleep {seconds}; echo x >> "{counter}"'
    return subprocess.Popen(
        gitledger_argv("run-step", "-t", "T-1", "-s", "deploy", *extra, "--json", "--", "sh", "-c", script),
        cwd=repo,
        env={**os.environ, "GITLEDGER_MACHINE_ID": machine},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_claim(repo: Path, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        proc = run_gitledger("list", "--json", cwd=repo)
        if '"attempting"' in proc.stdout:
            return
        time.sleep(0.05)
    raise AssertionError("the first run never claimed the step")


def test_two_machines_with_one_host_name_do_not_duplicate(repo: Path, tmp_path: Path) -> None:
    """Machine A dies mid-command (SIGKILL); machine B (same host name) must wait for A's lease, while A
    itself (same machine id, boot and pid namespace) sees at once that its earlier run is gone."""
    counter = tmp_path / "effects"
    first = _start(repo, counter, "machine-a", 30, "--lease", "900", "-c", f"file:{counter}")
    try:
        _wait_for_claim(repo)
    finally:
        first.kill()
        first.wait()
    time.sleep(0.2)  # the command died with its owner (PR_SET_PDEATHSIG)
    other = run_gitledger(
        "run-step", "-t", "T-1", "-s", "deploy", "-c", f"file:{counter}", "--json", "--", "sh", "-c",
        f'echo x >> "{counter}"', cwd=repo, env={"GITLEDGER_MACHINE_ID": "machine-b"},
    )  # fmt: skip
    assert other.returncode == 75, other.stdout + other.stderr
    assert '"in_progress"' in other.stdout
    same = run_gitledger(
        "run-step", "-t", "T-1", "-s", "deploy", "-c", f"file:{counter}", "--json", "--", "sh", "-c",
        f'echo x >> "{counter}"', cwd=repo, env={"GITLEDGER_MACHINE_ID": "machine-a"},
    )  # fmt: skip
    assert same.returncode == 0 and '"created"' in same.stdout, same.stdout + same.stderr
    assert counter.read_text() == "x\n"


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    probe = subprocess.run(
        ["unshare", "--pid", "--uts", "--fork", "--mount-proc", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs unshare with pid, uts and mount namespaces (root)")
def test_a_real_pid_namespace_with_our_host_name_is_another_machine(repo: Path, tmp_path: Path) -> None:
    """A container sharing our kernel, /etc/machine-id and host name but not our pids (``--uts=host``-like
    containers with their own pid namespace): its claims are held by their lease, never judged by pids."""
    counter = tmp_path / "effects"
    host = os.uname().nodename
    inner = gitledger_argv(
        "run-step", "-t", "T-1", "-s", "deploy", "--lease", "900", "--json", "--", "sh", "-c",
        f'sleep 30; echo x >> "{counter}"',
    )  # fmt: skip
    script = 'hostname "$1"; shift; exec "$@"'
    first = subprocess.Popen(
        [
            "unshare",
            "--pid",
            "--uts",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "sh",
            "-c",
            script,
            "sh",
            host,
            *inner,
        ],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_claim(repo)
        owner = _claim_owner(repo)
        assert owner["host"] == host and owner["pidns"] != pid_namespace()
        assert (owner["machine"], owner["boot"]) == (HERE.machine, HERE.boot)
        second = run_gitledger(
            "run-step", "-t", "T-1", "-s", "deploy", "--json", "--", "sh", "-c", f'echo x >> "{counter}"',
            cwd=repo,
        )  # fmt: skip
        assert second.returncode == 75, second.stdout + second.stderr
    finally:
        first.kill()
        first.wait()
    assert not counter.exists()


def _claim_owner(repo: Path) -> dict[str, str]:
    entries = json.loads(run_gitledger("list", "--json", cwd=repo).stdout)
    shown = json.loads(run_gitledger("show", entries[0]["key"], "--json", cwd=repo).stdout)
    events = shown["events"] if isinstance(shown, dict) else shown
    owner: dict[str, str] = next(e["owner"] for e in events if e["state"] == ATTEMPTING)
    return owner
