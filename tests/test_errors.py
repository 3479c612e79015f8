"""Errors keep their cause: git's whole relevant message in one line, no traceback for any input, and
nothing written to the ledger before the input is known to be good."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitledger.core.errors import git_message
from gitledger.core.events import encode_event, parse_events
from testing.repos import git, run_gitledger

NOT_UTF8 = os.fsdecode(b"a\xffb")  # what Python makes of a non-UTF-8 argument: a lone surrogate


def test_git_message_keeps_every_fatal_and_error_line() -> None:
    stderr = (
        b"fatal: 'far' does not appear to be a git repository\n"
        b"fatal: Could not read from remote repository.\n\n"
        b"Please make sure you have the correct access rights\nand the repository exists.\n"
    )
    assert git_message(stderr) == (
        "'far' does not appear to be a git repository; Could not read from remote repository."
    )
    assert git_message(b"hint: x\nsomething went wrong\n") == "something went wrong"
    assert git_message(b"") == "no message"
    assert len(git_message(b"error: " + b"x" * 5000)) == 2000


@pytest.mark.parametrize(
    "args", [("list",), ("run-step", "-t", "T", "-s", "s", "--", "true"), ("hooks", "install"), ("sync",)]
)
def test_a_repository_of_another_user_says_how_to_trust_it(repo: Path, args: tuple[str, ...]) -> None:
    # git's "detected dubious ownership" came out as its last line only ("\x09git config --global
    # --add safe.directory ..."), or as the whole message with escaped newlines (hooks install)
    proc = run_gitledger(*args, cwd=repo, env={"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"})
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "the repository belongs to another user (safe.directory)" in line, line
    assert line.endswith(f"to trust it: git config --global --add safe.directory {repo}"), line
    assert (
        not (repo / ".git" / "gitledger.journal").exists()
        and not (repo / ".git" / "hooks" / "pre-push").exists()
    )


def test_an_unreachable_remote_names_the_cause(repo: Path, tmp_path: Path) -> None:
    git("remote", "add", "far", str(tmp_path / "nowhere"), cwd=repo)
    proc = run_gitledger("sync", "far", cwd=repo)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "does not appear to be a git repository" in lines[0] and "Could not read" in lines[0]


BAD_INPUTS = [
    ("run-step", "-t", "T", "-s", "s", "-c", f"file:{NOT_UTF8}", "--", "true"),
    ("run-step", "-t", "T", "-s", NOT_UTF8, "--", "true"),
    ("run-step", "-t", NOT_UTF8, "-s", "s", "--", "true"),
    ("run-step", "-t", "T", "-s", "s", "--arg", f"x={NOT_UTF8}", "--", "true"),
    ("run-step", "-t", "T", "-s", "s", "--remote", NOT_UTF8, "--", "true"),
    ("run-step", "-t", "T", "-s", "s", "--on-unconfirmed", NOT_UTF8, "--", "true"),
    ("run-step", "-t", "T", "-s", "s", "--lease", NOT_UTF8, "--", "true"),
    ("run-step", "-t", "T", "-s", "s", "--content-file", NOT_UTF8, "--", "true"),
    ("run-step", "-t", "T", "-s", "s", "--", NOT_UTF8),
    ("key", "-t", "T", "-s", NOT_UTF8),
    ("show", NOT_UTF8),
    ("resolve", NOT_UTF8, "--done"),
    ("sync", NOT_UTF8),
    ("list", "--repo", NOT_UTF8),
]


@pytest.mark.parametrize("args", BAD_INPUTS, ids=lambda a: " ".join(a[:2]) + " " + str(BAD_INPUTS.index(a)))
def test_non_utf8_input_is_one_line_and_writes_nothing(repo: Path, args: tuple[str, ...]) -> None:
    proc = run_gitledger(*args, cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert git("for-each-ref", "refs/notes", "refs/gitledger", cwd=repo) == ""


def test_resolve_ref_must_be_utf8(repo: Path) -> None:
    made = run_gitledger("run-step", "-t", "T", "-s", "s", "--json", "--", "true", cwd=repo)
    key = made.stdout.split('"key": "')[1].split('"')[0]
    proc = run_gitledger("resolve", key, "--done", "--ref", NOT_UTF8, cwd=repo)
    assert proc.returncode == 2 and "not valid UTF-8" in proc.stderr and "Traceback" not in proc.stderr


def test_a_command_name_that_is_not_utf8_is_recorded_not_a_traceback(repo: Path) -> None:
    script = repo / os.fsencode(NOT_UTF8).decode("utf-8", "surrogateescape")
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    proc = run_gitledger("run-step", "-t", "T", "-s", "s", "--", f"./{NOT_UTF8}", cwd=repo)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert "failed" in run_gitledger("list", cwd=repo).stdout


def test_events_with_lone_surrogates_stay_valid_json() -> None:
    line = encode_event({"state": "done", "ref": NOT_UTF8, "x": "é"})
    assert b"\\udcff" in line and "é".encode() in line
    events, bad = parse_events(line)
    assert not bad and events[0]["ref"] == NOT_UTF8


def test_claims_remote_without_a_remote_writes_nothing(repo: Path) -> None:
    (repo / ".gitledger.yml").write_text("version: 1\nclaims: remote\n")
    proc = run_gitledger("run-step", "-t", "T", "-s", "s", "--", "true", cwd=repo)
    assert proc.returncode == 2 and "no git remote named 'origin'" in proc.stderr, proc.stderr
    assert git("for-each-ref", "refs/notes", "refs/gitledger", cwd=repo) == ""
