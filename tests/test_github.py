"""GitHub settings, transport (retries, budget, counting, redaction), checks and actions, in process.

Real PyGithub over HTTP against the local fake (testing/fakegithub/); real git pushes to its bare repo.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gitledger.core.errors import CheckError, UsageError
from gitledger.core.keys import Content, Names, StepKey
from gitledger.git.repo import GitRepo
from gitledger.github.client import GitHubContext
from gitledger.github.settings import (
    GitHubError,
    GitHubSettings,
    GitHubSettingsError,
    WriteUnknownError,
    parse_remote_url,
    strip_userinfo,
)
from gitledger.github.transport import NoCacheToken
from testing.fakegithub import (
    FakeGitHub,
    drop_after_effect,
    drop_before_effect,
    rate_limit,
    secondary_rate_limit,
    status,
)
from testing.repos import ROOT, git
from tests.github_support import REPO, TOKEN, client, clone, context, open_pr, push_branch

PULLS = r"^/repos/acme/widgets/pulls$"


def key(name: str = "x", step: str = "open-pr") -> StepKey:
    return StepKey.derive("T-1", step, Content.text(name))


@pytest.fixture
def ctx(github: FakeGitHub) -> Any:
    with context(github) as c:
        yield c


@pytest.fixture
def work(github: FakeGitHub, tmp_path: Path) -> Path:
    return clone(github, tmp_path / "work")


# -- settings -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,expected",
    [
        ("https://github.com/acme/widgets", "acme/widgets"),
        ("https://github.com/acme/widgets.git", "acme/widgets"),
        ("https://x-access-token:secret@github.com/acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/wid.gets", "acme/wid.gets"),
        ("ssh://git@github.com/acme/widgets.git", "acme/widgets"),
        ("ssh://git@ghe.example.com:2222/acme/widgets.git", "acme/widgets"),
        ("https://ghe.example.com/acme/widgets/", "acme/widgets"),
        ("/srv/git/widgets.git", None),
        ("file:///srv/git/widgets.git", None),
        ("../widgets", None),
        ("https://github.com/acme", None),
    ],
)
def test_repository_is_parsed_from_remote_urls(url: str, expected: str | None) -> None:
    assert parse_remote_url(url) == expected


def test_userinfo_is_stripped_before_a_url_is_shown() -> None:
    assert strip_userinfo("https://x:secret@github.com/a/b.git") == "https://github.com/a/b.git"


def test_settings_precedence_and_token_fallback(repo: Path) -> None:
    git("remote", "add", "origin", "git@github.com:acme/from-origin.git", cwd=repo)
    with GitRepo.discover(repo) as gr:
        from_origin = GitHubSettings.resolve(None, None, gr, env={"GH_TOKEN": "gh"})
        assert (from_origin.repo, from_origin.token) == ("acme/from-origin", "gh")
        assert from_origin.api_url == "https://api.github.com"
        explicit = GitHubSettings.resolve(
            "o/r",
            None,
            gr,
            env={"GITHUB_TOKEN": "s3cret", "GH_TOKEN": "b", "GITHUB_API_URL": "https://h/api/v3/"},
        )
        assert (explicit.repo, explicit.token, explicit.api_url) == ("o/r", "s3cret", "https://h/api/v3")
        assert GitHubSettings.resolve("o/r", "http://x", gr, env={"GH_TOKEN": "b"}).api_url == "http://x"
        assert "s3cret" not in repr(explicit)


def test_missing_token_names_both_variables() -> None:
    with pytest.raises(GitHubSettingsError, match=r"GITHUB_TOKEN.*GH_TOKEN") as info:
        GitHubSettings.resolve("o/r", None, None, env={"GITHUB_TOKEN": "  "})
    assert info.value.exit_code == 2 and "\n" not in info.value.message


def test_no_repository_anywhere_is_a_usage_error(repo: Path) -> None:
    with GitRepo.discover(repo) as gr, pytest.raises(GitHubSettingsError, match="--github-repo OWNER/NAME"):
        GitHubSettings.resolve(None, None, gr, env={"GH_TOKEN": "t"})
    git("remote", "add", "origin", "https://u:hunter2@example.com/only-one-part", cwd=repo)
    with GitRepo.discover(repo) as gr, pytest.raises(GitHubSettingsError) as info:
        GitHubSettings.resolve(None, None, gr, env={"GH_TOKEN": "t"})
    assert "hunter2" not in info.value.message and "example.com/only-one-part" in info.value.message


@pytest.mark.parametrize(
    "var", ["GITLEDGER_GITHUB_MAX_WAIT", "GITLEDGER_GITHUB_RETRIES", "GITLEDGER_GITHUB_TIMEOUT"]
)
def test_bad_tuning_values_are_rejected(var: str) -> None:
    with pytest.raises(GitHubSettingsError, match=var):
        GitHubSettings.resolve("o/r", None, None, env={"GH_TOKEN": "t", var: "-1"})


def test_bad_repository_argument() -> None:
    with pytest.raises(GitHubSettingsError, match="OWNER/NAME"):
        GitHubSettings.resolve("just-a-name", None, None, env={"GH_TOKEN": "t"})


def test_pygithub_stays_unimported_by_the_cli_and_core() -> None:
    code = (
        "import sys, gitledger.cli, gitledger.session, gitledger.session, gitledger.core.protocol\n"
        "assert 'github' not in sys.modules, 'PyGithub imported eagerly'\n"
        "assert 'gitledger.github.client' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# -- github-pr ------------------------------------------------------------------------------------------


def test_absent_pr_costs_three_calls_and_every_call_is_counted(github: FakeGitHub, ctx: Any) -> None:
    from gitledger.github.checks import PullRequestCheck

    assert PullRequestCheck(ctx).find(key()) is None
    assert ctx.calls.total == len(github.requests) == 3
    assert ctx.calls.reads == 3 and ctx.calls.writes == 0
    heads = [r.query.get("head") for r in github.requests if r.path.endswith("/pulls")]
    assert heads[0] == f"acme:{key().branch}"  # always with the owner prefix


def test_pr_on_the_convention_branch_is_found_in_one_call(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.checks import PullRequestCheck

    pr = open_pr(github, work, key().branch)
    github.reset_requests()
    assert PullRequestCheck(ctx).find(key()) == pr.html_url
    assert len(github.requests) == 1


@pytest.mark.parametrize("how", ["closed", "merged"])
def test_closed_or_merged_pr_counts_as_existing(github: FakeGitHub, ctx: Any, work: Path, how: str) -> None:
    from gitledger.github.checks import PullRequestCheck

    pr = open_pr(github, work, key().branch)
    if how == "merged":
        github.merge_pr(pr.number)
    else:
        pr.edit(state="closed")
    assert PullRequestCheck(ctx).find(key()) == pr.html_url


def test_pr_of_another_key_does_not_count(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.checks import PullRequestCheck

    other = key("other")
    open_pr(github, work, other.branch, body=f"text\n{other.marker}", labels=(other.label,))
    assert PullRequestCheck(ctx).find(key()) is None
    assert PullRequestCheck(ctx).find(other) is not None


def test_marker_in_a_body_on_page_three_is_found(github: FakeGitHub, ctx: Any) -> None:
    from gitledger.github.checks import PullRequestCheck

    [number] = github.seed_prs(1, branch_prefix="by-hand/", body=f"by hand\n\n{key().marker}")
    github.seed_prs(250)  # newer PRs: the marked one is the oldest, on page 3 when newest come first
    github.reset_requests()
    assert PullRequestCheck(ctx).find(key()) == f"{github.url}/{REPO}/pull/{number}"
    pages = [
        r.query.get("page", "1")
        for r in github.requests
        if r.path.endswith("/pulls") and "head" not in r.query
    ]
    assert pages == ["1", "2", "3"]
    assert PullRequestCheck(ctx, marker_scan=False).find(key()) is None


def test_label_on_page_three_of_the_issues_list(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.checks import PullRequestCheck

    pr = open_pr(github, work, "labelled-by-hand", labels=(key().label,))
    api = client(github).get_repo(REPO)
    for n in range(205):  # plain issues carrying the label are skipped, and cost no extra call
        api.create_issue(title=f"issue {n}", labels=[key().label])
    github.reset_requests()
    assert PullRequestCheck(ctx).find(key()) == pr.html_url
    issues = [r for r in github.requests if r.path.endswith("/issues")]
    assert [r.query.get("page", "1") for r in issues] == ["1", "2", "3"]
    assert len(github.requests) == 1 + 3


def test_unreachable_github_is_a_check_error_not_absent(github: FakeGitHub) -> None:
    from gitledger.github.checks import PullRequestCheck

    with context(github, repo="acme/missing") as missing, pytest.raises(CheckError, match="404"):
        PullRequestCheck(missing).find(key())
    with context(github, GITHUB_TOKEN="wrong") as bad, pytest.raises(CheckError, match="401") as info:
        PullRequestCheck(bad).find(key())
    assert "wrong" not in str(info.value)


# -- github-branch and github-comment -------------------------------------------------------------------


def test_branch_check(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.checks import BranchCheck

    assert BranchCheck(ctx).find(key()) is None
    assert len(github.requests) == 1  # GitHub's "Branch not found" is unambiguous
    push_branch(work, key().branch)
    found = BranchCheck(ctx).find(key())
    assert found is not None and found.endswith(f"/acme/widgets/tree/{key().branch}")
    with context(github, repo="acme/missing") as missing, pytest.raises(CheckError):
        BranchCheck(missing).find(key())


def test_comment_check_reads_every_page(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.checks import CommentCheck

    pr = open_pr(github, work, "commented")
    issue = client(github).get_repo(REPO).get_issue(pr.number)
    for n in range(120):
        issue.create_comment(f"comment {n}")
    assert CommentCheck(ctx, pr.number).find(key()) is None
    marked = issue.create_comment(f"done\n{key().marker}")
    github.reset_requests()
    assert CommentCheck(ctx, pr.number).find(key()) == marked.html_url
    assert len(github.requests) == 2
    with pytest.raises(CheckError, match="#999 not found"):
        CommentCheck(ctx, 999).find(key())


# -- transport: retries, budget, rate limits, redaction -------------------------------------------------


def test_reads_are_retried_and_counted(github: FakeGitHub, ctx: Any) -> None:
    github.inject("GET", PULLS, status(502), times=2)
    assert ctx.find_pull(key(), marker_scan=False) is None
    assert ctx.calls.retries == 2
    assert ctx.calls.total == len(github.requests) == 4


def test_dropped_read_is_retried(github: FakeGitHub, ctx: Any) -> None:
    github.inject("GET", PULLS, drop_before_effect(), times=1)
    assert ctx.find_pull(key(), marker_scan=False) is None
    assert ctx.calls.failures == 1 and ctx.calls.total == len(github.requests)


def test_5xx_storm_is_bounded_by_the_retry_count(github: FakeGitHub) -> None:
    github.inject("GET", PULLS, status(500), times=None)
    with context(github, GITLEDGER_GITHUB_RETRIES="3") as c:
        started = time.monotonic()
        with pytest.raises(GitHubError, match="HTTP 500"):
            c.find_pull(key())
        assert time.monotonic() - started < 5
        assert c.calls.total == 4 and c.calls.retries == 3


def test_5xx_storm_is_bounded_by_the_wait_budget(github: FakeGitHub) -> None:
    github.inject("GET", PULLS, status(503), times=None)
    with context(github, GITLEDGER_GITHUB_RETRIES="100", GITLEDGER_GITHUB_BACKOFF="0.2") as c:
        started = time.monotonic()
        with pytest.raises(GitHubError, match="HTTP 503"):
            c.find_pull(key())
        assert time.monotonic() - started < 5 + 1  # waits 0.2+0.4+0.8+1.6 = 3.0; the next (3.2) overruns 5
        assert c.calls.retries == 4


@pytest.mark.parametrize("fault", [rate_limit(1), rate_limit(1, status=429), secondary_rate_limit(1)])
def test_rate_limit_then_success(github: FakeGitHub, ctx: Any, fault: Any) -> None:
    github.inject("GET", PULLS, fault, times=1)
    started = time.monotonic()
    assert ctx.find_pull(key(), marker_scan=False) is None
    assert 0.4 < time.monotonic() - started < 4  # waited for the reset / Retry-After
    assert ctx.calls.retries == 1


def test_rate_limit_beyond_the_budget_fails_at_once_with_the_reset_time(github: FakeGitHub, ctx: Any) -> None:
    github.inject("GET", PULLS, rate_limit(3600), times=1)
    started = time.monotonic()
    with pytest.raises(GitHubError, match=r"rate limited until \d\d:\d\d:\d\d UTC"):
        ctx.find_pull(key())
    assert time.monotonic() - started < 2


def test_forbidden_is_not_retried(github: FakeGitHub, ctx: Any) -> None:
    github.inject("GET", PULLS, status(403, "Resource not accessible by integration"), times=None)
    with pytest.raises(GitHubError, match="Resource not accessible"):
        ctx.find_pull(key())
    assert len(github.requests) == 1


def test_token_is_redacted_from_errors(github: FakeGitHub, ctx: Any) -> None:
    github.inject("GET", PULLS, status(500, f"boom {TOKEN} boom"), times=None)
    with pytest.raises(GitHubError) as info:
        ctx.find_pull(key())
    assert TOKEN not in str(info.value) and "***" in str(info.value)


def test_requests_ask_caches_not_to_answer() -> None:

    headers: dict[str, Any] = {}
    NoCacheToken("t").authentication(headers)
    assert headers == {"Authorization": "token t", "Cache-Control": "no-cache"}


# -- actions --------------------------------------------------------------------------------------------


def test_open_pull_request_creates_once_then_reports_existing(
    github: FakeGitHub, ctx: Any, work: Path
) -> None:
    from gitledger.github.writes import open_pull_request

    with GitRepo.discover(work) as gr:
        made = open_pull_request(ctx, key(), title="Fix", body="Body", git_repo=gr)
        again = open_pull_request(ctx, key(), title="Fix", body="Body", git_repo=gr)
    assert made.status == "created" and again.status == "existing" and again.url == made.url
    [pr] = github.pulls()
    assert pr["head"] == key().branch and pr["base"] == "main" and pr["labels"] == [key().label]
    assert pr["body"] == f"Body\n\n{key().marker}\n"
    assert git("ls-remote", "origin", f"refs/heads/{key().branch}", cwd=work)


def test_create_answer_lost_finds_the_pr_instead_of_opening_another(
    github: FakeGitHub, ctx: Any, work: Path
) -> None:
    from gitledger.github.writes import open_pull_request

    github.inject("POST", PULLS, drop_after_effect(), times=1)
    with GitRepo.discover(work) as gr:
        outcome = open_pull_request(ctx, key(), title="Fix", body="", git_repo=gr)
    assert outcome.status == "existing" and outcome.found_by == "head"
    assert len(github.pulls()) == 1
    assert github.count_requests("POST", PULLS) == 1  # never re-sent


def test_create_5xx_is_resent_once_and_only_after_a_look(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.writes import open_pull_request

    github.inject("POST", PULLS, status(502), times=None)
    with GitRepo.discover(work) as gr, pytest.raises(WriteUnknownError, match="rerun to try again"):
        open_pull_request(ctx, key(), title="Fix", body="", git_repo=gr)
    assert github.pulls() == []
    trail = [(r.method, r.query.get("head", "")) for r in github.requests if r.path.endswith("/pulls")]
    head = f"acme:{key().branch}"
    look = [("GET", head), ("GET", "")]  # head filter, then the marker scan (labels are on /issues)
    assert trail == [*look, ("POST", ""), *look, ("POST", ""), *look]


def test_create_5xx_then_success_makes_one_pr(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.writes import open_pull_request

    github.inject("POST", PULLS, status(503), times=1)
    with GitRepo.discover(work) as gr:
        outcome = open_pull_request(ctx, key(), title="Fix", body="", git_repo=gr)
    assert outcome.status == "created" and len(github.pulls()) == 1
    assert outcome.warnings and "HTTP 503" in outcome.warnings[0]


def test_422_already_exists_reports_the_existing_pr(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.writes import open_pull_request

    # An open PR for the same head, invisible to the first look (GitHub lag, or a concurrent worker):
    pr = open_pr(github, work, key().branch)
    original, looks = ctx.find_pull, []

    def find_pull(step: StepKey, marker_scan: bool = True) -> Any:
        looks.append(step)
        return None if len(looks) == 1 else original(step, marker_scan)

    ctx.find_pull = find_pull
    with GitRepo.discover(work) as gr:
        outcome = open_pull_request(ctx, key(), title="Fix", body="", git_repo=gr)
    assert outcome.status == "existing" and outcome.url == pr.html_url
    assert github.count_requests("POST", PULLS, status=422) == 1 and len(github.pulls()) == 1


def test_post_comment_is_idempotent(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.writes import post_comment

    pr = open_pr(github, work, "to-comment")
    github.inject("POST", r"/issues/\d+/comments$", drop_after_effect(), times=1)
    first = post_comment(ctx, key(step="notify"), pr.number, "Done")
    second = post_comment(ctx, key(step="notify"), pr.number, "Done")
    assert first.status == second.status == "existing" and first.url == second.url
    assert len(github.comments(pr.number)) == 1
    third = post_comment(ctx, key("other", "notify"), pr.number, "Done")
    assert third.status == "created" and len(github.comments(pr.number)) == 2


def test_oversized_body_is_refused_before_any_call(github: FakeGitHub, ctx: Any, work: Path) -> None:
    from gitledger.github.writes import open_pull_request

    with GitRepo.discover(work) as gr, pytest.raises(UsageError, match="65536"):
        open_pull_request(ctx, key(), title="Fix", body="x" * 65536, git_repo=gr)
    assert github.requests == []


def test_step_from_env_round_trips_with_custom_prefixes() -> None:
    from gitledger.github.writes import step_from_env
    from gitledger.local.command import step_env

    names = Names(branch_prefix="bots/", label_prefix="gl/")
    step = StepKey.derive("T-9", "open-pr", Content.text("c"), names)
    rebuilt = step_from_env(step_env(step))
    assert rebuilt is not None and rebuilt.as_dict() == step.as_dict()
    assert step_from_env({}) is None
    with pytest.raises(UsageError, match="does not belong"):
        step_from_env({**step_env(step), "GITLEDGER_BRANCH": "elsewhere"})
    with pytest.raises(UsageError, match="does not match"):
        step_from_env({**step_env(step), "GITLEDGER_TASK": "T-10"})


def test_context_from_settings_for_a_repository(github: FakeGitHub) -> None:
    with GitHubContext.from_settings(
        repo=REPO, api_url=github.url, env={"GH_TOKEN": TOKEN, "GITLEDGER_GITHUB_WRITE_INTERVAL": "0"}
    ) as c:
        assert c.full_name == REPO and c.default_branch() == "main"
        assert list(c.iter_pulls()) == []


def test_unreachable_api_is_retried_then_explained() -> None:
    env = {"GH_TOKEN": TOKEN, "GITLEDGER_GITHUB_BACKOFF": "0.01", "GITLEDGER_GITHUB_RETRIES": "2"}
    with GitHubContext.from_settings(repo=REPO, api_url="http://127.0.0.1:1", env=env) as c:
        with pytest.raises(GitHubError, match=r"connection failed .*Connection refused"):
            c.find_pull(key())
        assert (c.calls.total, c.calls.retries, c.calls.failures) == (3, 2, 3)
