"""Feature tests over the in-memory GitHub (testing/fakeclient.py): the audit and the GitHub checks run
in process, in milliseconds, through the same port the PyGithub client implements."""

from __future__ import annotations

from typing import Any

import pytest

from gitledger.core.errors import CheckError
from gitledger.core.keys import StepKey
from gitledger.core.store import MemoryStore
from gitledger.features.audit.run import AuditOptions, run_audit
from gitledger.github.checks import BranchCheck, CommentCheck, PullRequestCheck
from gitledger.session import Session
from testing.fakeclient import FakeClient

STEP = StepKey.derive("T-9", "open-pr")
OTHER = StepKey.derive("T-9", "docs")


def audit(client: FakeClient, *, close: bool = False, trailers: str = "api") -> Any:
    session = Session(MemoryStore(), _github=client)  # type: ignore[arg-type]
    return run_audit(AuditOptions(close=close, trailers=trailers, env={}), session)


def test_github_pr_check_finds_by_head_then_label_then_marker() -> None:
    client = FakeClient()
    check = PullRequestCheck(client)  # type: ignore[arg-type]
    assert check.find(STEP) is None
    by_marker = client.add_pull("elsewhere", body=f"text\n{STEP.marker}\n")
    assert check.find(STEP) == by_marker.html_url
    by_label = client.add_pull("other", labels=(STEP.label,), state="closed")
    assert check.find(STEP) == by_label.html_url
    by_head = client.add_pull(STEP.branch, state="closed", merged=True)
    assert check.find(STEP) == by_head.html_url
    assert PullRequestCheck(client, marker_scan=False).find(OTHER) is None  # type: ignore[arg-type]


def test_github_checks_turn_no_answer_into_check_error_never_absent() -> None:
    client = FakeClient()
    client.fail_next("iter_pulls")
    with pytest.raises(CheckError, match="502"):
        PullRequestCheck(client).find(STEP)  # type: ignore[arg-type]
    client.fail_next("find_branch")
    with pytest.raises(CheckError):
        BranchCheck(client).find(STEP)  # type: ignore[arg-type]
    pull = client.add_pull("feature")
    client.fail_next("comments")
    with pytest.raises(CheckError):
        CommentCheck(client, pull.number).find(STEP)  # type: ignore[arg-type]
    with pytest.raises(CheckError, match="not found"):
        CommentCheck(client, 999).find(STEP)  # type: ignore[arg-type]


def test_github_comment_and_branch_checks() -> None:
    client = FakeClient()
    pull = client.add_pull("feature")
    assert CommentCheck(client, pull.number).find(STEP) is None  # type: ignore[arg-type]
    posted = client.create_comment(pull.number, f"done\n{STEP.marker}")
    assert CommentCheck(client, pull.number).find(STEP) == posted.html_url  # type: ignore[arg-type]
    assert BranchCheck(client).find(STEP) is None  # type: ignore[arg-type]
    client.branches.add(STEP.branch)
    assert BranchCheck(client).find(STEP) == f"{client.web_url()}/tree/{STEP.branch}"  # type: ignore[arg-type]


def _three_duplicates(client: FakeClient) -> list[int]:
    body = f"Fix it\n\n{STEP.marker}\n"
    return [client.add_pull(f"{STEP.branch}-{i}" if i else STEP.branch, body=body).number for i in range(3)]


def test_audit_groups_duplicates_and_closes_all_but_the_oldest_open_once() -> None:
    client = FakeClient()
    first, second, third = _three_duplicates(client)
    client.add_pull("unrelated", body="no key here")

    report = audit(client)
    [group] = [g for g in report.groups if len(g.pulls) > 1]
    assert group.key == STEP.key and sorted(p.number for p in group.pulls) == [first, second, third]
    assert report.closed is None and all(p.state == "open" for p in client.pulls.values())

    report = audit(client, close=True)
    assert sorted((r["number"], r["result"], r["comment"]) for r in report.closed) == [
        (second, "closed", "posted"),
        (third, "closed", "posted"),
    ]
    assert [client.pulls[n].state for n in (first, second, third)] == ["open", "closed", "closed"]
    for number in (second, third):
        [comment] = client.comment_lists[number]
        assert f"duplicates #{first}" in comment.body and "closed -->" in comment.body

    again = audit(client, close=True)
    assert again.closed == [] and client.calls.by_method["create_comment"] == 2


def test_audit_keeps_a_pull_request_a_person_reopened() -> None:
    client = FakeClient()
    _first, second, _third = _three_duplicates(client)
    audit(client, close=True)
    client.reopen(second)
    report = audit(client, close=True)
    assert [(r["number"], r["result"]) for r in report.closed] == [(second, "kept")]
    assert client.pulls[second].state == "open" and len(client.comment_lists[second]) == 1


def test_audit_close_failure_is_reported_and_the_next_run_finishes_without_a_second_comment() -> None:
    client = FakeClient()
    _first, second, third = _three_duplicates(client)
    client.fail_next("close_pull")
    report = audit(client, close=True)
    results = {r["number"]: r for r in report.closed}
    assert results[second]["result"] == "error" and "502" in results[second]["reason"]
    assert results[third]["result"] == "closed"
    assert client.pulls[second].state == "open" and len(client.comment_lists[second]) == 1

    report = audit(client, close=True)
    assert [(r["number"], r["result"], r["comment"]) for r in report.closed] == [
        (second, "closed", "existing")
    ]
    assert len(client.comment_lists[second]) == 1


def test_audit_reads_keys_from_commit_trailers_through_the_port() -> None:
    client = FakeClient()
    client.add_pull("a", messages=(f"Do it\n\n{STEP.trailer}\n",))
    client.add_pull("b", messages=(f"Do it again\n\n{STEP.trailer}\n",))
    report = audit(client, trailers="api")
    assert [sorted(p.number for p in g.pulls) for g in report.groups] == [[1, 2]]
    assert audit(client, trailers="none").groups == []
