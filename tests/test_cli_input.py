"""Bad input to the CLI (found by fuzzing): one clear line on stderr, a non-zero exit, no traceback, no
"internal error", no hang, and the ledger keeps what it held."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitledger.core.keys import StepKey
from testing.repos import gitledger_argv, ledger_lock_held, run_gitledger, run_json, tmpfs_works
from tests.faults.forge import FAR_FUTURE, forge


def assert_one_clean_line(proc: subprocess.CompletedProcess[str], code: int, *parts: str) -> None:
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith("gitledger: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    for part in parts:
        assert part in proc.stderr, proc.stderr


def run_step_waiting(repo: Path, lock_timeout: str, *command: str) -> subprocess.CompletedProcess[str]:
    """``run-step -t T -s s -- COMMAND`` (default ``true``) with GITLEDGER_LOCK_TIMEOUT set."""
    env = {"GITLEDGER_LOCK_TIMEOUT": lock_timeout}
    return run_gitledger(
        "run-step", "-t", "T", "-s", "s", "--", *(command or ["true"]), cwd=repo, env=env, timeout=20
    )


@pytest.fixture
def held_ledger(repo: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the ledger lock (and with it every key's lock) of ``repo``."""
    with ledger_lock_held(repo) as holder:
        yield holder


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "1e999", "99999999999", "abc", "86401"])
def test_a_lock_timeout_that_is_not_a_sane_number_of_seconds_is_a_usage_error(
    repo: Path, held_ledger: subprocess.Popen[str], value: str
) -> None:
    proc = run_step_waiting(repo, value)
    assert_one_clean_line(proc, 2, f"GITLEDGER_LOCK_TIMEOUT={value!r}", "from 0 to 86400")


def test_a_bad_lock_timeout_is_refused_before_the_command_runs(repo: Path, tmp_path: Path) -> None:
    """Not only when a lock is found held (after the command ran, the step would stay unrecorded)."""
    ran = tmp_path / "ran"
    proc = run_step_waiting(repo, "x", "touch", str(ran))
    assert_one_clean_line(proc, 2, "GITLEDGER_LOCK_TIMEOUT='x'")
    assert not ran.exists() and run_json("list", cwd=repo) == []


def test_a_lock_timeout_of_zero_tries_once_and_does_not_wait(
    repo: Path, held_ledger: subprocess.Popen[str]
) -> None:
    proc = run_step_waiting(repo, "0")
    assert_one_clean_line(proc, 1, f"is held by process {held_ledger.pid}")


@pytest.mark.parametrize("value", ["1e-9", "0.000001", "0.05"])
def test_a_tiny_lock_timeout_runs_out_cleanly(
    repo: Path, held_ledger: subprocess.Popen[str], value: str
) -> None:
    """The alarm of a tiny wait rings at once: it ends the wait, never leaks as an internal error."""
    for _ in range(3):
        proc = run_step_waiting(repo, value)
        assert_one_clean_line(proc, 1, f"by process {held_ledger.pid}")


@pytest.mark.parametrize(
    "script,problem",
    [
        ('rm -f "$GITLEDGER_RESULT"; mkdir "$GITLEDGER_RESULT"', "is not a regular file"),
        ('rm -f "$GITLEDGER_RESULT"; mkfifo "$GITLEDGER_RESULT"', "is not a regular file"),
        ('rm -f "$GITLEDGER_RESULT"; ln -s "$SECRET" "$GITLEDGER_RESULT"', "is a symbolic link"),
        ('head -c 70000 /dev/zero > "$GITLEDGER_RESULT"', "is larger than 64 KiB"),
    ],
)
def test_a_result_that_is_not_a_small_regular_file_is_left_out_and_the_step_is_done(
    repo: Path, tmp_path: Path, script: str, problem: str
) -> None:
    """The command succeeded: the step is done (a rerun skips it), whatever it left at the result."""
    secret = tmp_path / "secret"
    secret.write_text("not-for-the-ledger\n")
    env = {"SECRET": str(secret)}
    proc = run_gitledger(
        "run-step", "--json", "-t", "T", "-s", "s", "--", "sh", "-c", script, cwd=repo, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    warning = (
        f"the command succeeded but what it left at $GITLEDGER_RESULT {problem}; "
        "the step is recorded done without a ref"
    )
    assert proc.stderr == f"gitledger: warning: {warning}\n"
    printed = json.loads(proc.stdout)  # a program reading the JSON sees the warning too
    assert printed["status"] == "created" and printed["ref"] is None and printed["warnings"] == [warning]
    assert [(e["state"], e["ref"]) for e in run_json("list", cwd=repo)] == [("done", None)]
    again = run_json("run-step", "-t", "T", "-s", "s", "--", "false", cwd=repo)
    assert again["status"] == "skipped"


def test_a_result_of_at_most_64_kib_is_the_ref(repo: Path) -> None:
    script = 'printf "%65530s" x > "$GITLEDGER_RESULT"'
    done = run_json("run-step", "-t", "T", "-s", "s", "--", "sh", "-c", script, cwd=repo)
    assert done["status"] == "created" and done["ref"] == "x"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--content-file", ""], "--content-file is given an empty path; give a file's path, or '-'"),
        (["--content-file", "/dev/zero"], "--content-file /dev/zero is larger than 16 MiB"),
        (["--content-file", "."], "cannot read --content-file .: Is a directory"),
    ],
)
@pytest.mark.parametrize("command", [["key"], ["run-step"]])
def test_a_content_file_that_cannot_be_hashed_is_one_line(
    repo: Path, tmp_path: Path, command: list[str], args: list[str], message: str
) -> None:
    ran = tmp_path / "ran"
    tail = ["--", "touch", str(ran)] if command == ["run-step"] else []
    proc = run_gitledger(*command, "-t", "T", "-s", "s", *args, *tail, cwd=repo)
    assert_one_clean_line(proc, 2, message)
    assert not ran.exists() and run_json("list", cwd=repo) == []


