from __future__ import annotations

import json
import subprocess

import pytest

from gitledger.core.errors import UsageError
from gitledger.core.keys import KEY_RE, Content, StepKey, parse_key
from testing.repos import init_repo, run_gitledger


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


def test_ascii_keys_are_unchanged_by_the_nfc_rule():
    # computed before task and step names were normalised: a key format change would move every key
    assert StepKey.derive("T-1", "deploy", Content.empty()).key == "t-1.deploy.2635ec809c5c576763679077"


def test_nfc_and_nfd_spellings_of_a_name_give_one_key(tmp_path):
    import unicodedata

    nfc, nfd = "Café-Ω", unicodedata.normalize("NFD", "Café-Ω")
    assert nfc != nfd
    a = StepKey.derive(nfc, f"publish-{nfd}", Content.text("x"))
    b = StepKey.derive(nfd, f"publish-{nfc}", Content.text("x"))
    assert a.key == b.key and a.digest == b.digest and a.task == nfc
    # the content is data, not a name: hashed as given
    assert StepKey.derive("T", "s", Content.text(nfc)).key != StepKey.derive("T", "s", Content.text(nfd)).key
    init_repo(tmp_path / "r")
    by_cli = [
        json.loads(run_gitledger("key", "-t", task, "-s", "s", "--json", cwd=tmp_path / "r").stdout)["key"]
        for task in (nfc, nfd)
    ]
    assert by_cli[0] == by_cli[1]


def test_key_prints_the_names_run_step_uses_with_the_repositorys_prefixes(tmp_path):
    """`gitledger key` names the branch and label of .gitledger.yml's prefixes, as run-step hands them to
    its command (the pre-push hook and docs/hooks.md point at the branch `key` prints)."""
    repo = init_repo(tmp_path / "r")
    (repo / ".gitledger.yml").write_text('prefixes: {branch: "agents/", label: "ag:"}\n')
    step = ("-t", "T-1", "-s", "push")
    script = 'printf "%s %s" "$GITLEDGER_BRANCH" "$GITLEDGER_LABEL"'
    ran = run_gitledger("run-step", *step, "--", "sh", "-c", script, cwd=repo)
    assert ran.returncode == 0, ran.stderr
    printed = json.loads(run_gitledger("key", *step, "--json", cwd=repo).stdout)
    assert f"{printed['branch']} {printed['label']}" == ran.stdout
    assert printed["branch"].startswith("agents/t-1/push-") and printed["label"].startswith("ag:")
    from_outside = run_gitledger("key", *step, "--repo", str(repo), "--json", cwd=tmp_path)
    assert json.loads(from_outside.stdout) == printed
    # outside a repository (and without --repo) the default prefixes apply
    assert json.loads(run_gitledger("key", *step, "--json", cwd=tmp_path).stdout)["branch"].startswith(
        "gitledger/"
    )
