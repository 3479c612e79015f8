"""The fake GitHub server, exercised with the real PyGithub client over HTTP and real git pushes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import requests
from github import (
    Auth,
    BadCredentialsException,
    Github,
    GithubException,
    RateLimitExceededException,
    UnknownObjectException,
)

from testing.fakegithub import (
    FakeGitHub,
    delay,
    drop_after_effect,
    drop_before_effect,
    rate_limit,
    secondary_rate_limit,
    status,
)
from testing.repos import ROOT, git

REPO = "acme/widgets"


def client(server: FakeGitHub, token: str | None = "test-token", **kwargs: Any) -> Github:
    auth = Auth.Token(token) if token is not None else None
    return Github(auth=auth, **{**server.pygithub_kwargs(), **kwargs})


def push_branch(work: Path, bare: Path, branch: str, message: str = "change", *, start: str = "main") -> str:
    """Commit one file change on ``branch`` (created from ``start`` if new) and push it; return the SHA."""
    current = git("branch", "--list", branch, cwd=work)
    git("checkout", "-q", *(["-b", branch, start] if not current else [branch]), cwd=work)
    name = branch.replace("/", "_")
    with (work / f"{name}.txt").open("a") as fh:
        fh.write(f"{message}\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", message, cwd=work)
    git("push", "-q", str(bare), f"HEAD:refs/heads/{branch}", cwd=work)
    git("checkout", "-q", "main", cwd=work)
    return git("rev-parse", branch, cwd=work)


@pytest.fixture
def work(github: FakeGitHub, repo: Path) -> Path:
    """The conftest ``repo`` with its main branch pushed to the fake's acme/widgets."""
    git("push", "-q", str(github.bare_path(REPO)), "main", cwd=repo)
    return repo


def raw(
    server: FakeGitHub,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = "test-token",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One HTTP request with urllib (no PyGithub), returning status, headers and decoded JSON."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{server.url}{path}", data=data, method=method, headers=headers or {})
    if token:
        req.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            payload = resp.read()
            return resp.status, dict(resp.headers), json.loads(payload) if payload else None
    except urllib.error.HTTPError as e:
        payload = e.read()
        return e.code, dict(e.headers), json.loads(payload) if payload else None


# ---- pull requests ------------------------------------------------------------------------------------


def test_create_pr_then_duplicate_open_pr_is_422(github: FakeGitHub, work: Path) -> None:
    sha = push_branch(work, github.bare_path(REPO), "gitledger/t-1/open-pr-abc", "do the thing")
    repo = client(github).get_repo(REPO)

    pr = repo.create_pull(title="Do it", head="gitledger/t-1/open-pr-abc", base="main", body="<!-- m -->")
    assert (pr.number, pr.state, pr.head.sha, pr.head.ref, pr.base.ref) == (
        1,
        "open",
        sha,
        "gitledger/t-1/open-pr-abc",
        "main",
    )
    assert pr.head.label == "acme:gitledger/t-1/open-pr-abc"
    assert pr.url == f"{github.url}/repos/acme/widgets/pulls/1"
    assert pr.merged is False and pr.commits == 1 and pr.additions == 1
    assert pr.created_at.tzinfo is not None and pr.id and pr.node_id

    with pytest.raises(GithubException) as exc:
        repo.create_pull(title="Again", head="acme:gitledger/t-1/open-pr-abc", base="main")
    assert exc.value.status == 422
    assert exc.value.data["message"] == "Validation Failed"
    assert exc.value.data["errors"] == [
        {
            "resource": "PullRequest",
            "code": "custom",
            "message": "A pull request already exists for acme:gitledger/t-1/open-pr-abc.",
        }
    ]
    assert github.count_requests("POST", r"/pulls$") == 2
    assert github.count_requests("POST", r"/pulls$", status=201) == 1
    assert [p["number"] for p in github.pulls()] == [1]


def test_create_pr_validates_branches_against_the_bare_repo(github: FakeGitHub, work: Path) -> None:
    repo = client(github).get_repo(REPO)
    with pytest.raises(GithubException) as exc:
        repo.create_pull(title="x", head="never-pushed", base="main")
    assert exc.value.status == 422
    assert exc.value.data["errors"] == [{"resource": "PullRequest", "field": "head", "code": "invalid"}]

    git("push", "-q", str(github.bare_path(REPO)), "main:refs/heads/same-as-main", cwd=work)
    with pytest.raises(GithubException) as exc:
        repo.create_pull(title="x", head="same-as-main", base="main")
    assert exc.value.data["errors"][0]["message"] == "No commits between main and same-as-main"

    push_branch(work, github.bare_path(REPO), "feature")
    with pytest.raises(GithubException) as exc:
        repo.create_pull(title="x", head="feature", base="no-such-base")
    assert exc.value.data["errors"] == [{"resource": "PullRequest", "field": "base", "code": "invalid"}]
    assert github.pulls() == []


