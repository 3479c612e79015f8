"""Security properties (see docs/security.md): tokens are never stored or printed; the ledger, which
anyone with push access can write, never makes gitledger run a command; and what such a writer *can*
do (suppress a step, stall it until its lease ends) is visible and repairable.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.fakegithub import FakeGitHub, drop_after_effect, status
from testing.repos import gitledger_argv
from tests.faults.forge import FAR_FUTURE, PAST, forge
from tests.faults.harness import KINDS, Run, Workbench
from tests.faults.tally import TALLY


@pytest.fixture
def secret_github() -> Iterator[FakeGitHub]:
    server = FakeGitHub(tokens=[f"ghp_{secrets.token_hex(18)}"])
    server.add_repo("acme/widgets")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def files_under(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


def all_objects(repo: Path) -> bytes:
    """Every object in the repository, reachable or not, decompressed."""
    return subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"], cwd=repo, capture_output=True
    ).stdout


def test_tokens_never_reach_the_ledger_the_repository_or_any_output(
    tmp_path: Path, secret_github: FakeGitHub
) -> None:
    token = secret_github.token
    assert token is not None
    wrong = f"ghp_{secrets.token_hex(18)}"
    bench = Workbench(tmp_path, secret_github)
    bench.go.touch()
    pr, comment = KINDS["github-pr"], KINDS["github-comment"]
    outputs: list[Run] = [
        bench.run_step(comment, fault="after-effect"),  # crash after posting
        bench.run_step(comment),  # already_existed
        bench.run_step(pr, task="T-1"),
    ]
    secret_github.inject("POST", r"/pulls$", drop_after_effect())  # created, answer lost
    outputs.append(bench.run_step(pr, task="T-2"))
    secret_github.inject("GET", r"/pulls", status(502), times=None)  # cannot tell
    outputs.append(bench.run_step(pr, task="T-3"))
    secret_github.clear_faults()
    for env_name, value in (("GITHUB_TOKEN", wrong), ("GH_TOKEN", wrong)):  # rejected token
        argv = bench.argv(pr, "T-4")
        env = {**bench.env(), "GITHUB_TOKEN": "", env_name: value}
        proc = subprocess.run(argv, cwd=bench.repo, env=env, capture_output=True, text=True, timeout=120)
        outputs.append(Run(proc.returncode, proc.stdout, proc.stderr))
        assert proc.returncode != 0 and "401" in proc.stderr, proc.stderr
    for args in (
        ["list", "--json"],
        ["log"],
        ["reconcile", "--json"],
        ["show", bench.step("github-pr", "T-1").key],
    ):
        outputs.append(bench.gitledger(*args))

    statuses = [json.loads(o.stdout).get("status") if o.stdout.strip() else o.returncode for o in outputs[:5]]
    assert statuses[:3] == [-9, "already_existed", "created"], [o.stderr for o in outputs]
    text = "\n".join(o.stdout + o.stderr for o in outputs)
    refs = [e["ref"] for e in bench.gitledger("list", "--json").json_list()]
    assert any(str(r).startswith(secret_github.url) for r in refs), refs  # GitHub data was recorded
    places = {
        "outputs": text.encode(),
        "objects": all_objects(bench.repo),
        "remote objects": all_objects(secret_github.bare_path()),
        **{str(p): p.read_bytes() for p in files_under(bench.repo)},
        **{str(p): p.read_bytes() for p in files_under(secret_github.bare_path())},
    }
    for secret in (token, wrong):
        leaked = [where for where, data in places.items() if secret.encode() in data]
        assert not leaked, leaked


def test_reconcile_never_runs_a_command_it_reads_from_the_ledger(tmp_path: Path) -> None:
    bench = Workbench(tmp_path)
    sentinel = tmp_path / "pwned"
    step = bench.step("ledger", "T-cmd")
    forge(bench.repo, step, "attempting", lease_until=PAST, checks=[f"cmd:touch {sentinel}", "cmd:id"])
    TALLY.add("inputs.bad")
    result = bench.gitledger("reconcile", "--json")
    assert result.returncode == 0, result.stderr
    assert not sentinel.exists()
    assert {"key": step.key, "result": "unconfirmed", "ref": None} in result.json_list()
    TALLY.add("inputs.sentinels", int(sentinel.exists()))


def test_reconcile_does_run_the_cmd_check_of_gitledger_yml(tmp_path: Path) -> None:
    """The positive control: the cmd kind's check lives in .gitledger.yml and reconcile uses it."""
    bench = Workbench(tmp_path)
    bench.go.touch()
    crashed = bench.run_step(KINDS["cmd"], fault="after-effect")
    assert crashed.returncode < 0
    step = bench.step("cmd")
    assert {"key": step.key, "result": "done", "ref": f"cmd/{step.key}"} in bench.gitledger(
        "reconcile", "--json"
    ).json_list()


