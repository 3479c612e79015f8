"""The fast skip path answers exactly like the full command, and steps aside for everything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitledger.cli.fastskip import parse
from testing.repos import run_gitledger

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