def test_head_filter_needs_owner_prefix_and_state_all_finds_closed(github: FakeGitHub, work: Path) -> None:
    bare = github.bare_path(REPO)
    push_branch(work, bare, "b1")
    push_branch(work, bare, "b2")
    repo = client(github).get_repo(REPO)
    first = repo.create_pull(title="one", head="b1", base="main")
    repo.create_pull(title="two", head="b2", base="main")
    first.edit(state="closed")

    assert [p.number for p in repo.get_pulls(state="all", head="acme:b1")] == [1]
    assert [p.number for p in repo.get_pulls(head="acme:b1")] == []  # default state is open
    assert [p.number for p in repo.get_pulls(state="closed", head="acme:b1")] == [1]
    assert [p.number for p in repo.get_pulls(state="all", head="other-owner:b1")] == []
    # Like GitHub: a head without "owner:" is silently ignored, so every PR comes back (newest first).
    assert [p.number for p in repo.get_pulls(state="all", head="b1")] == [2, 1]
    assert [p.number for p in repo.get_pulls(state="all", sort="created", direction="asc")] == [1, 2]
    assert [p.number for p in repo.get_pulls(state="all", base="main")] == [2, 1]
    assert list(repo.get_pulls(state="all", base="other")) == []
    assert github.requests[-1].query == {"state": "all", "base": "other"}

    # A closed PR no longer blocks a new one on the same head; reopening then collides.
    third = repo.create_pull(title="one again", head="b1", base="main")
    assert third.number == 3
    with pytest.raises(GithubException) as exc:
        first.edit(state="open")
    assert exc.value.status == 422
    assert "A pull request already exists for acme:b1." in str(exc.value.data)


def test_open_pr_follows_pushes_and_lists_real_commits(github: FakeGitHub, work: Path) -> None:
    bare = github.bare_path(REPO)
    push_branch(work, bare, "topic", "first\n\nGitledger-Key: k1")
    repo = client(github).get_repo(REPO)
    pr = repo.create_pull(title="t", head="topic", base="main", draft=True)
    assert pr.draft is True
    newer = push_branch(work, bare, "topic", "second")

    fresh = repo.get_pull(pr.number)
    assert fresh.head.sha == newer and fresh.commits == 2
    commits = list(fresh.get_commits())
    assert [c.commit.message for c in commits] == ["first\n\nGitledger-Key: k1", "second"]
    assert commits[-1].sha == newer and commits[0].sha == git("rev-parse", "topic~1", cwd=work)
    assert commits[0].commit.author.email == "agent@example.invalid"

    fresh.edit(title="retitled", body="new body")
    assert repo.get_pull(pr.number).title == "retitled"
    assert repo.get_pull(pr.number).body == "new body"
    assert fresh.is_merged() is False
    github.merge_pr(pr.number)
    merged = repo.get_pull(pr.number)
    assert merged.merged and merged.state == "closed" and merged.merged_at is not None
    assert merged.merge_commit_sha == newer and merged.is_merged()
    with pytest.raises(GithubException) as exc:
        merged.edit(state="open")
    assert exc.value.status == 422


def test_pagination_iterates_75_prs_with_link_headers(github: FakeGitHub, work: Path) -> None:
    numbers = github.seed_prs(75, REPO)
    assert numbers == list(range(1, 76))
    github.reset_requests()

    pulls = list(client(github, per_page=30).get_repo(REPO).get_pulls(state="all"))
    assert [p.number for p in pulls] == list(range(75, 0, -1))
    assert github.count_requests("GET", r"/pulls$") == 3
    assert [r.query.get("page") for r in github.requests if r.path.endswith("/pulls")] == [None, "2", "3"]
    assert client(github).get_repo(REPO).get_pulls(state="all").totalCount == 75

    code, headers, body = raw(github, "GET", "/repos/acme/widgets/pulls?state=all&per_page=30&page=2")
    assert code == 200 and len(body) == 30
    links = dict(
        (part.split("; ")[1], part.split("; ")[0].strip("<>")) for part in headers["Link"].split(", ")
    )
    base = f"{github.url}/repos/acme/widgets/pulls?state=all&per_page=30"
    assert links == {
        'rel="prev"': f"{base}&page=1",
        'rel="next"': f"{base}&page=3",
        'rel="last"': f"{base}&page=3",
        'rel="first"': f"{base}&page=1",
    }
    code, headers, body = raw(github, "GET", "/repos/acme/widgets/pulls?state=all&per_page=200")
    assert len(body) == 75 and "Link" not in headers  # per_page is capped at 100
    code, headers, body = raw(github, "GET", "/repos/acme/widgets/pulls?state=all")
    assert len(body) == 30  # default per_page
    assert "merged" not in body[0] and "mergeable" not in body[0]  # list shape, like GitHub


