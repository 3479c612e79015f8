from __future__ import annotations

import json
import subprocess

import pytest

from gitledger.core.errors import UsageError
from gitledger.core.keys import KEY_RE, Content, StepKey, parse_key
from testing.repos import run_gitledger


def test_same_inputs_same_key_across_processes(tmp_path):
    here = StepKey.derive("T-1", "open-pr", Content.args({"a": "1", "b": "2"})).key
    proc = run_gitledger(
        "key", "-t", "T-1", "-s", "open-pr", "--arg", "b=2", "--arg", "a=1", "--json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["key"] == here


def test_argument_order_and_dict_order_do_not_matter():
    a = StepKey.derive("t", "s", Content.args({"x": {"b": 1, "a": [1, 2]}, "y": None}))
    b = StepKey.derive("t", "s", Content.args({"y": None, "x": {"a": [1, 2], "b": 1}}))
    assert a.key == b.key


def test_any_input_change_changes_the_key():
    base = StepKey.derive("t", "s", Content.text("c")).digest
    assert StepKey.derive("t2", "s", Content.text("c")).digest != base
    assert StepKey.derive("t", "s2", Content.text("c")).digest != base
    assert StepKey.derive("t", "s", Content.text("d")).digest != base
    # framing: moving text between fields never collides
    assert (
        StepKey.derive("ts", "x", Content.empty()).digest != StepKey.derive("t", "sx", Content.empty()).digest
    )


def test_text_and_file_content_are_the_same_content(tmp_path):
    f = tmp_path / "c.txt"
    f.write_bytes("héllo".encode())
    by_text = run_gitledger("key", "-t", "t", "-s", "s", "--content", "héllo", "--json", cwd=tmp_path)
    by_file = run_gitledger("key", "-t", "t", "-s", "s", "--content-file", str(f), "--json", cwd=tmp_path)
    assert json.loads(by_text.stdout)["key"] == json.loads(by_file.stdout)["key"]


def test_derived_names_are_valid(tmp_path):
    k = StepKey.derive("Fix: login/../bug @{x}", "open PR!", Content.text("x"))
    assert KEY_RE.match(k.key)
    assert parse_key(k.key) == k.key
    assert len(k.label) <= 50 and len(k.label.split(":")[-1]) >= 16
    assert k.trailer == f"Gitledger-Key: {k.key}"
    assert k.marker == f"<!-- gitledger:{k.key} -->"
    check = subprocess.run(["git", "check-ref-format", f"refs/heads/{k.branch}"])
    assert check.returncode == 0, k.branch


@pytest.mark.parametrize("task,step", [("", "s"), ("t", ""), ("  ", "s"), ("t\x00", "s"), ("t", "a\nb")])
def test_bad_names_are_rejected(task, step):
    with pytest.raises(UsageError):
        StepKey.derive(task, step)


def test_bad_names_give_one_line_and_exit_2(tmp_path):
    proc = run_gitledger("key", "-t", "", "-s", "x", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "task must not be empty" in proc.stderr


def test_non_canonical_arguments_are_rejected():
    with pytest.raises(UsageError, match="cannot be hashed canonically"):
        Content.args({"x": object()})
    with pytest.raises(UsageError, match="NaN"):
        Content.args({"x": float("nan")})
