"""Habits carried over from git and gh: -h, ``help [COMMAND]``, bare ``gitledger`` is help, shell
completion, readable metavars. Real processes of this checkout's gitledger."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from testing.repos import gitledger_argv, run_gitledger


def _commands() -> list[list[str]]:
    """Every command path, from the help screens themselves."""

    def listed(*path: str) -> list[str]:
        out = run_gitledger(*path, "--help", cwd=Path.cwd()).stdout
        section = out.split("Commands:", 1)[1] if "Commands:" in out else ""
        return [line.split()[0] for line in section.splitlines() if re.match(r"  \S", line)]

    found: list[list[str]] = []
    for name in listed():
        sub = listed(name) if name in {"hooks", "github", "agent"} else []
        found += [[name, s] for s in sub] if sub else [[name]]
    return found


COMMANDS = _commands()


def test_the_command_list_is_complete() -> None:
    names = {" ".join(c) for c in COMMANDS}
    assert {
        "run-step",
        "list",
        "show",
        "log",
        "help",
        "completion",
        "hooks install",
        "github open-pr",
    } <= names


def test_bare_gitledger_is_help_on_stdout(tmp_path: Path) -> None:
    proc = run_gitledger(cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("Usage: gitledger ") and "run-step" in proc.stdout
    assert proc.stdout == run_gitledger("--help", cwd=tmp_path).stdout
    for group in ("hooks", "github", "agent"):
        proc = run_gitledger(group, cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.startswith(f"Usage: gitledger {group} "), proc.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_dash_h_and_help_command_match_dash_dash_help(command: list[str], tmp_path: Path) -> None:
    long = run_gitledger(*command, "--help", cwd=tmp_path)
    assert long.returncode == 0, long.stderr
    if command == ["mcp-proxy"]:  # typer-free, with help of its own
        assert run_gitledger(*command, "-h", cwd=tmp_path).stdout == long.stdout
        return
    short = run_gitledger(*command, "-h", cwd=tmp_path)
    via_help = run_gitledger("help", *command, cwd=tmp_path)
    assert short.returncode == 0 and via_help.returncode == 0
    assert short.stdout == long.stdout == via_help.stdout
    # readable metavars, whatever typer renders for types
    assert not re.search(r"<(str|int|float|path|file|list\[[^\]]*\]|bool)>", long.stdout), long.stdout
    assert "VALUE" not in re.sub(r"NAME=VALUE", "", long.stdout)


def test_metavars_say_what_goes_there(tmp_path: Path) -> None:
    text = run_gitledger("help", "run-step", cwd=tmp_path).stdout
    for expected in ("-t, --task TASK", "-c, --check SPEC", "--lease SECONDS", "--content-file FILE"):
        assert expected in text
    assert "--arg NAME=VALUE" in text and "--on-unconfirmed fail|retry|skip" in text
    usage = run_gitledger("show", "-h", cwd=tmp_path).stdout.splitlines()[0]
    assert re.fullmatch(r"Usage: gitledger show \[OPTIONS\] \{?KEY\}?", usage)  # newer typer: {KEY}
    assert "-n, --limit N" in run_gitledger("log", "-h", cwd=tmp_path).stdout


def test_help_for_an_unknown_command_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = run_gitledger("help", "hooks", "nope", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "gitledger: no command 'nope' in 'gitledger hooks'; see 'gitledger hooks --help'\n"


def _complete(shell: str, words: str, tmp_path: Path) -> str:
    env = {**os.environ, "_GITLEDGER_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        env.update(COMP_WORDS=words, COMP_CWORD=str(len(words.split(" ")) - 1))
    else:
        env["_TYPER_COMPLETE_ARGS"] = words
        if shell == "fish":
            env["_TYPER_COMPLETE_FISH_ACTION"] = "get-args"
    proc = subprocess.run(
        gitledger_argv(), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_and_their_answers(shell: str, tmp_path: Path) -> None:
    script = run_gitledger("completion", shell, cwd=tmp_path)
    assert script.returncode == 0 and f"_GITLEDGER_COMPLETE=complete_{shell}" in script.stdout
    assert "run-step" in _complete(shell, "gitledger ru", tmp_path)
    subcommands = _complete(shell, "gitledger hooks ", tmp_path)
    assert "install" in subcommands and "uninstall" in subcommands
    assert "--check" in _complete(shell, "gitledger run-step --ch", tmp_path)


def test_the_bash_script_really_completes(tmp_path: Path) -> None:
    """Sourced into a real bash: the completion function fills COMPREPLY through gitledger."""
    script = run_gitledger("completion", "bash", cwd=tmp_path).stdout
    shim = tmp_path / "bin" / "gitledger"
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\nexec "$GITLEDGER_PYTHON" -m gitledger "$@"\n')
    shim.chmod(0o755)
    probe = (
        script
        + "\nCOMP_WORDS=(gitledger hooks un); COMP_CWORD=2; _gitledger_completion gitledger\n"
        + 'echo "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    env["GITLEDGER_PYTHON"] = gitledger_argv()[0]
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "uninstall", proc.stderr


def test_completion_for_an_unknown_shell_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_gitledger("completion", "tcsh", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "bash, zsh, fish" in proc.stderr


def test_every_value_option_has_a_named_metavar() -> None:
    """In process: a new option without an entry in cli.meta's tables would show VALUE."""
    import typer.main

    from gitledger.cli import agent, audit, github, hooks, inspect, keys, mcp_help, meta, steps, sync  # noqa: F401
    from gitledger.cli.app import app

    def walk(command: object, path: str) -> list[str]:
        bad = [
            f"{path} {getattr(p, 'opts', [p.name])}"
            for p in getattr(command, "params", [])
            if p.metavar == "VALUE"
        ]
        for name, sub in meta.subcommands(command).items():
            bad += walk(sub, f"{path} {name}")
        return bad

    assert walk(meta.readable(typer.main.get_command(app)), "gitledger") == []