# ---- issues, labels, comments -------------------------------------------------------------------------


def test_issues_and_prs_share_numbers_and_listings(github: FakeGitHub, work: Path) -> None:
    push_branch(work, github.bare_path(REPO), "feature")
    repo = client(github).get_repo(REPO)
    issue = repo.create_issue(title="bug", body="it broke", labels=["bug"])
    pr = repo.create_pull(title="fix", head="feature", base="main")
    assert (issue.number, pr.number) == (1, 2)

    listed = {i.number: i for i in repo.get_issues(state="all")}
    assert set(listed) == {1, 2}
    assert listed[2].pull_request is not None and listed[1].pull_request is None
    assert repo.get_issue(2).as_pull_request().title == "fix"
    with pytest.raises(UnknownObjectException):
        repo.get_pull(1)

    repo.get_issue(2).edit(state="closed")  # closing through the issues API closes the PR
    assert repo.get_pull(2).state == "closed"
    issue.edit(state="closed", state_reason="not_planned")
    assert repo.get_issue(1).state_reason == "not_planned"
    assert [i.number for i in repo.get_issues()] == []


def test_labels_with_colons(github: FakeGitHub, work: Path) -> None:
    push_branch(work, github.bare_path(REPO), "feature")
    repo = client(github).get_repo(REPO)
    pr = repo.create_pull(title="fix", head="feature", base="main")

    with pytest.raises(UnknownObjectException):
        repo.get_label("gitledger:0123456789abcdef")
    label = repo.create_label("gitledger:0123456789abcdef", "0e8a16", "a gitledger key")
    assert github.requests[-1].path == "/repos/acme/widgets/labels"
    fetched = repo.get_label("gitledger:0123456789abcdef")
    assert (fetched.name, fetched.color, fetched.description) == (label.name, "0e8a16", "a gitledger key")
    assert github.requests[-1].path == "/repos/acme/widgets/labels/gitledger:0123456789abcdef"
    assert repo.get_label("GITLEDGER:0123456789ABCDEF").name == label.name  # case-insensitive, like GitHub
    with pytest.raises(GithubException) as exc:
        repo.create_label("gitledger:0123456789abcdef", "ededed")
    assert exc.value.status == 422
    assert exc.value.data["errors"] == [{"resource": "Label", "field": "name", "code": "already_exists"}]

    pr.add_to_labels("gitledger:0123456789abcdef", "gitledger:fresh/with-slash")
    assert [x.name for x in pr.get_labels()] == ["gitledger:0123456789abcdef", "gitledger:fresh/with-slash"]
    assert repo.get_label("gitledger:fresh/with-slash").color == "ededed"  # created on demand
    assert [i.number for i in repo.get_issues(labels=["gitledger:0123456789abcdef"])] == [1]
    assert [i.number for i in repo.get_issues(labels=["gitledger:0123456789abcdef", "other"])] == []
    pr.remove_from_labels("gitledger:fresh/with-slash")
    assert [x.name for x in repo.get_issue(1).labels] == ["gitledger:0123456789abcdef"]

    code, _, body = raw(github, "POST", "/repos/acme/widgets/issues/1/labels", {"labels": ["x:y"]})
    assert code == 200 and [x["name"] for x in body] == ["gitledger:0123456789abcdef", "x:y"]
    assert {x.name for x in repo.get_labels()} >= {"gitledger:0123456789abcdef", "x:y"}


