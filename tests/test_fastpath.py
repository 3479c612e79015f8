"""The typer-free run-step answers exactly like the typer command, and steps aside for anything unusual."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitledger.cli.fastpath import parse
from testing.repos import init_repo, run_gitledger

SLOW = {"GITLEDGER_NO_FASTPATH": "1"}


def both(repo: Path, *args: str):
    fast = run_gitledger(*args, cwd=repo)
    slow = run_gitledger(*args, cwd=repo, env=SLOW)
    return fast, slow


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_done_key_answers_identically(repo: Path, json_flag: list[str]):
    args = [
        "run-step",
        "-t",
        "T",
        "-s",
        "s",
        "--arg",
        "a=1",
        *json_flag,
        "--",
        "sh",
        "-c",
        'echo ref-1 > "$GITLEDGER_RESULT"',
    ]
    run_gitledger(*args, cwd=repo)
    fast, slow = both(repo, *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    assert "skipped" in fast.stdout + fast.stderr and "ref-1" in fast.stdout + fast.stderr


@pytest.mark.parametrize(
    "extra",
    [["-c", "bogus"], ["--on-unconfirmed", "x"], ["--lease", "0"]],
)
def test_errors_on_a_done_key_are_still_reported(repo: Path, extra: list[str]):
    run_gitledger("run-step", "-t", "T", "-s", "s", "--", "true", cwd=repo)
    fast, slow = both(repo, "run-step", "-t", "T", "-s", "s", *extra, "--", "true")
    assert fast.returncode == slow.returncode == 2
    assert fast.stderr == slow.stderr


def test_missing_command_on_a_done_key_is_reported(repo: Path):
    run_gitledger("run-step", "-t", "T", "-s", "s", "--", "true", cwd=repo)
    fast, slow = both(repo, "run-step", "-t", "T", "-s", "s", "--", "no-such-program-xyz")
    assert fast.returncode == slow.returncode == 2 and "not found" in fast.stderr


def test_bad_config_on_a_done_key_is_reported(repo: Path):
    run_gitledger("run-step", "-t", "T", "-s", "s", "--", "true", cwd=repo)
    (repo / ".gitledger.yml").write_text("bogus: 1\n")
    fast, slow = both(repo, "run-step", "-t", "T", "-s", "s", "--", "true")
    assert fast.returncode == slow.returncode == 2 and fast.stderr == slow.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["run-step", "-t", "T", "-s", "s"],
        ["run-step", "-t", "T", "--", "x"],
        ["run-step", "-t", "T", "-s", "s", "--help", "--", "x"],
        ["run-step", "-t", "T", "-t", "U", "-s", "s", "--", "x"],
        ["run-step", "-t", "T", "-s", "s", "--unknown", "--", "x"],
        [
            "run-step",
            "-t",
            "T",
            "-s",
            "s",
            "--",
        ],
        ["list"],
    ],
)
def test_unusual_arguments_go_to_the_full_command(argv: list[str]):
    assert parse(argv) is None


def test_parse_reads_all_forms():
    parsed = parse(
        [
            "run-step",
            "--task=T",
            "-s",
            "s",
            "--arg",
            "a=1",
            "--arg=b=2",
            "-c",
            "ledger",
            "--json",
            "--",
            "cmd",
            "--task",
            "x",
        ]
    )
    assert parsed is not None
    assert parsed["task"] == "T" and parsed["arg"] == ["a=1", "b=2"] and parsed["json"] is True
    assert parsed["command"] == ["cmd", "--task", "x"]


FRESH_CASES = {
    "created": ["--arg", "a=1", "--", "sh", "-c", 'echo https://x/pull/7 > "$GITLEDGER_RESULT"'],
    "created json": ["--json", "--", "sh", "-c", "echo out; echo err >&2"],
    "failed": ["--", "sh", "-c", "echo oops >&2; exit 3"],
    "already existed": ["-c", "file:done.txt", "--", "sh", "-c", "exit 9"],
    "settled by a file check": ["-c", "file:missing.txt", "--json", "--", "touch", "missing.txt"],
    "bad check": ["-c", "bogus", "--", "true"],
    "bad policy": ["--on-unconfirmed", "x", "--", "true"],
    "offline without remote": ["--allow-offline", "--", "true"],
    "missing program": ["--", "no-such-program-xyz"],
    "content from stdin": ["--content-file", "-", "--", "true"],
}


@pytest.mark.parametrize("case", sorted(FRESH_CASES))
def test_fresh_step_answers_identically(tmp_path: Path, case: str):
    """Fresh keys in two identical repositories: the fast path in one, the typer command in the other."""
    outputs = []
    for name, env in (("fast", {}), ("slow", SLOW)):
        repo = init_repo(tmp_path / name)
        (repo / "done.txt").write_text("x")
        args = ["run-step", "-t", "T", "-s", "s", *FRESH_CASES[case]]
        proc = run_gitledger(*args, cwd=repo, env=env, input="some content")
        again = run_gitledger(*args, cwd=repo, env=env, input="some content")
        texts = (proc.stdout, proc.stderr, again.stdout, again.stderr)
        outputs.append((proc.returncode, again.returncode, *(t.replace(str(repo), "REPO") for t in texts)))
    assert outputs[0] == outputs[1]


def test_fresh_step_runs_without_typer(repo: Path):
    proc = run_gitledger(
        "run-step", "-t", "T", "-s", "s", "--", "true", cwd=repo, env={"PYTHONPROFILEIMPORTTIME": "1"}
    )
    assert proc.returncode == 0 and "created" in proc.stderr
    imported = {
        line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time")
    }
    assert "gitledger.core.protocol" in imported  # the measurement works
    assert not {"typer", "click", "pydantic", "github", "yaml"} & imported
