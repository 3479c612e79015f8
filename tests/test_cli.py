"""The CLI contract: statuses, exit codes, variables handed to the command, JSON, errors, repair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing.repos import git, init_repo, run_gitledger, run_json


def run_step(repo: Path, *args: str, env: dict[str, str] | None = None):
    return run_gitledger("run-step", "-t", "T-1", "-s", "s", *args, cwd=repo, env=env)


def test_created_then_skipped_with_ref_and_json_on_stdout(repo: Path):
    script = 'echo command-output; echo "https://example.invalid/pr/1" > "$GITLEDGER_RESULT"'
    first = run_step(repo, "--json", "--", "sh", "-c", script)
    assert first.returncode == 0
    data = json.loads(first.stdout)  # the command's stdout went to stderr
    assert data["status"] == "created" and data["ref"] == "https://example.invalid/pr/1"
    assert "command-output" in first.stderr
    second = run_step(repo, "--json", "--", "sh", "-c", "exit 99")
    assert json.loads(second.stdout) == {"status": "skipped", "key": data["key"], "ref": data["ref"]}


def test_command_gets_the_step_variables(repo: Path, tmp_path: Path):
    out = tmp_path / "env.json"
    script = (
        "python3 -c 'import json,os,sys; json.dump({k: v for k, v in os.environ.items() "
        'if k.startswith("GITLEDGER_")}, open(sys.argv[1], "w"))\' ' + str(out)
    )
    run_step(repo, "--content", "c", "--", "sh", "-c", script)
    env = json.loads(out.read_text())
    key = run_json("key", "-t", "T-1", "-s", "s", "--content", "c", cwd=repo)
    for name in ("key", "task", "step", "digest", "branch", "label", "trailer", "marker"):
        assert env[f"GITLEDGER_{name.upper()}"] == key[name]
    assert env["GITLEDGER_TRAILER"] == f"Gitledger-Key: {key['key']}"
    assert Path(env["GITLEDGER_RESULT"]).name == "result"


def test_failed_command_exit_code_is_passed_through_and_retried(repo: Path):
    failed = run_step(repo, "--json", "--", "sh", "-c", "exit 7")
    assert failed.returncode == 7 and json.loads(failed.stdout)["status"] == "failed"
    assert run_json("list", cwd=repo)[0]["state"] == "failed"
    retried = run_step(repo, "--json", "--", "true")
    assert json.loads(retried.stdout)["status"] == "created"


@pytest.mark.parametrize(
    "args,message",
    [
        (["true"], "put the command after '--'"),
        (["--"], "no command after '--'"),
        (["-c", "nope", "--", "true"], "unknown check spec 'nope'"),
        (["-c", "github-comment:x", "--", "true"], "unknown check spec"),
        (["--on-unconfirmed", "maybe", "--", "true"], "on_unconfirmed 'maybe'"),
        (["--lease", "-5", "--", "true"], "lease must be a positive"),
        (["--lease", "1e-300", "--", "true"], "from 0.3 (a shorter one runs out between two heartbeats)"),
        (["--arg", "novalue", "--", "true"], "is not NAME=VALUE"),
        (["--content", "a", "--arg", "b=c", "--", "true"], "only one of"),
        (["--", "definitely-not-a-command-xyz"], "not found"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(repo: Path, args: list[str], message: str):
    proc = run_step(repo, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert proc.stderr.startswith("gitledger: ")
    assert run_json("list", cwd=repo) == []  # nothing recorded


def test_cmd_check_semantics(repo: Path):
    found = run_step(repo, "--json", "-c", "cmd:echo found-it", "--", "false")
    assert json.loads(found.stdout) | {"key": None} == {
        "status": "already_existed",
        "key": None,
        "ref": "found-it",
    }
    absent = run_gitledger(
        "run-step", "-t", "T-2", "-s", "s", "-c", "cmd:exit 1", "--json", "--", "true", cwd=repo
    )
    assert json.loads(absent.stdout)["status"] == "created"
    broken = run_gitledger("run-step", "-t", "T-3", "-s", "s", "-c", "cmd:exit 5", "--", "true", cwd=repo)
    assert broken.returncode == 1 and "exited 5" in broken.stderr
    entry = next(e for e in run_json("list", cwd=repo) if e["task"] == "T-3")
    assert entry["state"] == "none" and entry["events"] == 1  # only the explaining info event


def test_branch_check_sees_remote_tracking_and_remote(repo: Path, tmp_path: Path):
    remote = init_repo(tmp_path / "remote.git", bare=True)
    git("remote", "add", "origin", str(remote), cwd=repo)
    key = run_json("key", "-t", "T-1", "-s", "s", cwd=repo)
    git("push", "-q", str(remote), f"HEAD:refs/heads/{key['branch']}", cwd=repo)
    # not fetched: only ls-remote (branch:origin) can see it
    local_only = run_step(repo, "--json", "-c", "branch", "--", "true")
    assert json.loads(local_only.stdout)["status"] == "created"
    other = run_gitledger(
        "run-step",
        "-t",
        "T-1",
        "-s",
        "s",
        "--content",
        "x",
        "-c",
        "branch:origin",
        "--json",
        "--",
        "true",
        cwd=repo,
    )
    assert json.loads(other.stdout)["status"] == "created"  # different key, different branch
    key2 = run_json("key", "-t", "T-9", "-s", "s", cwd=repo)
    git("push", "-q", str(remote), f"HEAD:refs/heads/{key2['branch']}", cwd=repo)
    found = run_gitledger(
        "run-step", "-t", "T-9", "-s", "s", "-c", "branch:origin", "--json", "--", "false", cwd=repo
    )
    assert json.loads(found.stdout)["status"] == "already_existed"
    assert json.loads(found.stdout)["ref"].startswith(f"origin:refs/heads/{key2['branch']}@")
    unreachable = run_gitledger(
        "run-step", "-t", "T-8", "-s", "s", "-c", "branch:nowhere", "--", "true", cwd=repo
    )
    assert unreachable.returncode == 1 and "cannot list branches" in unreachable.stderr


def test_trailer_check_on_remote_tracking_branch(repo: Path, tmp_path: Path):
    key = run_json("key", "-t", "T-5", "-s", "commit", cwd=repo)
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    git("checkout", "-q", "-b", "work", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "x", "-m", f"Other: 1\n{key['trailer']}", cwd=repo)
    git("fetch", "-q", cwd=clone)
    found = run_gitledger(
        "run-step", "-t", "T-5", "-s", "commit", "-c", "trailer", "--json", "--", "false", cwd=clone
    )
    assert json.loads(found.stdout)["status"] == "already_existed"
    # a key merely mentioned in the body, not as a trailer, does not count
    key3 = run_json("key", "-t", "T-6", "-s", "commit", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", f"mentions {key3['trailer']} inline", cwd=repo)
    assert (
        json.loads(
            run_gitledger(
                "run-step", "-t", "T-6", "-s", "commit", "-c", "trailer", "--json", "--", "true", cwd=repo
            ).stdout
        )["status"]
        == "created"
    )


def test_show_log_resolve(repo: Path):
    key = json.loads(run_step(repo, "--json", "--", "true").stdout)["key"]
    shown = run_json("show", key, cwd=repo)
    assert shown["state"] == "done" and [e["state"] for e in shown["events"]] == ["attempting", "done"]
    assert shown["events"][0]["owner"]["pid"] > 0
    human = run_gitledger("show", key, cwd=repo).stdout
    assert "attempting" in human and "done" in human
    log = run_json("log", cwd=repo)
    assert [e["state"] for e in log] == ["done", "attempting"]  # newest first, like git log
    assert [e["state"] for e in run_json("log", "--reverse", cwd=repo)] == ["attempting", "done"]
    forgot = run_json("resolve", key, "--forget", cwd=repo)
    assert forgot["state"] == "none"
    assert json.loads(run_step(repo, "--json", "--", "true").stdout)["status"] == "created"
    assert run_gitledger("show", "nonsense", cwd=repo).returncode == 2
    bad = run_gitledger("resolve", key, cwd=repo)
    assert bad.returncode == 2 and "exactly one of --done and --forget" in bad.stderr
    assert run_gitledger("show", "a.b.0123456789abcdef01234567", cwd=repo).returncode == 2


def test_reconcile_settles_what_can_be_settled(repo: Path, tmp_path: Path):
    count = tmp_path / "count"
    made = 'echo x >> "$COUNT"; touch made.txt'
    for task, check, fault in (
        ("A", "file:made.txt", "after-effect"),
        ("B", "file:never.txt", "after-claim"),
        ("C", "ledger", "after-effect"),
    ):
        run_gitledger(
            "run-step",
            "-t",
            task,
            "-s",
            "s",
            "-c",
            check,
            "--",
            "sh",
            "-c",
            made,
            cwd=repo,
            env={"GITLEDGER_FAULT": fault, "COUNT": str(count)},
        )
    results = {r["key"].split(".")[0]: r["result"] for r in run_json("reconcile", cwd=repo)}
    assert results == {"a": "done", "b": "retryable", "c": "unconfirmed"}
    states = {e["task"]: e["state"] for e in run_json("list", cwd=repo)}
    assert states == {"A": "done", "B": "failed", "C": "attempting"}


def test_config_defaults_per_step(repo: Path, tmp_path: Path):
    (repo / ".gitledger.yml").write_text("steps:\n  s:\n    checks: [file:exists.txt]\n")
    (repo / "exists.txt").write_text("x")
    proc = run_step(repo, "--json", "--", "false")
    assert json.loads(proc.stdout)["status"] == "already_existed"


@pytest.mark.parametrize(
    "text,message",
    [
        ("steps: [unclosed\n", "line 2: invalid YAML"),
        ("lease: 900\nchekcs: 1\n", "line 2: unknown option 'chekcs' in the file"),
        ("steps:\n  s:\n    checks: [bogus]\n", "line 3: unknown check spec 'bogus'"),
        (
            "on_unconfirmed: sometimes\n",
            "line 1: on_unconfirmed is 'sometimes'; use one of: fail, retry, skip",
        ),
        ("lease: -1\n", "line 1: lease must be a positive number"),
        ("prefixes:\n  label: " + "x" * 40 + "\n", "label prefix"),
        ("github:\n  repo: not-a-repo\n", "must look like OWNER/NAME"),
        ("github:\n  api_url: http://evil.example/api\n", "line 2: github.api_url 'http://evil.example"),
        ("- a\n- b\n", "the file must be a mapping"),
    ],
)
def test_bad_config_is_one_clear_line(repo: Path, text: str, message: str):
    (repo / ".gitledger.yml").write_text(text)
    proc = run_step(repo, "--", "true")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and ".gitledger.yml" in proc.stderr and message in proc.stderr