def test_comments_paginate_and_fetch_by_id(github: FakeGitHub, work: Path) -> None:
    repo = client(github).get_repo(REPO)
    issue = repo.create_issue(title="notes")
    created = [issue.create_comment(f"comment {i}") for i in range(65)]
    github.reset_requests()

    bodies = [c.body for c in client(github, per_page=30).get_repo(REPO).get_issue(1).get_comments()]
    assert bodies == [f"comment {i}" for i in range(65)]
    assert github.count_requests("GET", r"/issues/1/comments$") == 3
    one = issue.get_comment(created[40].id)
    assert one.body == "comment 40" and one.user.login == github.login
    assert one.html_url.endswith(f"#issuecomment-{created[40].id}")
    assert github.comments(1)[0] == {"id": created[0].id, "body": "comment 0", "user": github.login}
    assert repo.get_issue(1).comments == 65


# ---- branches and refs --------------------------------------------------------------------------------


def test_branches_and_refs_come_from_git(github: FakeGitHub, work: Path) -> None:
    sha = push_branch(work, github.bare_path(REPO), "gitledger/t/step-0123456789ab")
    repo = client(github).get_repo(REPO)
    assert [b.name for b in repo.get_branches()] == ["gitledger/t/step-0123456789ab", "main"]
    branch = repo.get_branch("gitledger/t/step-0123456789ab")
    assert branch.commit.sha == sha and branch.commit.commit.message == "change"
    with pytest.raises(UnknownObjectException) as exc:
        repo.get_branch("gitledger/t/missing")
    assert exc.value.data["message"] == "Branch not found"

    assert repo.get_git_ref("heads/gitledger/t/step-0123456789ab").object.sha == sha
    matching = repo.get_git_matching_refs("heads/gitledger/")
    assert [(r.ref, r.object.sha) for r in matching] == [("refs/heads/gitledger/t/step-0123456789ab", sha)]
    assert list(repo.get_git_matching_refs("heads/nothing/")) == []
    code, _, body = raw(github, "GET", "/repos/acme/widgets/git/ref/heads/gitledger/t/step-0123456789ab")
    assert code == 200 and body["object"] == {
        "sha": sha,
        "type": "commit",
        "url": f"{github.url}/repos/acme/widgets/git/commits/{sha}",
    }
    assert raw(github, "GET", "/repos/acme/widgets/git/ref/heads/missing")[0] == 404

    ref = repo.create_git_ref("refs/heads/copy", sha)
    assert git("rev-parse", "refs/heads/copy", cwd=github.bare_path(REPO)) == sha
    ref.delete()
    assert git("branch", "--list", "copy", cwd=github.bare_path(REPO)) == ""


# ---- auth, errors, headers ----------------------------------------------------------------------------


def test_bad_token_is_401_bad_credentials(github: FakeGitHub) -> None:
    with pytest.raises(BadCredentialsException) as exc:
        client(github, token="wrong").get_repo(REPO)
    assert exc.value.status == 401 and exc.value.data["message"] == "Bad credentials"
    code, _, body = raw(github, "GET", "/repos/acme/widgets", token=None)
    assert code == 401 and body["message"] == "Requires authentication"
    code, _, _ = raw(github, "GET", "/repos/acme/widgets", headers={"Authorization": "Bearer test-token"})
    assert code == 200
    assert [r.status for r in github.requests] == [401, 401, 200]
    assert client(github).get_user().login == github.login


def test_unknown_paths_and_repos_are_github_404s(github: FakeGitHub) -> None:
    code, _, body = raw(github, "GET", "/repos/acme/nope")
    assert code == 404 and body["message"] == "Not Found" and body["documentation_url"].startswith("https://")
    assert raw(github, "GET", "/definitely/not/an/endpoint")[0] == 404
    assert raw(github, "POST", "/repos/acme/widgets/pulls", token="test-token")[0] == 422
    req = urllib.request.Request(
        f"{github.url}/repos/acme/widgets/issues",
        data=b"{not json",
        method="POST",
        headers={"Authorization": "token test-token"},
    )
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=5)
    assert exc.value.code == 400
    assert json.loads(exc.value.read())["message"] == "Problems parsing JSON"


def test_standard_headers_etag_and_rate_limit_counter(github: FakeGitHub) -> None:
    code, headers, _ = raw(github, "GET", "/repos/acme/widgets")
    assert code == 200
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert headers["Cache-Control"] == "private, max-age=60, s-maxage=60"
    assert headers["ETag"].startswith('W/"')
    assert headers["X-RateLimit-Limit"] == "5000"
    remaining = int(headers["X-RateLimit-Remaining"])
    assert int(headers["X-RateLimit-Reset"]) > time.time()
    code, headers2, body = raw(
        github, "GET", "/repos/acme/widgets", headers={"If-None-Match": headers["ETag"]}
    )
    assert code == 304 and body is None
    assert int(headers2["X-RateLimit-Remaining"]) == remaining  # like GitHub, a 304 is free
    code, headers3, _ = raw(github, "POST", "/repos/acme/widgets/issues", {"title": "t"})
    assert code == 201 and "Cache-Control" not in headers3 and "ETag" not in headers3
    assert headers3["Location"] == f"{github.url}/repos/acme/widgets/issues/1"
    assert int(headers3["X-RateLimit-Remaining"]) == remaining - 1
    rate = client(github).get_rate_limit()  # /rate_limit itself is free too
    assert rate.resources.core.limit == 5000 and rate.resources.core.remaining == remaining - 1