@pytest.mark.parametrize("command", [["key"], ["run-step"]])
def test_content_from_closed_standard_input_is_an_error_not_empty_content(
    repo: Path, tmp_path: Path, command: list[str]
) -> None:
    ran = tmp_path / "ran"
    tail = ["--", "touch", str(ran)] if command == ["run-step"] else []
    argv = [*gitledger_argv(*command, "-t", "T", "-s", "s", "--content-file", "-", *tail)]
    proc = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", *argv], cwd=repo, capture_output=True, text=True, check=False
    )
    assert_one_clean_line(proc, 2, "--content-file - reads standard input, which is closed")
    assert not ran.exists() and run_json("list", cwd=repo) == []


def test_too_much_standard_input_is_refused_by_run_step_too(repo: Path) -> None:
    """The fast path read 16 MiB + 1 bytes, gave up, and the full command read what was left of
    standard input (nothing) and hashed that: two different large contents made one key, and the
    second step was 'skipped'."""
    big = "a" * (16 * 1024 * 1024) + "b"
    proc = run_gitledger(
        "run-step", "-t", "T", "-s", "big", "--content-file", "-", "--", "true", cwd=repo, input=big
    )
    assert_one_clean_line(proc, 2, "larger than 16 MiB")
    assert run_json("list", cwd=repo) == []


def test_content_from_standard_input_is_still_read(repo: Path) -> None:
    by_stdin = run_gitledger(
        "key", "--json", "-t", "T", "-s", "s", "--content-file", "-", cwd=repo, input="x\n"
    )
    assert by_stdin.returncode == 0
    by_text = run_json("key", "-t", "T", "-s", "s", "--content", "x\n", cwd=repo)
    assert json.loads(by_stdin.stdout)["key"] == by_text["key"]


def test_resolve_refuses_a_ref_longer_than_run_step_keeps(repo: Path) -> None:
    failed = run_gitledger("run-step", "--json", "-t", "T", "-s", "s", "--", "false", cwd=repo)
    key = json.loads(failed.stdout)["key"]
    proc = run_gitledger("resolve", key, "--done", "--ref", "x" * 70_000, cwd=repo)
    assert_one_clean_line(proc, 2, "--ref is longer than 64 KiB")
    assert [e["state"] for e in run_json("list", cwd=repo)] == ["failed"]


@pytest.mark.parametrize("ref", ["a\nb", "a\x1b[31mb", "tab\there", "del\x7f"])
def test_resolve_refuses_a_ref_with_a_control_character(repo: Path, ref: str) -> None:
    failed = run_gitledger("run-step", "--json", "-t", "T", "-s", "s", "--", "false", cwd=repo)
    key = json.loads(failed.stdout)["key"]
    proc = run_gitledger("resolve", key, "--done", "--ref", ref, cwd=repo)
    assert_one_clean_line(proc, 2, "--ref", "contains a control character")
    assert [e["state"] for e in run_json("list", cwd=repo)] == ["failed"]  # unchanged


