"""Lease renewal: a step that runs longer than its lease keeps its claim against other machines.

"Another machine" is a process with another machine id (``GITLEDGER_MACHINE_ID``): it can only judge
the claim by its lease, exactly as a second host sharing the repository (or its remote) would.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from gitledger.api import Ledger
from gitledger.core.checks import CallableCheck
from gitledger.core.events import ATTEMPTING, INFO, fold
from gitledger.core.keys import Content, StepKey
from gitledger.core.owner import Owner
from gitledger.core.policy import StepPolicy
from gitledger.core.protocol import ActionResult, Claim, StepRunner, iso
from gitledger.core.store import ANY_VERSION, Intent, MemoryStore
from testing.repos import git, gitledger_argv, init_repo, run_gitledger

LEASE = 2.0
RUNS_FOR = 3 * LEASE
STEP = StepKey.derive("T-1", "deploy", Content.empty())


def other_machine(repo: Path, effect: Path, remote: bool = False) -> subprocess.CompletedProcess[str]:
    extra = ["--remote", "origin"] if remote else []
    return run_gitledger(
        "run-step", "-t", "T-1", "-s", "deploy", "-c", f"file:{effect}", *extra, "--json", "--",
        "sh", "-c", f'echo x >> "{effect}"',
        cwd=repo, env={"GITLEDGER_MACHINE_ID": "machine-b"},
    )  # fmt: skip


def long_step(repo: Path, effect: Path, remote: bool = False) -> subprocess.Popen[str]:
    extra = ["--remote", "origin"] if remote else []
    started = effect.with_name("started")
    return subprocess.Popen(
        gitledger_argv(
            "run-step", "-t", "T-1", "-s", "deploy", "-c", f"file:{effect}", "--lease", str(LEASE), *extra,
            "--json", "--", "sh", "-c", f'echo up > "{started}"; sleep {RUNS_FOR}; echo x >> "{effect}"',
        ),
        cwd=repo, env={**os.environ, "GITLEDGER_MACHINE_ID": "machine-a"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_started(first: subprocess.Popen[str], effect: Path) -> None:
    """Until the long step's command runs (in remote mode: once the remote accepted its claim)."""
    started = effect.with_name("started")
    end = time.monotonic() + 60
    while not started.exists() and first.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    assert started.exists(), first.communicate()


def contend(first: subprocess.Popen[str], repo: Path, effect: Path, remote: bool = False) -> list[str]:
    """Try the step from the other machine once a second until the first run ends (bounded)."""
    statuses = []
    end = time.monotonic() + RUNS_FOR + 60
    while first.poll() is None and time.monotonic() < end:
        tried = time.monotonic()
        proc = other_machine(repo, effect, remote)
        statuses.append(json.loads(proc.stdout)["status"] if proc.stdout.strip() else proc.stderr)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tried)))
    return statuses


def test_a_step_running_three_leases_is_not_taken_over(repo: Path, tmp_path: Path) -> None:
    effect = tmp_path / "effect"
    first = long_step(repo, effect)
    wait_started(first, effect)
    statuses = contend(first, repo, effect)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0 and json.loads(out)["status"] == "created", err
    assert effect.read_text() == "x\n"  # one effect
    assert set(statuses) <= {"in_progress", "already_existed", "skipped"}, statuses  # never "created"
    assert statuses.count("in_progress") >= RUNS_FOR - 2, statuses
    log = json.loads(run_gitledger("log", "--json", cwd=repo).stdout)
    beats = [e for e in log if e.get("renews")]
    assert len(beats) >= 2 * RUNS_FOR / LEASE, log  # a heartbeat every third of the lease


def test_remote_claims_publish_the_heartbeats(tmp_path: Path) -> None:
    remote = init_repo(tmp_path / "remote.git", bare=True)
    seed = init_repo(tmp_path / "seed")
    git("remote", "add", "origin", str(remote), cwd=seed)
    git("push", "-q", "origin", "main", cwd=seed)
    a, b = tmp_path / "a", tmp_path / "b"
    git("clone", "-q", str(remote), str(a), cwd=tmp_path)
    git("clone", "-q", str(remote), str(b), cwd=tmp_path)
    effect = tmp_path / "effect"
    first = long_step(a, effect, remote=True)
    wait_started(first, effect)
    statuses = contend(first, b, effect, remote=True)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0 and json.loads(out)["status"] == "created", err
    assert effect.read_text() == "x\n"
    assert set(statuses) <= {"in_progress", "already_existed", "skipped"}, statuses  # never "created"
    assert statuses.count("in_progress") >= RUNS_FOR - 2, statuses


# -- the protocol ----------------------------------------------------------------------------------------