# ---- fault injection ----------------------------------------------------------------------------------


def test_injected_502_once_then_success(github: FakeGitHub) -> None:
    gh = client(github)
    injection = github.inject("GET", r"^/repos/acme/widgets$", status(502))
    with pytest.raises(GithubException) as exc:
        gh.get_repo(REPO)
    assert exc.value.status == 502 and exc.value.data["message"] == "Bad Gateway"
    assert gh.get_repo(REPO).full_name == REPO
    assert injection.hits == 1 and injection.remaining == 0
    assert [(r.status, r.fault) for r in github.requests] == [(502, "status(502)"), (200, None)]


def test_drop_after_effect_creates_pr_but_client_sees_connection_error(
    github: FakeGitHub, work: Path
) -> None:
    push_branch(work, github.bare_path(REPO), "feature")
    repo = client(github).get_repo(REPO)
    github.inject("POST", r"/pulls$", drop_after_effect())
    with pytest.raises(requests.exceptions.ConnectionError):
        repo.create_pull(title="crashy", head="feature", base="main")

    assert [p["title"] for p in github.pulls()] == ["crashy"]
    found = list(repo.get_pulls(state="all", head="acme:feature"))
    assert [p.title for p in found] == ["crashy"]
    with pytest.raises(GithubException) as exc:  # a blind retry now collides
        repo.create_pull(title="crashy", head="feature", base="main")
    assert exc.value.status == 422
    assert [r.status for r in github.requests if r.method == "POST"] == [None, 422]


def test_drop_before_effect_changes_nothing(github: FakeGitHub) -> None:
    github.inject("POST", r"/issues$", drop_before_effect())
    with pytest.raises(requests.exceptions.ConnectionError):
        client(github).get_repo(REPO).create_issue(title="lost")
    assert github.state()["repos"][REPO]["issues"]["total"] == 0


def test_rate_limit_faults(github: FakeGitHub) -> None:
    gh = client(github)
    github.inject("GET", r"/pulls$", rate_limit(retry_after=30))
    before = time.time()
    with pytest.raises(RateLimitExceededException) as exc:
        list(gh.get_repo(REPO).get_pulls())
    assert exc.value.status == 403
    assert exc.value.data["message"].startswith("API rate limit exceeded")
    headers = {k.lower(): v for k, v in exc.value.headers.items()}
    assert headers["x-ratelimit-remaining"] == "0"
    assert before + 29 <= int(headers["x-ratelimit-reset"]) <= time.time() + 31

    github.inject("*", r"/issues$", rate_limit(retry_after=7, status=429))
    code, headers, _body = raw(github, "GET", "/repos/acme/widgets/issues")
    assert code == 429 and headers["Retry-After"] == "7" and headers["X-RateLimit-Remaining"] == "0"

    github.inject("POST", r"/issues$", secondary_rate_limit(retry_after=5))
    with pytest.raises(RateLimitExceededException) as exc:
        gh.get_repo(REPO).create_issue(title="x")
    assert {k.lower(): v for k, v in exc.value.headers.items()}["retry-after"] == "5"
    assert list(gh.get_repo(REPO).get_pulls()) == []  # each fault fired once


def test_delay_fault_and_repeating_faults(github: FakeGitHub) -> None:
    github.inject("GET", r"^/user$", delay(0.3))
    start = time.monotonic()
    assert client(github).get_user().login == github.login
    assert time.monotonic() - start >= 0.3

    github.inject("GET", r"/labels$", status(503), times=None)
    for _ in range(3):
        assert raw(github, "GET", "/repos/acme/widgets/labels")[0] == 503
    github.clear_faults()
    assert raw(github, "GET", "/repos/acme/widgets/labels")[0] == 200


