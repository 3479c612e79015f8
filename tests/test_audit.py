"""``gitledger audit`` against the local fake GitHub: real PyGithub over HTTP, real git, real processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from gitledger.core.keys import Names, StepKey, branch_for, label_for, marker_for
from gitledger.features.audit.evidence import (
    Ident,
    Pull,
    branch_ident,
    group_pulls,
    label_ident,
    pull_evidence,
)
from testing.fakegithub import FakeGitHub
from testing.repos import git, run_gitledger
from tests.audit_support import (
    KEY_A,
    KEY_B,
    KEY_C,
    audit,
    by_key,
    make_pr,
    make_scenario,
    numbers,
    prepare_work,
)
from tests.github_support import REPO, TOKEN, client, fast_env


@pytest.fixture
def work(github: FakeGitHub, tmp_path: Path) -> Path:
    return prepare_work(github, tmp_path / "work")


@pytest.fixture
def scenario(github: FakeGitHub, work: Path) -> dict[str, list[int]]:
    """3 PRs linked by KEY_A's label only, 2 by KEY_B's trailer only, 1 unrelated."""
    return make_scenario(github, work)


# -- evidence and grouping (pure) ---------------------------------------------------------------------------


def test_evidence_shapes() -> None:
    names = Names()
    step = StepKey.derive("T-9", "Open PR")
    assert label_ident(step.label, names) == Ident(step.short_digest)
    assert label_ident(step.label.upper(), names) == Ident(step.short_digest)  # labels ignore case
    assert label_ident("gitledger:abc", names) is None  # too short for the label_for shape
    assert label_ident("bug", names) is None
    exact = branch_ident(step.branch, names)
    assert exact == Ident(step.digest[:12], "t-9", "open-pr")
    assert branch_ident(step.branch + "-2", names) == exact  # the same family
    assert branch_ident(step.branch + "/retry", names) == exact
    assert branch_ident("feature/open-pr", names) is None
    custom = Names(branch_prefix="bots/", label_prefix="k-")
    assert branch_ident(branch_for(step.key, custom), custom) == exact
    assert label_ident(label_for(step.key, custom), custom) == Ident(step.short_digest)


def _pull(number: int, **kw: Any) -> Pull:
    fields: dict[str, Any] = {
        "number": number,
        "url": f"https://example.invalid/pull/{number}",
        "state": "open",
        "title": "",
        "body": "",
        "head_ref": f"b{number}",
        "base_ref": "main",
        "head_sha": "",
        "base_sha": "",
        "labels": (),
    }
    fields.update(kw)
    return Pull(**fields)


def test_grouping_joins_compatible_evidence_and_flags_conflicts() -> None:
    names = Names()
    a = StepKey.derive("T-1", "open-pr")
    pulls = [
        _pull(1, body=marker_for(a.key)),
        _pull(2, labels=(a.label,)),
        _pull(3, head_ref=a.branch + "-retry"),
        _pull(4, labels=("gitledger:" + "f" * 24,)),
        _pull(5),
    ]
    evidence = {p.number: pull_evidence(p, (), names) for p in pulls}
    evidence = {n: e for n, e in evidence.items() if e}
    groups = group_pulls(pulls, evidence)
    assert [[p.number for p in g.pulls] for g in groups] == [[1, 2, 3], [4]]
    assert groups[0].key == a.key and not groups[0].ambiguous
    assert {k for k, _ in groups[0].evidence} == {"marker", "label", "branch"}

    # A forged branch that shares the first 12 digits with two different keys' labels: one group,
    # flagged ambiguous, with no single key.
    d = a.digest[:12]
    forged = [
        _pull(1, labels=("gitledger:" + d + "0" * 12,)),
        _pull(2, labels=("gitledger:" + d + "1" * 12,)),
        _pull(3, head_ref=f"gitledger/x/y-{d}"),
    ]
    groups = group_pulls(forged, {p.number: pull_evidence(p, (), names) for p in forged})
    assert len(groups) == 1 and groups[0].ambiguous and groups[0].key is None


# -- the audit against the fake GitHub ----------------------------------------------------------------------


def test_groups_by_label_and_by_trailer_only(
    github: FakeGitHub, work: Path, scenario: dict[str, list[int]]
) -> None:
    code, report, _ = audit(github, work)
    assert code == 0
    assert report["pulls"] == 6 and report["groups"] == 2
    assert len(report["duplicates"]) == 2
    label_group, trailer_group = report["duplicates"]
    assert numbers(label_group) == scenario["a"]
    assert label_group["evidence"] == [{"kind": "label", "value": label_for(KEY_A), "prs": scenario["a"]}]
    assert label_group["key"] is None  # a label names the digest, not the whole key
    assert label_group["digest"] == KEY_A.rsplit(".", 1)[1]
    assert numbers(trailer_group) == scenario["b"]
    assert trailer_group["key"] == KEY_B
    assert trailer_group["evidence"] == [{"kind": "trailer", "value": KEY_B, "prs": scenario["b"]}]
    assert all(
        pr["state"] == "open" and pr["url"].endswith(f"/pull/{pr['number']}") for pr in trailer_group["prs"]
    )
    assert report["trailers"]["via"] == "git"
    assert report["api_calls"] <= 3  # one page of PRs, the repository (for its clone URL)
    assert report["unclaimed"] is None and report["stuck"] is None  # no ledger in this repository
    # the PR heads were fetched into the repository under refs/gitledger/audit/
    assert git("for-each-ref", "--count=1", "refs/gitledger/audit/pull/", cwd=work)


def test_fail_on_duplicates_and_clean_repository(github: FakeGitHub, work: Path) -> None:
    make_pr(github, work, "unrelated")
    make_pr(github, work, "solo", body=f"Hello\n\n{marker_for(KEY_C)}\n")
    code, report, _ = audit(github, work, "--fail-on-duplicates")
    assert code == 0 and report["duplicates"] == [] and report["groups"] == 1

    make_pr(github, work, "again", body=marker_for(KEY_C))
    code, report, _ = audit(github, work, "--fail-on-duplicates")
    assert code == 1
    assert [(g["key"], numbers(g)) for g in report["duplicates"]] == [(KEY_C, [2, 3])]
    assert report["duplicates"][0]["evidence"] == [{"kind": "marker", "value": KEY_C, "prs": [2, 3]}]


def test_closed_unmerged_and_merged_duplicates_are_still_reported(
    github: FakeGitHub, work: Path, scenario: dict[str, list[int]]
) -> None:
    repo = client(github).get_repo(REPO)
    first, second, third = scenario["a"]
    repo.get_pull(first).edit(state="closed")
    github.merge_pr(second)
    code, report, _ = audit(github, work, "--fail-on-duplicates")
    assert code == 1
    group = by_key(report)[None]
    assert [(pr["number"], pr["state"]) for pr in group["prs"]] == [
        (first, "closed"),
        (second, "merged"),
        (third, "open"),
    ]
    assert group["keep"] == third


def test_close_duplicates_keeps_the_oldest_open_and_is_idempotent(
    github: FakeGitHub, work: Path, scenario: dict[str, list[int]]
) -> None:
    repo = client(github).get_repo(REPO)
    code, report, _ = audit(github, work, "--close-duplicates")
    assert code == 0
    first, second, third = scenario["a"]
    b1, b2 = scenario["b"]
    closed = {item["number"]: item for item in report["closed"]}
    assert sorted(closed) == [second, third, b2]
    assert all(item["result"] == "closed" and item["comment"] == "posted" for item in closed.values())
    assert closed[third]["duplicate_of"] == first and closed[b2]["duplicate_of"] == b1
    states = {p["number"]: p["state"] for p in github.pulls()}
    assert [states[n] for n in (first, second, third, b1, b2)] == [
        "open",
        "closed",
        "closed",
        "open",
        "closed",
    ]
    for number in (second, third, b2):
        comments = github.comments(number)
        assert len(comments) == 1
        assert "gitledger-audit:duplicate" in comments[0]["body"] and " closed -->" in comments[0]["body"]
    assert github.comments(first) == [] and github.comments(b1) == []

    github.reset_requests()
    code, report, _ = audit(github, work, "--close-duplicates")
    assert code == 0 and report["closed"] == []
    assert github.count_requests("POST") == 0 and github.count_requests("PATCH") == 0
    assert len(report["duplicates"]) == 2  # closed duplicates stay duplicates
    assert [pr["state"] for pr in by_key(report)[KEY_B]["prs"]] == ["open", "closed"]

    # A person reopens one: the audit respects that and does not close it again.
    repo.get_pull(third).edit(state="open")
    code, report, _ = audit(github, work, "--close-duplicates")
    assert [(i["number"], i["result"]) for i in report["closed"]] == [(third, "kept")]
    assert github.pulls()[third - 1]["state"] == "open" and len(github.comments(third)) == 1


def test_close_duplicates_finishes_after_a_crash_between_comment_and_close(
    github: FakeGitHub, work: Path, scenario: dict[str, list[int]]
) -> None:
    first, second, _ = scenario["a"]
    # what a run killed after posting its comment leaves behind: the marker, the PR still open
    repo = client(github).get_repo(REPO)
    repo.get_issue(second).create_comment(f"earlier\n\n<!-- gitledger-audit:duplicate key=x of=#{first} -->")
    code, report, _ = audit(github, work, "--close-duplicates")
    assert code == 0
    item = next(i for i in report["closed"] if i["number"] == second)
    assert (item["result"], item["comment"]) == ("closed", "existing")
    assert len(github.comments(second)) == 1
    assert github.pulls()[second - 1]["state"] == "closed"


def test_step_summary_is_appended_and_never_holds_the_token(
    github: FakeGitHub, work: Path, scenario: dict[str, list[int]], tmp_path: Path
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    code, _, _ = audit(github, work, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert code == 0
    text = summary.read_text()
    assert text.startswith("# earlier step\n")  # appended, as GitHub expects
    assert "## gitledger audit: acme/widgets" in text and "### Duplicate pull requests" in text
    assert KEY_B in text and f"[#{scenario['a'][0]}](" in text
    assert TOKEN not in text

    # the table output for people
    proc = run_gitledger("audit", "--github-repo", REPO, cwd=work, env=fast_env(github))
    assert proc.returncode == 0, proc.stderr
    assert "2 with duplicates" in proc.stdout and KEY_B in proc.stdout
    assert TOKEN not in proc.stdout + proc.stderr


def test_api_trailer_fallback_is_capped(
    github: FakeGitHub, work: Path, scenario: dict[str, list[int]]
) -> None:
    _, report, _ = audit(github, work, "--trailers", "api")
    assert report["trailers"] == {"via": "api", "scanned": 6, "skipped": 0, "git_processes": 0}
    assert by_key(report)[KEY_B]["evidence"][0]["kind"] == "trailer"
    assert report["api_calls_detail"]["by_method"]["GET"] == report["api_calls"] >= 6

    _, report, stderr = audit(github, work, "--trailers", "api", "--commit-api-limit", "2")
    assert report["trailers"]["scanned"] == 2 and report["trailers"]["skipped"] == 4
    assert "--commit-api-limit 2" in stderr and report["warnings"]


def test_git_failure_falls_back_to_the_api(github: FakeGitHub, tmp_path: Path, work: Path) -> None:
    make_pr(github, work, "fix/b0", message=f"x\n\nGitledger-Key: {KEY_B}\n")
    make_pr(github, work, "fix/b1", message=f"x\n\nGitledger-Key: {KEY_B}\n")
    outside = tmp_path / "outside"  # not a git repository: a temporary partial clone is used
    outside.mkdir()
    git("config", "uploadpack.allowFilter", "true", cwd=github.bare_path(REPO))  # as GitHub: commits only
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    _, report, _ = audit(github, outside, env={"TMPDIR": str(scratch)})
    assert report["trailers"]["via"] == "git" and [g["key"] for g in report["duplicates"]] == [KEY_B]
    assert report["trailers"]["git_processes"] <= 6
    assert list(scratch.iterdir()) == []  # the temporary clone is gone

    # git may not fetch over the file protocol here: the commits are listed through the API instead
    no_file = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "protocol.file.allow",
        "GIT_CONFIG_VALUE_0": "never",
    }
    _, report, stderr = audit(github, outside, env=no_file)
    assert [g["key"] for g in report["duplicates"]] == [KEY_B]
    assert report["trailers"]["via"] == "api"
    assert "reading trailers with git failed" in stderr


def test_stuck_unclaimed_and_missing_refs(github: FakeGitHub, work: Path) -> None:
    env = fast_env(github)
    pr_url = f"{github.url}/{REPO}/pull"
    # a step whose owner was killed right after its claim: stuck (owner dead)
    crashed = run_gitledger(
        "run-step",
        "-t",
        "T-1",
        "-s",
        "open-pr",
        "--",
        "true",
        cwd=work,
        env={**env, "GITLEDGER_FAULT": "after-claim"},
    )
    assert crashed.returncode != 0
    # a step recorded done with a PR URL that does not exist: a forged or mistaken done
    forged = run_gitledger(
        *("run-step", "-t", "T-2", "-s", "open-pr", "--"),
        *("sh", "-c", f'echo {pr_url}/999 > "$GITLEDGER_RESULT"'),
        cwd=work,
        env=env,
    )
    assert forged.returncode == 0, forged.stderr
    # a step done with a PR that exists, and whose PR carries its marker
    real = make_pr(github, work, "real", body=marker_for(KEY_C))
    done = run_gitledger(
        *("run-step", "-t", "T-3", "-s", "open-pr", "--"),
        *("sh", "-c", f'echo {pr_url}/{real} > "$GITLEDGER_RESULT"'),
        cwd=work,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    # a PR for a key this ledger never recorded
    stranger = StepKey.derive("T-4", "open-pr")
    unclaimed = make_pr(github, work, stranger.branch, labels=(stranger.label,))

    code, report, _ = audit(github, work)
    assert code == 0
    assert [(s["key"], s["reason"]) for s in report["stuck"]] == [(KEY_A, "owner is dead")]
    assert [(m["key"], m["number"]) for m in report["missing_refs"]] == [(KEY_B, 999)]
    assert report["missing_refs"][0]["ref"] == f"{pr_url}/999"
    assert [[p["number"] for p in g["prs"]] for g in report["unclaimed"]] == [[unclaimed]]
    assert {e["kind"] for e in report["unclaimed"][0]["evidence"]} == {"label", "branch"}
    assert report["ledger_duplicates"] == []


def test_thousand_prs_cost_a_dozen_api_calls(github: FakeGitHub, work: Path) -> None:
    github.seed_prs(3, body=f"<!-- gitledger:{KEY_A} -->", branch_prefix="dup/pr-")
    github.seed_prs(997)
    github.reset_requests()
    started = time.monotonic()
    code, report, _ = audit(github, work, "--fail-on-duplicates")
    elapsed = time.monotonic() - started
    assert code == 1
    assert report["pulls"] == 1000
    assert [(g["key"], numbers(g)) for g in report["duplicates"]] == [(KEY_A, [1, 2, 3])]
    assert report["trailers"]["via"] == "git" and report["trailers"]["git_processes"] <= 10
    assert report["api_calls"] <= 40
    assert github.count_requests() == report["api_calls"]
    assert github.count_requests("GET", r"/pulls$") == 10
    print(f"1000 PRs: {report['api_calls']} API calls, {elapsed:.2f} s (audit itself {report['seconds']} s)")
    assert elapsed < 60


def test_token_reaches_git_only_as_a_header_for_the_repository_host() -> None:
    import base64

    from gitledger.features.audit.trailers import auth_env

    env = auth_env("https://github.com/acme/widgets.git", "s3cret", "https://github.com/acme/widgets", {})
    assert env["GIT_CONFIG_COUNT"] == "1"
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraheader"
    assert (
        env["GIT_CONFIG_VALUE_0"]
        == "AUTHORIZATION: basic " + base64.b64encode(b"x-access-token:s3cret").decode()
    )
    shifted = auth_env(
        "https://ghe.example/o/r.git", "t", "https://ghe.example/o/r", {"GIT_CONFIG_COUNT": "2"}
    )
    assert shifted["GIT_CONFIG_COUNT"] == "3" and "GIT_CONFIG_KEY_2" in shifted
    assert auth_env("https://evil.example/o/r.git", "t", "https://github.com/o/r", {}) == {}
    assert auth_env("http://github.com/o/r.git", "t", "https://github.com/o/r", {}) == {}  # never in clear
    assert auth_env("git@github.com:o/r.git", "t", "https://github.com/o/r", {}) == {}


def test_a_pr_does_not_inherit_the_trailers_of_its_base(github: FakeGitHub, work: Path) -> None:
    first = make_pr(github, work, "fix/b0", message=f"x\n\nGitledger-Key: {KEY_B}\n")
    # the PR is merged: its commit is on main now, below every later PR's base
    git("checkout", "-q", "-B", "main", "origin/main", cwd=work)
    git("merge", "-q", "--no-ff", "-m", "Merge fix/b0", "origin/fix/b0", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    git("fetch", "-q", "origin", cwd=work)
    github.merge_pr(first)
    later = make_pr(github, work, "later")  # based on the new main, carries no key itself
    again = make_pr(github, work, "fix/b1", message=f"y\n\nGitledger-Key: {KEY_B}\n")
    _, report, _ = audit(github, work)
    assert [(g["key"], numbers(g)) for g in report["duplicates"]] == [(KEY_B, [first, again])]
    assert later not in numbers(report["duplicates"][0]) and report["keyed_pulls"] == 2