@pytest.mark.parametrize("option", ["--task", "--profile"])
def test_mcp_proxy_refuses_a_name_with_a_control_character(repo: Path, option: str) -> None:
    proc = run_gitledger("mcp-proxy", option, "a\nb", "--", "cat", cwd=repo, input="", timeout=20)
    assert_one_clean_line(proc, 2, f"{option} 'a\\nb' contains a control character")


def run_to(stdout: int, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """gitledger with its standard output on ``stdout`` (a descriptor), stderr captured."""
    return subprocess.run(
        gitledger_argv(*args), cwd=repo, stdout=stdout, stderr=subprocess.PIPE, text=True, check=False
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_standard_output_is_one_line_and_the_step_stays_done(repo: Path) -> None:
    with open("/dev/full", "w") as full:
        step = run_to(full.fileno(), repo, "run-step", "--json", "-t", "T", "-s", "s", "--", "true")
        assert_one_clean_line(step, 1, "cannot write to standard output: No space left on device")
        listed = run_to(full.fileno(), repo, "list")
        assert_one_clean_line(listed, 1, "cannot write to standard output: No space left on device")
    assert [e["state"] for e in run_json("list", cwd=repo)] == ["done"]
    assert run_json("run-step", "-t", "T", "-s", "s", "--", "false", cwd=repo)["status"] == "skipped"


@pytest.mark.parametrize(
    "args", [["list", "--json"], ["run-step", "--json", "-t", "T", "-s", "s", "--", "true"]]
)
def test_a_closed_pipe_on_standard_output_ends_quietly(repo: Path, args: list[str]) -> None:
    """The reader stopped reading (``| head``): exit 1 without a word, as click does; no internal error."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = run_to(write, repo, *args)
    finally:
        os.close(write)
    assert proc.returncode == 1 and proc.stderr == ""


def test_a_file_where_the_key_locks_folder_belongs_is_named_with_what_to_do(
    repo: Path, tmp_path: Path
) -> None:
    assert run_json("run-step", "-t", "T", "-s", "first", "--", "true", cwd=repo)["status"] == "created"
    locks = repo / ".git" / "gitledger.locks"
    for child in locks.iterdir():
        child.unlink()
    locks.rmdir()
    locks.write_text("someone's file\n")
    ran = tmp_path / "ran"
    proc = run_gitledger("run-step", "-t", "T", "-s", "second", "--", "touch", str(ran), cwd=repo)
    assert_one_clean_line(proc, 1, f"{locks} is not a directory", f"mv {locks} {locks}.old")
    assert not ran.exists() and locks.read_text() == "someone's file\n"
    assert [e["step"] for e in run_json("list", cwd=repo)] == ["first"]


@pytest.mark.parametrize("pad", ["{} ", " {}", "\t{}"])
@pytest.mark.parametrize("action", ["--done", "--forget"])
def test_resolve_says_a_key_with_spaces_around_it_is_not_a_key(repo: Path, pad: str, action: str) -> None:
    key = run_json("run-step", "-t", "T", "-s", "s", "--", "false", cwd=repo)["key"]
    proc = run_gitledger("resolve", pad.format(key), action, cwd=repo)
    assert_one_clean_line(proc, 2, "is not a gitledger key: it has spaces around it")
    assert "damaged" not in proc.stderr
    assert [e["state"] for e in run_json("list", cwd=repo)] == ["failed"]  # unchanged


def test_mcp_proxy_refuses_a_bad_lock_timeout_before_relaying(repo: Path) -> None:
    proc = run_gitledger(
        "mcp-proxy",
        "--task",
        "t",
        "--",
        "cat",
        cwd=repo,
        env={"GITLEDGER_LOCK_TIMEOUT": "nan"},
        input="",
        timeout=20,
    )
    assert_one_clean_line(proc, 2, "GITLEDGER_LOCK_TIMEOUT='nan'")


@pytest.mark.parametrize("args", [["list"], ["run-step", "-t", "T", "-s", "s"], ["audit"]])
def test_a_repo_path_too_long_for_the_system_is_one_line(repo: Path, tmp_path: Path, args: list[str]) -> None:
    """The kernel refuses a name over 255 bytes (ENAMETOOLONG): that was an internal error."""
    ran = tmp_path / "ran"
    tail = ["--", "touch", str(ran)] if args[0] == "run-step" else []
    proc = run_gitledger(*args, "--repo", "x" * 5000, *tail, cwd=repo)
    assert_one_clean_line(proc, 2, "cannot open 'xxx", "': File name too long; pass --repo with a repository")
    assert not ran.exists()


@pytest.mark.parametrize(
    "check,via_config,problem",
    [
        ("file:" + "x" * 5000, False, "cannot look for the file: File name too long"),
        ("cmd:" + "x" * 140_000, True, "cannot start the check command: Argument list too long"),
    ],
)
def test_a_local_check_the_system_refuses_cannot_tell_and_does_nothing(
    repo: Path, tmp_path: Path, check: str, via_config: bool, problem: str
) -> None:
    """A file: path or cmd: command too long for the kernel was an internal error (an OSError)."""
    ran = tmp_path / "ran"
    if via_config:  # a command this long cannot be an argument of gitledger itself
        (repo / ".gitledger.yml").write_text(f'steps:\n  s: {{checks: ["{check}"]}}\n')
    options = [] if via_config else ["-c", check]
    proc = run_gitledger("run-step", "-t", "T", "-s", "s", *options, "--", "touch", str(ran), cwd=repo)
    assert_one_clean_line(proc, 1, "cannot tell whether", f"failed: {problem}; nothing was done")
    assert not ran.exists() and [e["state"] for e in run_json("list", cwd=repo)] == ["none"]


def test_a_full_disk_is_one_line_and_the_ledger_keeps_what_it_held(tmp_path: Path) -> None:
    """No space left for the journal to grow or for a fold's pack was an internal error (a bug)."""
    disk, ran = tmp_path / "disk", tmp_path / "ran"
    disk.mkdir()
    if not tmpfs_works(disk):
        pytest.skip("needs unshare and mount (a tmpfs in a mount namespace of its own: root)")
    gl = shlex.join(gitledger_argv())
    # The journal keeps zeros ahead for its next events; cut them off, so the next event must grow it.
    cut = "p = '.git/gitledger.journal'; os.truncate(p, len(open(p, 'rb').read().rstrip(bytes(1))) + 1)"
    script = f"""
        mount -t tmpfs -o size=2m tmpfs disk && cd disk && git init -q r && cd r || exit 99
        {gl} run-step -t T -s first -- true 2>/dev/null || exit 98
        {shlex.join([sys.executable, "-c", "import os; " + cut])} || exit 97
        head -c 4m /dev/zero > ../filler 2>/dev/null
        {gl} run-step -t T -s second -- touch {shlex.quote(str(ran))}; echo "exit $?" >&2
        {gl} flush; echo "exit $?" >&2
        rm ../filler && {gl} list --json
    """
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    full = (
        "gitledger: the disk is full (No space left on device); the ledger keeps what it recorded before: "
        "free space, then run the command again\n"
    )
    assert proc.stderr == f"{full}exit 1\n{full}exit 1\n", proc.stderr
    assert not ran.exists()
    assert [(e["step"], e["state"]) for e in json.loads(proc.stdout)] == [("first", "done")]


@pytest.mark.parametrize("name", ["../..", "a/..", "./b", "a/."])
@pytest.mark.parametrize("where", ["option", "config"])
def test_a_github_repo_of_dot_segments_is_refused_before_any_request(
    repo: Path, name: str, where: str
) -> None:
    """'../..' passed as OWNER/NAME: the API path /repos/../../issues/1/comments leaves /repos."""
    env = {"GITHUB_TOKEN": "t", "GITHUB_API_URL": "http://127.0.0.1:9"}  # nothing listens there
    if where == "config":
        (repo / ".gitledger.yml").write_text(f'github: {{repo: "{name}"}}\n')
    option = ["--github-repo", name] if where == "option" else []
    proc = run_gitledger(
        "github", "comment", "1", "-t", "T", "-s", "s", "--body", "x", *option, cwd=repo, env=env
    )
    assert_one_clean_line(proc, 2, f"{name}' must look like OWNER/NAME")


@pytest.mark.parametrize(
    "fields", [{"checks": [5, None]}, {"owner": "x"}, {"owner": [1], "checks": {"a": 1}}]
)
def test_show_and_log_print_an_event_with_fields_of_the_wrong_type(
    repo: Path, fields: dict[str, object]
) -> None:
    """Anyone who can push the ledger refs can write any event: one whose ``checks`` held a number or
    whose ``owner`` was not an object made ``show KEY`` and ``log`` an internal error."""
    step = StepKey.derive("T", "s", None)
    forge(repo, step, "attempting", lease_until=FAR_FUTURE, **fields)
    for args in (["show", step.key], ["log", step.key], ["log"]):
        proc = run_gitledger(*args, cwd=repo)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert f"lease until {FAR_FUTURE}; checks " in proc.stdout


@pytest.mark.parametrize(
    "name,value,limit",
    [
        ("GITLEDGER_GITHUB_TIMEOUT", "99999999999999999999", "from 1 to 86400"),
        ("GITLEDGER_GITHUB_RETRIES", "99999999999999999999", "from 0 to 1000"),
        ("GITLEDGER_GITHUB_MAX_WAIT", "1e12", "from 0 to 86400"),
    ],
)
def test_a_github_tuning_value_past_its_limit_is_a_usage_error(
    repo: Path, name: str, value: str, limit: str
) -> None:
    """A huge timeout overflowed the clock (an internal error); huge retries never ended."""
    env = {"GITHUB_TOKEN": "test-token", "GITHUB_API_URL": "http://127.0.0.1:9", name: value}
    args = ["github", "comment", "1", "-t", "T", "-s", "s", "--body", "x", "--github-repo", "o/r"]
    proc = run_gitledger(*args, cwd=repo, env=env, timeout=30)
    assert_one_clean_line(proc, 2, f"{name}={value!r} is not a number {limit}; fix or unset it")


def test_a_command_path_too_long_for_the_system_is_not_found(repo: Path) -> None:
    """A path component over 255 bytes (ENAMETOOLONG) was an internal error."""
    program = "/tmp/" + "x" * 300
    proc = run_gitledger("run-step", "-t", "T", "-s", "s", "--", program, cwd=repo)
    assert_one_clean_line(proc, 2, f"command {program!r} not found; check the path")
    assert run_json("list", cwd=repo) == []


@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_hooks_with_a_repo_path_too_long_for_the_system_is_one_line(repo: Path, command: str) -> None:
    """ENAMETOOLONG was an internal error here too."""
    proc = run_gitledger("hooks", command, "--repo", "/tmp/" + "x" * 300, cwd=repo)
    assert_one_clean_line(proc, 2, "xxx is not a directory; pass --repo a path inside a git repository")
    assert not (repo / ".git" / "hooks" / "pre-push").exists()


@pytest.mark.parametrize("fastpath", [True, False])
def test_an_empty_remote_is_a_usage_error_not_local_claims(
    repo: Path, tmp_path: Path, fastpath: bool
) -> None:
    """``--remote "$REMOTE"`` with REMOTE unset ran the step with local claims, which do not keep two
    clones from both acting: remote claim mode was dropped without a word."""
    ran = tmp_path / "ran"
    env = {} if fastpath else {"GITLEDGER_NO_FASTPATH": "1"}
    proc = run_gitledger(
        "run-step", "-t", "T", "-s", "s", "--remote", "", "--", "touch", str(ran), cwd=repo, env=env
    )
    assert_one_clean_line(proc, 2, "--remote is given an empty name; give a remote's name (see 'git remote')")
    assert not ran.exists() and run_json("list", cwd=repo) == []


def test_log_of_an_empty_key_is_a_usage_error_not_the_whole_ledger(repo: Path) -> None:
    """``gitledger log "$KEY"`` with KEY unset printed every key's history, as ``show ''`` does not."""
    run_json("run-step", "-t", "T", "-s", "s", "--", "true", cwd=repo)
    proc = run_gitledger("log", "", cwd=repo)
    assert_one_clean_line(proc, 2, "'' is not a gitledger key")
    assert proc.stdout == ""


def test_reconcile_settles_the_others_when_one_check_cannot_query_reality(repo: Path) -> None:
    """The first entry whose check erred ended reconcile: every entry after it stayed half-done, and
    --json printed nothing."""
    (repo / ".gitledger.yml").write_text('steps:\n  broken: {checks: ["cmd:exit 5"]}\n')
    (repo / "made.txt").write_text("x")
    for step, checks in (("broken", ["ledger"]), ("fine", ["file:made.txt"])):
        forge(
            repo,
            StepKey.derive("T", step, None),
            "attempting",
            lease_until="2001-01-01T00:00:00.000Z",
            checks=checks,
        )
    proc = run_gitledger("reconcile", "--json", cwd=repo)
    assert_one_clean_line(proc, 1, "1 of 2 entries left as they were (result 'unknown'), e.g. cannot tell")
    results = {r["key"].split(".")[1]: r["result"] for r in json.loads(proc.stdout)}
    assert results == {"broken": "unknown", "fine": "done"}
    assert {e["step"]: e["state"] for e in run_json("list", cwd=repo)} == {
        "broken": "attempting",
        "fine": "done",
    }
