"""Output like gh: tables clipped to the terminal, tab-separated values in a pipe, progress on stderr only
on a terminal. Real processes; the terminal is a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from testing.fakegithub import FakeGitHub
from testing.repos import gitledger_argv, init_repo, run_gitledger

BIG_REF = "https://example.invalid/" + "r" * 65_000
COLUMNS = 72


def on_terminal(
    *args: str, cwd: Path, stdout_file: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str, str, str]:
    """Run gitledger with stderr (and stdout, unless ``stdout_file``) on a pseudo-terminal of COLUMNS
    columns; returns (exit code, what the terminal shows at the end, what went to the file, every byte
    the terminal got)."""
    master, slave = pty.openpty()
    out = stdout_file.open("wb") if stdout_file else None
    full_env = {**os.environ, **(env or {}), "COLUMNS": str(COLUMNS), "LINES": "24"}
    proc = subprocess.Popen(
        gitledger_argv(*args),
        cwd=cwd,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=out or slave,
        stderr=slave,
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    code = proc.wait(timeout=120)
    if out:
        out.close()
    # what the terminal ends up showing: a carriage return goes back to the start of the line
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in shown.decode().replace("\r\n", "\n").split("\n"))
    return code, text, stdout_file.read_text() if stdout_file else "", shown.decode()


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """Three done steps, one of them with a 65 KB ref."""
    repo = init_repo(tmp_path / "repo")
    big = f'printf %s "{BIG_REF}" > "$GITLEDGER_RESULT"'
    for step, command in (("one", "true"), ("big", big), ("three", "true")):
        proc = run_gitledger("run-step", "-t", "T", "-s", step, "--", "sh", "-c", command, cwd=repo)
        assert proc.returncode == 0, proc.stderr
    return repo


def test_on_a_terminal_the_table_fits_and_keys_stay_whole(ledger: Path) -> None:
    code, shown, _, _ = on_terminal("list", cwd=ledger)
    lines = shown.splitlines()
    assert code == 0 and lines[0].split() == ["KEY", "STATE", "OUTCOME", "REF", "UPDATED_AT"]
    assert all(len(line) <= COLUMNS for line in lines), [len(line) for line in lines]
    keys = [row["key"] for row in json.loads(run_gitledger("list", "--json", cwd=ledger).stdout)]
    for key in keys:
        assert any(line.startswith(key + " ") for line in lines), key  # the key column is never clipped
    assert any("\u2026" in line for line in lines)  # the ref was


def test_in_a_pipe_rows_are_tab_separated_and_whole(ledger: Path) -> None:
    proc = run_gitledger("list", cwd=ledger)
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and len(rows) == 3 and all(len(r) == 5 for r in rows)  # no header
    assert [r[3] for r in rows].count(BIG_REF) == 1  # nothing clipped
    listed = json.loads(run_gitledger("list", "--json", cwd=ledger).stdout)
    assert [r[0] for r in rows] == [row["key"] for row in listed]
    key = next(row["key"] for row in listed if row["ref"] == BIG_REF)
    shown = run_gitledger("show", key, cwd=ledger).stdout
    assert f"ref            {BIG_REF}\n" in shown  # show prints the full value


def test_the_status_line_fits_a_terminal(ledger: Path) -> None:
    code, shown, _, _ = on_terminal("run-step", "-t", "T", "-s", "big", "--", "true", cwd=ledger)
    assert code == 0 and shown.startswith("gitledger: skipped t.big.") and len(shown.rstrip("\n")) <= COLUMNS
    proc = run_gitledger("run-step", "-t", "T", "-s", "big", "--", "true", cwd=ledger)
    assert proc.stderr.rstrip("\n").endswith(f"({BIG_REF})")  # not on a terminal: whole


def test_reconcile_progress_goes_to_the_terminal_never_to_the_file(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    for n in range(3):  # killed after the effect: left attempting by a dead owner
        proc = run_gitledger(
            "run-step",
            "-t",
            "T",
            "-s",
            f"s{n}",
            "--",
            "true",
            cwd=repo,
            env={"GITLEDGER_FAULT": "after-effect"},
        )
        assert proc.returncode == -9
    report = tmp_path / "report.txt"
    code, shown, written, raw = on_terminal("reconcile", cwd=repo, stdout_file=report)
    assert shown.strip() == ""  # the progress line was erased
    assert code == 0 and "reconciling" in raw  # on the terminal (stderr), erased at the end
    assert not written.startswith("reconciling") and "reconciling" not in written
    assert len(written.splitlines()) == 3 and all(line.count("\t") == 2 for line in written.splitlines())
    again = run_gitledger("reconcile", cwd=repo)  # stderr a pipe: no progress at all
    assert "reconciling" not in again.stderr + again.stdout


def test_sync_and_audit_show_their_phases_on_a_terminal_only(github: FakeGitHub, tmp_path: Path) -> None:
    from tests.audit_support import make_scenario, prepare_work
    from tests.github_support import REPO, TOKEN, fast_env

    work = prepare_work(github, tmp_path / "work")
    make_scenario(github, work)
    assert run_gitledger("run-step", "-t", "T", "-s", "s", "--", "true", cwd=work).returncode == 0
    out = tmp_path / "sync.json"
    code, shown, written, raw = on_terminal("sync", "--json", cwd=work, stdout_file=out)
    assert code == 0 and json.loads(written)["pushed"]
    assert (
        "syncing the ledger: fetching" in raw and "syncing the ledger: pushing" in raw and shown.strip() == ""
    )

    out = tmp_path / "audit.json"
    env = fast_env(github)
    code, shown, written, raw = on_terminal(
        "audit", "--github-repo", REPO, "--json", cwd=work, stdout_file=out, env=env
    )
    assert code == 0 and len(json.loads(written)["duplicates"]) == 2
    assert "auditing: listing pull requests" in raw and "auditing: reading commit trailers" in raw
    assert TOKEN not in raw
    piped = run_gitledger("audit", "--github-repo", REPO, "--json", cwd=work, env=env)
    assert "auditing" not in piped.stderr and json.loads(piped.stdout)["duplicates"]
