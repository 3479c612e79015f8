"""Interrupts and orphans with real signals, real process groups and a real terminal (a pty).

- Ctrl-C typed on a terminal reaches the command once (it is in the foreground group with gitledger),
  never gitledger's git helpers (their own groups); gitledger waits for the command, records the claim
  as interrupted, prints one line and exits 130.
- SIGTERM / SIGHUP sent to gitledger alone are forwarded to the command (143 / 129).
- ``timeout -s INT`` (signals gitledger and its group) is not delivered twice.
- A gitledger killed between fork and the death signal leaves no command running; a grandchild that
  outlives a killed gitledger keeps the claim held until it ends.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import termios
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from testing.repos import gitledger_argv, run_gitledger

# The command: note each signal it gets, keep running 0.5 s after the first (time for a repeated one to
# arrive), then exit with $EXIT (7 by default: "failed after an interrupt").
TRAPPING = r"""
n=0
for s in INT TERM HUP; do trap "echo $s >> \"$LOG\"; n=\$((n+1))" $s; done
echo started >> "$LOG"
while [ "$n" -lt 1 ]; do sleep 0.05; done
sleep 0.5
exit "${EXIT:-7}"
"""


def step_argv(*extra: str, script: str = TRAPPING) -> list[str]:
    return gitledger_argv("run-step", "-t", "T-1", "-s", "deploy", *extra, "--json", "--", "sh", "-c", script)


def wait_for(path: Path, text: str, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never appeared in {path}")


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def entry(repo: Path) -> dict[str, object]:
    listed = json.loads(run_gitledger("list", "--json", cwd=repo).stdout)
    assert len(listed) == 1, listed
    result: dict[str, object] = listed[0]
    return result


def events(repo: Path, key: str) -> list[dict[str, object]]:
    shown = json.loads(run_gitledger("show", key, "--json", cwd=repo).stdout)
    found: list[dict[str, object]] = shown["events"] if isinstance(shown, dict) else shown
    return found


def start(argv: Sequence[str], repo: Path, env: dict[str, str], **kwargs: Any) -> subprocess.Popen[Any]:
    """gitledger started as from a terminal or an agent: SIGHUP at its default even when the suite runs
    under ``nohup`` (gitledger rightly leaves an ignored SIGHUP ignored, and so would its command)."""
    setup = kwargs.pop("preexec_fn", None)

    def child_setup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if setup is not None:
            setup()

    return subprocess.Popen(list(argv), cwd=repo, env={**os.environ, **env}, preexec_fn=child_setup, **kwargs)


def _controlling_tty() -> None:  # runs in the child: the pty (stdin) becomes its controlling terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_ctrl_c_on_a_terminal_is_recorded_as_interrupted(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    master, slave = os.openpty()
    try:
        proc = start(
            step_argv(),
            repo,
            {"LOG": str(log)},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,  # a new session whose foreground group is gitledger + its command
            preexec_fn=_controlling_tty,
        )
        os.close(slave)
        wait_for(log, "started")
        os.write(master, b"\x03")  # Ctrl-C: the terminal signals its foreground process group
        code = proc.wait(timeout=60)
        output = _drain(master)
    finally:
        os.close(master)
    assert code == 130, output
    assert lines(log) == ["started", "INT"]  # once: the terminal's signal is not forwarded again
    said = [line for line in output.splitlines() if line.strip()]
    assert len(said) == 1 and "interrupted" in said[0] and "SIGINT" in said[0], output
    state = entry(repo)
    assert (state["state"], state["outcome"]) == ("failed", "interrupted")
    last = events(repo, str(state["key"]))[-1]
    assert last["interrupted"] == "SIGINT" and last["state"] == "failed"
    # ledger-only: the effect is unknown, so the default on_unconfirmed policy (fail) answers unconfirmed
    again = run_gitledger(*step_argv()[3:], cwd=repo, env={"LOG": str(log)})
    assert again.returncode == 3 and '"unconfirmed"' in again.stdout, again.stdout + again.stderr
    assert "interrupted (SIGINT)" in again.stdout


def _drain(master: int) -> str:
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other side is closed (EIO)
            break
        if not chunk:
            break
        out += chunk
    return out.decode(errors="replace")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_to_gitledger_alone_is_forwarded(repo: Path, tmp_path: Path, signum: int, code: int) -> None:
    log, effect = tmp_path / "log", tmp_path / "effect"
    proc = start(
        step_argv("-c", f"file:{effect}"),
        repo,
        {"LOG": str(log)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    wait_for(log, "started")
    os.kill(proc.pid, signum)  # gitledger only: the command learns it from gitledger
    out, err = proc.communicate(timeout=60)
    name = signal.Signals(signum).name
    assert proc.returncode == code, err
    assert lines(log) == ["started", name.removeprefix("SIG")]
    result = json.loads(out)
    assert result["status"] == "interrupted" and result["exit_code"] == code
    assert "queries reality" in result["message"]
    # a check exists: the next run asks reality (absent) and acts again
    again = run_gitledger(*step_argv("-c", f"file:{effect}", script=f'echo x > "{effect}"')[3:], cwd=repo)
    assert again.returncode == 0 and '"created"' in again.stdout, again.stderr


def test_a_command_that_finishes_despite_the_interrupt_is_recorded_created(
    repo: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    proc = start(
        step_argv(), repo, {"LOG": str(log), "EXIT": "0"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_for(log, "started")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert json.loads(out)["status"] == "created"
    assert entry(repo)["state"] == "done"


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout")
def test_timeout_s_int_signals_the_group_once(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    argv = ["timeout", "--preserve-status", "-s", "INT", "2", *step_argv()]
    proc = subprocess.run(
        argv, cwd=repo, env={**os.environ, "LOG": str(log)}, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 130, proc.stderr
    assert lines(log) == ["started", "INT"]
    assert entry(repo)["outcome"] == "interrupted"


# Runs until it has two signals (at most 10 s), noting each.
TWO_SIGNALS = r"""
n=0
trap "echo INT >> \"$LOG\"; n=\$((n+1))" INT
echo started >> "$LOG"
i=0
while [ "$n" -lt 2 ] && [ "$i" -lt 200 ]; do sleep 0.05; i=$((i+1)); done
exit 7
"""


@pytest.mark.parametrize("gap", [0.1, 1.5])
def test_a_repeated_signal_is_one_interrupt_unless_it_comes_later(
    repo: Path, tmp_path: Path, gap: float
) -> None:
    """The same signal from the same sender again within a second (what timeout does: its child, then its
    group) reaches the command once; again after that (a deliberate second Ctrl-C), it is passed on."""
    log = tmp_path / "log"
    proc = start(step_argv(script=TWO_SIGNALS), repo, {"LOG": str(log)}, stdout=subprocess.PIPE, text=True)
    wait_for(log, "started")
    proc.send_signal(signal.SIGINT)
    wait_for(log, "INT")
    time.sleep(gap)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert lines(log) == (["started", "INT"] if gap < 1.0 else ["started", "INT", "INT"])


def test_sigterm_outside_the_command_says_so(repo: Path, tmp_path: Path) -> None:
    """SIGTERM while gitledger itself works (here: waiting on a slow check) → one line, exit 143."""
    marker = tmp_path / "checking"
    check = f"cmd:touch {marker} && exec sleep 30"
    config = repo / ".gitledger.yml"
    config.write_text(f"version: 1\nsteps:\n  deploy:\n    checks: ['{check}']\n")
    proc = start(
        step_argv(script="true"), repo, {}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    end = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < end:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert err.strip().splitlines() == ["gitledger: interrupted by SIGTERM"], err


# -- orphans -------------------------------------------------------------------------------------------


def test_gitledger_killed_while_forking_leaves_no_command_running(repo: Path, tmp_path: Path) -> None:
    count = tmp_path / "count"
    script = f'echo x >> "{count}"'
    argv = step_argv("--on-unconfirmed", "retry", script=script)
    first = run_gitledger(*argv[3:], cwd=repo, env={"GITLEDGER_FAULT": "fork-window"})
    assert first.returncode == -signal.SIGKILL, first.stderr
    time.sleep(0.5)  # an orphaned command would have written by now
    assert not count.exists(), "the command ran although nobody waited for it"
    again = run_gitledger(*argv[3:], cwd=repo)
    assert again.returncode == 0, again.stderr
    assert lines(count) == ["x"]


def test_a_grandchild_that_outlives_a_killed_gitledger_keeps_the_claim(repo: Path, tmp_path: Path) -> None:
    count, started = tmp_path / "count", tmp_path / "started"
    # sh dies with gitledger (death signal); the subshell it started lives on, as any grandchild would
    script = f'(echo up > "{started}"; sleep 3; echo x >> "{count}") & wait'
    argv = step_argv("-c", f"file:{count}", script=script)
    first = start(argv, repo, {}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(started, "up")
    first.kill()
    first.wait()
    during = run_gitledger(*argv[3:], cwd=repo)
    assert during.returncode == 75 and '"in_progress"' in during.stdout, during.stdout + during.stderr
    forget = run_gitledger("resolve", str(entry(repo)["key"]), "--forget", cwd=repo)
    assert forget.returncode == 75 and "--force" in forget.stderr, forget.stderr
    wait_for(count, "x", 30)
    time.sleep(0.2)  # the grandchild has exited after writing
    after = run_gitledger(*argv[3:], cwd=repo)
    assert after.returncode == 0 and '"already_existed"' in after.stdout, after.stdout + after.stderr
    assert lines(count) == ["x"]


def test_resolve_forget_refuses_while_the_owner_runs(repo: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"
    first = start(
        step_argv(script=f'echo up > "{started}"; exec sleep 30'),
        repo,
        {},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(started, "up")
        key = str(entry(repo)["key"])
        refused = run_gitledger("resolve", key, "--forget", cwd=repo)
        assert refused.returncode == 75 and "held by a live owner" in refused.stderr, refused.stderr
        assert entry(repo)["state"] == "attempting"
        assert (
            run_gitledger("resolve", key, "--done", "--force", cwd=repo).returncode == 2
        )  # --force: --forget only
        forced = run_gitledger("resolve", key, "--forget", "--force", cwd=repo)
        assert forced.returncode == 0, forced.stderr
        assert entry(repo)["state"] == "none"
    finally:
        first.kill()
        first.wait()