def test_heartbeats_extend_the_lease_and_stop_when_another_owner_takes_over() -> None:
    store = MemoryStore()
    runner = StepRunner(store)
    started = runner.start(STEP, [CallableCheck(lambda step: None, spec="fake")], StepPolicy(lease=0.3))
    assert isinstance(started, Claim) and started.renewal is not None
    first_until = store.load(STEP.key).folded.claims[0]["lease_until"]
    time.sleep(0.45)
    folded = store.load(STEP.key).folded
    assert folded.claims[0]["lease_until"] > first_until and folded.claims[0]["renewed"]
    other = Owner("elsewhere", "b", 1, "1", "intruder", "m", "p").to_json()
    takeover = {
        "id": "intruder",
        "state": ATTEMPTING,
        "owner": other,
        "at": iso(time.time()),
        "lease_until": iso(time.time() + 60),
        "supersedes": [started.claim_id],
    }
    assert store.append(Intent.of(STEP), takeover, ANY_VERSION) is not None
    time.sleep(0.35)
    assert started.renewal.lost
    beats = sum(1 for e in store.load(STEP.key).events if e["state"] == INFO)
    time.sleep(0.25)
    assert sum(1 for e in store.load(STEP.key).events if e["state"] == INFO) == beats  # stopped
    result = runner.finish(started, ActionResult(ok=True, ref="r"))
    assert any("closed by another owner" in w for w in result.extra["warnings"])


def test_only_the_claims_own_session_renews_it() -> None:
    mine = Owner("h", "b", 1, "1", "mine", "m", "p").to_json()
    theirs = Owner("h", "b", 2, "1", "theirs", "m", "p").to_json()
    claim = {"id": "c", "state": ATTEMPTING, "owner": mine, "at": iso(0), "lease_until": iso(10)}
    forged = {"id": "f", "state": INFO, "owner": theirs, "renews": "c", "lease_until": iso(2e9)}
    real = {"id": "r", "state": INFO, "owner": mine, "renews": "c", "lease_until": iso(20)}
    assert fold([claim, forged]).claims[0]["lease_until"] == iso(10)
    assert fold([claim, forged, real]).claims[0]["lease_until"] == iso(20)
    older = {**real, "id": "o", "lease_until": iso(5)}
    assert fold([claim, older]).claims[0]["lease_until"] == iso(10)  # never shorter


def test_python_api_claims_renew_too(repo: Path, tmp_path: Path) -> None:
    effect = tmp_path / "effect"
    with Ledger.open(repo) as ledger:
        assert ledger.key("T-1", "deploy").key == STEP.key
        with ledger.step("T-1", "deploy", checks=[f"file:{effect}"], lease=1.0) as step:
            assert step.should_run
            seen = []
            for _ in range(3):  # three leases long, tried from the other machine each second
                time.sleep(1.0)
                seen.append(json.loads(other_machine(repo, effect).stdout)["status"])
            effect.write_text("x\n")
            step.done(ref=str(effect))
    assert seen == ["in_progress"] * 3
    assert effect.read_text() == "x\n"


def test_one_heartbeat_thread_serves_every_claim_of_a_process() -> None:
    import threading

    from gitledger.core.renewal import Renewal

    beats = dict.fromkeys(range(5), 0)

    def renew_for(i: int) -> Callable[[], str | None]:
        def renew() -> str | None:
            beats[i] += 1
            return None

        return renew

    renewals = [Renewal(renew_for(i), 0.05) for i in range(5)]
    for r in renewals:
        r.start()
    time.sleep(0.5)
    assert [t.name for t in threading.enumerate()].count("gitledger-renew") == 1
    for r in renewals:
        assert r.stop() == []
    assert all(n >= 2 for n in beats.values()), beats
    after = dict(beats)
    time.sleep(0.2)
    assert beats == after  # stopped: no more beats

    pid = os.fork()
    if pid == 0:  # a forked child renews on a thread of its own, and never the parent's claims
        child = {"n": 0}
        r = Renewal(lambda: child.__setitem__("n", child["n"] + 1), 0.05)
        r.start()
        time.sleep(0.4)
        r.stop()
        os._exit(0 if child["n"] >= 2 and beats == after else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_short_steps_do_not_wake_the_heartbeat_thread() -> None:
    """A claim that ends before its first beat is due costs its process no thread switch: the thread
    is woken only for a beat due before it wakes anyway, and stopped claims do not pile up."""
    from gitledger.core.renewal import _HEARTBEATS, Renewal

    first = Renewal(lambda: None, 300.0)
    first.start()  # the thread now waits for this beat, 300 s away
    time.sleep(0.05)
    before = _HEARTBEATS.wakeups
    for _ in range(1000):  # a loop of short steps, each claim with a 900-s lease
        r = Renewal(lambda: None, 300.0)
        r.start()
        assert r.stop() == []
    assert _HEARTBEATS.wakeups - before <= 2
    assert len(_HEARTBEATS._due) <= 130  # the stopped ones were dropped from the queue

    first.stop()
    brief = Renewal(lambda: None, 0.05)
    brief.start()
    brief.stop()
    time.sleep(0.2)  # the thread wakes for the stopped brief claim: only stopped claims are queued now
    before = _HEARTBEATS.wakeups
    for _ in range(200):  # steps one after another, the thread free to run between them
        r = Renewal(lambda: None, 300.0)
        r.start()
        assert r.stop() == []
        time.sleep(0.0005)
    assert _HEARTBEATS.wakeups - before <= 3

    first = Renewal(lambda: None, 300.0)
    first.start()
    beats = {"n": 0}
    soon = Renewal(lambda: beats.__setitem__("n", beats["n"] + 1), 0.05)
    soon.start()  # due long before the thread would wake: it is woken for it
    deadline = time.monotonic() + 5
    while beats["n"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    soon.stop()
    first.stop()
    assert beats["n"] >= 2