# --- '-' is standard input, --json everywhere, exit 2 for usage errors, log order ---------------------


def test_content_file_dash_reads_standard_input(tmp_path: Path) -> None:
    from testing.repos import init_repo

    repo = init_repo(tmp_path / "repo")
    (tmp_path / "content").write_bytes(b"hello\x00bytes\n")
    from_file = run_gitledger(
        "key", "-t", "T", "-s", "s", "--content-file", str(tmp_path / "content"), "--json", cwd=repo
    )
    from_stdin = run_gitledger(
        "key", "-t", "T", "-s", "s", "--content-file", "-", "--json", cwd=repo, input="hello\x00bytes\n"
    )
    assert from_file.returncode == 0 and from_stdin.stdout == from_file.stdout
    step = (
        "run-step",
        "-t",
        "T",
        "-s",
        "s",
        "--content-file",
        "-",
        "--json",
        "--",
        "sh",
        "-c",
        "cat; echo ran",
    )
    first = run_gitledger(*step, cwd=repo, input="hello\x00bytes\n")
    assert first.returncode == 0 and '"created"' in first.stdout
    assert "ran" in first.stderr  # the command's stdout goes to stderr with --json; its stdin is at EOF
    key = json.loads(from_file.stdout)["key"]
    assert json.loads(first.stdout)["key"] == key
    # the fast skip reads the same bytes; different bytes are another step
    second = run_gitledger(*step, cwd=repo, input="hello\x00bytes\n")
    assert json.loads(second.stdout)["status"] == "skipped"
    other = run_gitledger(*step, cwd=repo, input="other\n")
    assert json.loads(other.stdout)["status"] == "created" and json.loads(other.stdout)["key"] != key


def test_init_hooks_and_agent_speak_json(tmp_path: Path) -> None:
    from testing.repos import git, init_repo

    repo = init_repo(tmp_path / "repo")
    git("remote", "add", "origin", str(init_repo(tmp_path / "remote.git", bare=True)), cwd=repo)
    init = json.loads(run_gitledger("init", "--json", "--dry-run", cwd=repo).stdout)
    assert init["remote"] == "origin" and init["dry_run"] is True and init["changes"]
    assert json.loads(run_gitledger("init", "--json", cwd=repo).stdout)["changes"] == init["changes"]
    assert json.loads(run_gitledger("init", "--json", cwd=repo).stdout)["changes"] == []  # idempotent

    installed = json.loads(run_gitledger("hooks", "install", "--json", cwd=repo).stdout)
    assert {(h["hook"], h["action"]) for h in installed} == {
        ("commit-msg", "installed"),
        ("pre-push", "installed"),
    }
    again = json.loads(run_gitledger("hooks", "install", "--json", cwd=repo).stdout)
    assert {h["action"] for h in again} == {"unchanged"}
    removed = json.loads(run_gitledger("hooks", "uninstall", "--json", cwd=repo).stdout)
    assert {h["action"] for h in removed} == {"removed"}

    plan = run_gitledger("agent", "install", "claude", "--dry-run", "--json", "--repo", str(repo), cwd=repo)
    data = json.loads(plan.stdout)
    assert data["dry_run"] is True and data["changed"] is True and "agent-hook" in data["settings"]
    assert not Path(data["path"]).exists()  # a dry run writes nothing


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    for args in (
        ("hooks", "install"),
        ("hooks", "uninstall"),
        ("init",),
        ("list",),
        ("log",),
        ("run-step", "-t", "T", "-s", "s", "--", "true"),
    ):
        proc = run_gitledger(*args, cwd=outside)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "not inside a git repository" in proc.stderr, args
    bad: list[tuple[str, ...]] = [("run-step", "--nope"), ("log", "-n", "0"), ("show",), ("completion",)]
    for wrong in [*bad, ("help", "nope")]:
        proc = run_gitledger(*wrong, cwd=outside)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, wrong


def test_log_is_newest_first_and_reverse_keeps_the_newest_n(tmp_path: Path) -> None:
    from testing.repos import init_repo

    repo = init_repo(tmp_path / "repo")
    for step in ("one", "two", "three"):
        assert run_gitledger("run-step", "-t", "T", "-s", step, "--", "true", cwd=repo).returncode == 0
    newest = json.loads(run_gitledger("log", "--json", cwd=repo).stdout)
    assert [(e["key"].split(".")[1], e["state"]) for e in newest][:2] == [
        ("three", "done"),
        ("three", "attempting"),
    ]
    ats = [e["at"] for e in newest]
    assert ats == sorted(ats, reverse=True)
    two = json.loads(run_gitledger("log", "-n", "2", "--reverse", "--json", cwd=repo).stdout)
    assert two == newest[:2][::-1]
    table = run_gitledger("log", cwd=repo).stdout.splitlines()
    assert "three" in table[1] and "one" in table[-1]
