"""A hostile ``.gitledger.yml`` (found by fuzzing) is one clear line and exit 2, promptly, for every command:
no traceback, no "internal error" (exit 70), no hang, and the ledger as it was."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from testing.repos import git, run_gitledger

TIMEOUT = 20  # seconds: far more than any case needs (under one here); an alias bomb used to hang


def ledger_state(repo: Path) -> tuple[str, bytes]:
    """The ledger's refs and its write-ahead journal, byte for byte."""
    refs = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/notes", "refs/gitledger", cwd=repo)
    journal = (
        Path(git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=repo)) / "gitledger.journal"
    )
    return refs, journal.read_bytes()


def assert_refused(repo: Path, text: str, *args: str, expect: str, names_file: bool = True) -> None:
    """``args`` run against ``text`` as the config fail with one line holding ``expect`` (and the file's
    name when ``names_file``), touching nothing."""
    (repo / ".gitledger.yml").unlink(missing_ok=True)
    made = run_gitledger("run-step", "-t", "T0", "-s", "a", "--", "true", cwd=repo)
    assert made.returncode == 0, made.stderr
    before = ledger_state(repo)
    assert any(before), "the step was not recorded"
    (repo / ".gitledger.yml").write_text(text)
    started = time.monotonic()
    proc = run_gitledger(*args, cwd=repo, timeout=TIMEOUT)
    assert time.monotonic() - started < TIMEOUT
    assert proc.returncode not in (0, 70), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert expect in proc.stderr and (".gitledger.yml" in proc.stderr or not names_file), proc.stderr
    assert ledger_state(repo) == before


@pytest.mark.parametrize(
    "text,expect",
    [
        (
            "lease: !!float abc\n",
            "line 1 column 8: lease is not a valid value ('abc' is not a valid !!float)",
        ),
        ("lease: !!int 0x\n", "lease is not a valid value ('0x' is not a valid !!int)"),
        ("lease: !!int ''\n", "lease is not a valid value ('' is not a valid !!int)"),
        ("lease: !!timestamp x\n", "lease is not a valid value ('x' is not a valid !!timestamp)"),
        ("lease: !!timestamp 2024-13-45\n", "'2024-13-45' is not a valid !!timestamp"),
        ("settle: !!bool maybe\n", "settle is not a valid value ('maybe' is not a valid !!bool)"),
        ("lease: " + "1" * 5000 + "\n", "is not a valid !!int"),
        ("steps:\n  s:\n    lease: !!float x\n", "line 3 column 12: steps.s.lease is not a valid value"),
        ("agent:\n  one_pr_per_task: !!bool no-way\n", "agent.one_pr_per_task is not a valid value"),
        (
            "version: !!python/name:os.system x\n",
            "version is not a valid value (could not determine a constructor for the tag '!!python/name:os",
        ),
        ("version: !!python/tuple [1]\n", "line 1: version must be a single value"),
        (
            "mcp:\n  profiles:\n    x:\n      tools:\n        t:\n          find:\n            tool: r\n"
            "            result: {a: [1, !!python/tuple [1]]}\n",
            "line 8 column 29: mcp.profiles.x.tools.t.find.result is not a valid value (could not determine",
        ),
        (
            "mcp:\n  profiles:\n    x:\n      tools:\n        t:\n          find:\n            tool: r\n"
            "            result: {? [a]: 1}\n",
            "find.result is not a valid value (found unhashable key)",
        ),
    ],
)
def test_a_value_that_does_not_fit_its_tag_or_has_an_unsafe_tag_is_one_line(
    repo: Path, text: str, expect: str
) -> None:
    refused_by_list_and_run_step(repo, text, expect)


def refused_by_list_and_run_step(repo: Path, text: str, expect: str) -> None:
    assert_refused(repo, text, "list", expect=expect)
    assert_refused(repo, text, "run-step", "-t", "T1", "-s", "a", "--", "true", expect=expect)


def find_result(result: str) -> str:
    """A config whose one MCP tool finds its effect with ``result`` as the result template."""
    return (
        "mcp:\n  profiles:\n    x:\n      tools:\n        t:\n          find:\n            tool: r\n"
        f"            result: {result}\n"
    )