def test_a_forged_done_suppresses_the_step_visibly_and_resolve_forget_undoes_it(tmp_path: Path) -> None:
    bench = Workbench(tmp_path)
    bench.go.touch()
    step = bench.step("file")
    forge(bench.repo, step, "done", outcome="created", ref="https://example.invalid/forged")
    skipped = bench.run_step(KINDS["file"])
    assert (skipped.status, skipped.json["ref"]) == ("skipped", "https://example.invalid/forged")
    assert bench.effects("file") == 0  # suppressed: nothing ran
    log = bench.gitledger("log", step.key, "--json").json_list()
    assert [e["owner"]["host"] for e in log] == ["attacker.invalid"]  # who wrote it is on record
    assert bench.gitledger("resolve", step.key, "--forget").returncode == 0
    assert bench.run_step(KINDS["file"]).status == "created" and bench.effects("file") == 1


@pytest.mark.parametrize("lease", [FAR_FUTURE, None])
def test_a_forged_claim_stalls_the_step_until_resolved(tmp_path: Path, lease: str | None) -> None:
    bench = Workbench(tmp_path)
    bench.go.touch()
    step = bench.step("file")
    forge(
        bench.repo, step, "attempting", checks=["file:out/{key}"], **({"lease_until": lease} if lease else {})
    )
    stalled = bench.run_step(KINDS["file"])
    assert (stalled.returncode, stalled.status) == (75, "in_progress")
    assert "attacker.invalid" in stalled.json["message"]
    # the claim looks held, so forgetting it needs --force: a person decides it is forged
    assert bench.gitledger("resolve", step.key, "--forget").returncode == 75
    assert bench.gitledger("resolve", step.key, "--forget", "--force").returncode == 0
    assert bench.run_step(KINDS["file"]).status == "created" and bench.effects("file") == 1


def test_an_expired_forged_claim_is_taken_over_after_querying_reality(tmp_path: Path) -> None:
    bench = Workbench(tmp_path)
    bench.go.touch()
    step = bench.step("file")
    forge(bench.repo, step, "attempting", lease_until=PAST, checks=["file:out/{key}"])
    assert bench.run_step(KINDS["file"]).status == "created" and bench.effects("file") == 1


def test_gitledger_never_passes_the_guarded_command_through_a_shell(tmp_path: Path) -> None:
    """argv goes to exec as given: a single argument with shell syntax stays one literal argument."""
    bench = Workbench(tmp_path)
    sentinel = tmp_path / "pwned"
    argv = gitledger_argv(
        "run-step", "-t", "t", "-s", "s", "--json", "--", "printf", "%s", f"$(touch {sentinel})"
    )
    proc = subprocess.run(argv, cwd=bench.repo, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and f"$(touch {sentinel})" in proc.stderr
    assert not sentinel.exists()


def test_audit_flags_a_forged_done_whose_pull_request_does_not_exist(
    tmp_path: Path, github: FakeGitHub
) -> None:
    import re

    bench = Workbench(tmp_path, github)
    bench.go.touch()
    real = bench.run_step(KINDS["github-pr"], task="T-real")
    assert real.status == "created", real.stderr
    forged_ref = re.sub(r"/pull/\d+$", "/pull/999", str(real.json["ref"]))
    assert forged_ref != real.json["ref"]
    victim = bench.step("github-pr", "T-victim")
    forge(bench.repo, victim, "done", outcome="created", ref=forged_ref)
    assert bench.run_step(KINDS["github-pr"], task="T-victim").status == "skipped"  # suppressed...
    audit = bench.gitledger("audit", "--json")
    assert audit.returncode == 0, audit.stderr
    missing = json.loads(audit.stdout)["missing_refs"]
    assert [(m["key"], m["number"]) for m in missing] == [(victim.key, 999)]  # ...and flagged
