"""The CLI's dispatch, in process (as pre-commit's tests/main_test.py): every command is reachable, a
command renders what its feature returns, and any error — a bug included — is one line and an exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitledger import cli
from gitledger.core.errors import EXIT_INTERNAL, EXIT_USAGE, UsageError
from testing.repos import init_repo

COMMANDS = [
    "key",
    "run-step",
    "list",
    "show",
    "log",
    "resolve",
    "reconcile",
    "sync",
    "init",
    "audit",
    "hooks",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([command, "--help"]) == 0
    assert "Usage:" in capsys.readouterr().out


def test_list_renders_what_the_feature_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gitledger.features import inspect

    rows = [
        {"key": "k", "state": "done", "outcome": "created", "ref": "r", "updated_at": "t", "duplicate": False}
    ]
    monkeypatch.setattr(inspect, "list_entries", lambda session, progress=iter: rows)
    assert cli.main(["list", "--json", "--repo", str(init_repo(tmp_path / "r"))]) == 0
    assert json.loads(capsys.readouterr().out) == rows


def test_a_feature_error_is_one_line_with_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gitledger.features import inspect

    def refuse(session: object, progress: object = iter) -> list[dict[str, object]]:
        raise UsageError("bad\nthing")

    monkeypatch.setattr(inspect, "list_entries", refuse)
    assert cli.main(["list", "--repo", str(init_repo(tmp_path / "r"))]) == EXIT_USAGE
    assert capsys.readouterr().err == "gitledger: bad\\x0athing\n"


def test_a_bug_is_one_line_and_exit_70_and_debug_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gitledger.features import inspect

    def broken(session: object, progress: object = iter) -> list[dict[str, object]]:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(inspect, "list_entries", broken)
    repo = str(init_repo(tmp_path / "r"))
    monkeypatch.delenv("GITLEDGER_DEBUG", raising=False)
    assert cli.main(["list", "--repo", repo]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" in err and "ZeroDivisionError" in err
    assert "Traceback" not in err
    monkeypatch.setenv("GITLEDGER_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        cli.main(["list", "--repo", repo])


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["no-such-command"]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith("gitledger: ")
