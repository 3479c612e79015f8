"""A hostile ``.gitledger.yml`` (found by fuzzing) is one clear line and exit 2, promptly, for every command:
no traceback, no "internal error" (exit 70), no hang, and the ledger as it was."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from testing.repos import git, run_gitledger

TIMEOUT = 20  # seconds; each case must fail in well under one


def ledger_state(repo: Path) -> tuple[str, bytes]:
    """The ledger's refs and its write-ahead journal, byte for byte."""
    refs = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/notes", "refs/gitledger", cwd=repo)
    journal = (
        Path(git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=repo)) / "gitledger.journal"
    )
    return refs, journal.read_bytes()


def assert_refused(repo: Path, text: str, *args: str, expect: str) -> None:
    """``args`` run against ``text`` as the config fail with one line holding ``expect``, touching nothing."""
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
    assert ".gitledger.yml" in proc.stderr and expect in proc.stderr, proc.stderr
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
    assert_refused(repo, text, "list", expect=expect)
    assert_refused(repo, text, "run-step", "-t", "T1", "-s", "a", "--", "true", expect=expect)