def alias_bomb(levels: int) -> str:
    """Each anchor lists the one before nine times: 9**levels values from a few hundred bytes."""
    lines = ["              - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"              - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return find_result("\n" + "\n".join(lines))


@pytest.mark.parametrize(
    "text,expect",
    [
        ("steps: " + "[" * 5000 + "\n", "line 1: values nested more than 64 levels deep; flatten them"),
        ("steps: " + "{a: " * 5000 + "\n", "line 1: values nested more than 64 levels deep"),
        ("mcp: &a\n" + find_result("*a")[5:], "line 1: this value holds an alias to itself"),
        (find_result("&r {a: [1, {b: 2}], c: *r}"), "line 8: this value holds an alias to itself"),
        (
            alias_bomb(10),
            "the file holds more than 10000 values once aliases are expanded; use fewer aliases",
        ),
        (
            find_result(
                "".join(f"\n              - &a{i} [{f'*a{i - 1}' if i else 1}]" for i in range(2000))
            ),
            "values nested more than 64 levels deep once aliases are expanded",
        ),
    ],
    ids=["deep-lists", "deep-mappings", "self-alias", "self-alias-in-result", "alias-bomb", "deep-aliases"],
)
def test_deep_nesting_alias_loops_and_alias_bombs_are_one_line_promptly(
    repo: Path, text: str, expect: str
) -> None:
    refused_by_list_and_run_step(repo, text, expect)


@pytest.mark.parametrize(
    "result,expect",
    [
        ("{since: 2024-01-01}", "find.result.since reads as a date, which JSON has no value for; quote it"),
        ("[1, !!binary aGk=]", "find.result[1] reads as binary data, which JSON has no value for"),
        ("{a: !!set {x: null}}", "find.result.a reads as a set, which JSON has no value for"),
        ("{at: 2024-01-01 10:00:00}", "find.result.at reads as a date and time"),
        ("{1: one}", "find.result: the key 1 is not text; quote it"),
        ("{2024-01-01: x}", "the key datetime.date(2024, 1, 1) is not text"),
    ],
    ids=["date", "binary", "set", "datetime", "number-key", "date-key"],
)
def test_a_template_value_json_cannot_hold_is_one_line(repo: Path, result: str, expect: str) -> None:
    """A template is sent to the MCP server as JSON: a value YAML reads as something JSON has no
    value for (an unquoted date, ``!!binary``, ``!!set``, a key that is not text) is refused when
    the file is read, with where it is and what to do."""
    refused_by_list_and_run_step(repo, find_result(result), expect)


def test_aliases_within_the_limits_still_work(repo: Path) -> None:
    shared = "{tool: list_things, match: {title: '{title}'}, result: &r {id: '{id}', tags: [a, b]}}"
    text = (
        "mcp:\n  profiles:\n    x:\n      tools:\n"
        f"        make_thing: {{key: [title], find: &find {shared}}}\n"
        "        make_other: {key: [title], find: *find}\n"
        "steps:\n  s: &step {lease: 600}\n  t: *step\n"
    )
    (repo / ".gitledger.yml").write_text(text)
    proc = run_gitledger("run-step", "-t", "T1", "-s", "t", "--", "true", cwd=repo)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "escaped,name",
    [("\\0", "\0"), ("\\r", "\r"), ("\\x7f", "\x7f"), ("\\e", "\x1b"), ("\\v", "\v")],
    ids=["NUL", "CR", "DEL", "ESC", "VT"],
)
@pytest.mark.parametrize(
    "command", [("sync",), ("init",), ("run-step", "-t", "T1", "-s", "a", "--", "true")], ids=lambda c: c[0]
)
def test_a_remote_with_a_control_character_is_one_line(
    repo: Path, escaped: str, name: str, command: tuple[str, ...]
) -> None:
    git("remote", "add", "origin", str(repo), cwd=repo)
    config_before = (repo / ".git" / "config").read_bytes()
    text = f'remote: "a{escaped}b"\nclaims: remote\n'
    expect = f"{'a' + name + 'b'!r} is not a remote name; give the name of a remote from 'git remote'"
    assert_refused(repo, text, *command, expect=expect, names_file=False)
    assert (repo / ".git" / "config").read_bytes() == config_before


@pytest.mark.parametrize(
    "command",
    [("key", "-t", "T1", "-s", "a"), ("audit", "--github-repo", "o/r")],
    ids=lambda c: c[0],
)
def test_commands_that_work_outside_a_repository_still_read_its_config_inside_one(
    repo: Path, command: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``key`` and ``audit`` fall back to the defaults outside a git repository; inside one, a bad
    ``.gitledger.yml`` is refused like everywhere else (they went on with the defaults)."""
    # audit stops at the config, before any request (were it to go on: a closed port on loopback)
    monkeypatch.setenv("GITHUB_TOKEN", "not-used")
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GITLEDGER_GITHUB_RETRIES", "0")
    assert_refused(repo, "prefixes: [1\n", *command, expect="invalid YAML")


@pytest.mark.parametrize("escaped,shown", [("\\t", "\\t"), ("\\n", "\\n"), ("\\x85", "\\x85")])
def test_a_label_prefix_with_a_control_character_is_one_line(repo: Path, escaped: str, shown: str) -> None:
    """It was accepted: a tab or a newline went into $GITLEDGER_LABEL and the GitHub label."""
    text = f'prefixes: {{label: "x{escaped}y"}}\n'
    expect = f"line 1: label prefix 'x{shown}y' contains a control character; use printable text only"
    assert_refused(repo, text, "run-step", "-t", "T1", "-s", "b", "--", "true", expect=expect)


def test_a_file_larger_than_1_mib_is_one_line_promptly(repo: Path) -> None:
    """60 MB of comments took PyYAML 36 s to read, for every command."""
    text = "lease: 900\n" + ("#" * 99 + "\n") * 10_486
    expect = "the file is larger than 1 MiB; keep only gitledger's settings there (they take a few KB)"
    refused_by_list_and_run_step(repo, text, expect)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
def test_a_config_that_is_not_a_regular_file_is_one_line_promptly(repo: Path, kind: str) -> None:
    """A link to /dev/zero was read until memory ran out (an internal error, MemoryError), and a
    named pipe blocked every command forever."""
    path = repo / ".gitledger.yml"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    proc = run_gitledger("list", cwd=repo, timeout=TIMEOUT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr == f"gitledger: {path}: it is not a regular file; put the settings in one\n"