def test_concurrent_creates_on_one_head_yield_exactly_one_pr(github: FakeGitHub, work: Path) -> None:
    push_branch(work, github.bare_path(REPO), "race")
    results: list[int] = []
    barrier = threading.Barrier(8)

    def attempt() -> None:
        repo = client(github).get_repo(REPO)
        barrier.wait()
        try:
            results.append(repo.create_pull(title="race", head="race", base="main").number)
        except GithubException as e:
            results.append(-e.status)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [-422] * 7 + [1]
    assert len(github.pulls()) == 1


# ---- standalone mode ----------------------------------------------------------------------------------


def _start_standalone(*args: str, stdin: int) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "testing.fakegithub", *args],
        cwd=ROOT,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    return proc, json.loads(line)


def test_standalone_mode_serves_until_stdin_eof(tmp_path: Path) -> None:
    proc, info = _start_standalone("--repo", "acme/widgets", "--token", "T", stdin=subprocess.PIPE)
    try:
        bare = Path(info["repos"]["acme/widgets"])
        assert info["url"].startswith("http://127.0.0.1:") and (bare / "HEAD").is_file()

        def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
            req = urllib.request.Request(
                info["url"] + path,
                data=json.dumps(body).encode() if body is not None else None,
                method=method,
                headers={"Authorization": "token T"},
            )
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read() or b"null")

        assert call("GET", "/repos/acme/widgets")[1]["full_name"] == "acme/widgets"
        code, seeded = call("POST", "/_fake/seed_prs", {"count": 40, "labels": ["bench:1"]})
        assert code == 201 and seeded["numbers"] == list(range(1, 41))
        assert git("rev-parse", "refs/heads/seed/pr-40", cwd=bare)
        code, page = call("GET", "/repos/acme/widgets/pulls?per_page=100")
        assert len(page) == 40 and page[0]["head"]["ref"] == "seed/pr-40"
        assert (
            call(
                "POST", "/_fake/inject", {"method": "GET", "path": "/user$", "fault": "status", "status": 503}
            )[0]
            == 200
        )
        assert call("GET", "/user")[0] == 503
        state = call("GET", "/_fake/state")[1]
        assert state["repos"]["acme/widgets"]["pulls"] == {"total": 40, "open": 40, "closed": 0, "merged": 0}
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # EOF on a pipe stops the server
        assert proc.wait(timeout=10) == 0
    assert not bare.exists()  # the temporary directory is removed on exit


def test_standalone_mode_stops_on_sigterm_and_ignores_devnull_stdin(tmp_path: Path) -> None:
    proc, info = _start_standalone("--repo", "o/r", "--root", str(tmp_path / "srv"), stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.2)  # EOF on /dev/null must not stop it
        assert proc.poll() is None
        with urllib.request.urlopen(info["url"] + "/repos/o/r", timeout=5) as resp:  # no tokens: no auth
            assert json.loads(resp.read())["default_branch"] == "main"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert Path(info["repos"]["o/r"]).is_dir()  # a caller-provided root is kept


def test_pull_head_refs_exist_in_the_bare_repo_like_github(github: FakeGitHub, work: Path) -> None:
    bare = github.bare_path(REPO)
    first = push_branch(work, bare, "feature", "one")
    repo = client(github).get_repo(REPO)
    pr = repo.create_pull(title="x", head="feature", base="main")
    assert git("rev-parse", f"refs/pull/{pr.number}/head", cwd=bare) == first

    second = push_branch(work, bare, "feature", "two")
    assert repo.get_pull(pr.number).head.sha == second  # reading the PR moves its ref, like a push on GitHub
    assert git("rev-parse", f"refs/pull/{pr.number}/head", cwd=bare) == second

    repo.get_pull(pr.number).edit(state="closed")
    push_branch(work, bare, "feature", "three")
    repo.get_pull(pr.number)
    assert git("rev-parse", f"refs/pull/{pr.number}/head", cwd=bare) == second  # closed: frozen

    seeded = github.seed_prs(3, REPO)
    fetched = work / "fetched"
    git("init", "-q", "--bare", str(fetched), cwd=work)
    git("fetch", "-q", str(bare), "+refs/pull/*/head:refs/pr/*", cwd=fetched)
    names = git("for-each-ref", "--format=%(refname)", "refs/pr/", cwd=fetched).split()
    assert sorted(names) == sorted(f"refs/pr/{n}" for n in [pr.number, *seeded])
    for n in seeded:
        assert git("rev-parse", f"refs/pr/{n}", cwd=fetched) == git("rev-parse", f"seed/pr-{n}", cwd=bare)
