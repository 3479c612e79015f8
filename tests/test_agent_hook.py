"""The agent hook's protocol per agent (golden outputs), its decisions, and failing closed.

Payloads follow each agent's documentation (shared/AGENTS.md §1): Claude Code's PreToolUse,
PostToolUse, PostToolUseFailure, SessionStart and Stop; Codex's PreToolUse/PostToolUse; Gemini
CLI's BeforeTool/AfterTool/AfterAgent. GitHub is testing/fakegithub/, git the real binary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github import Auth, Github

from gitledger.core.keys import Content, StepKey
from gitledger.features.agent.guard import STEP
from testing import fakegithub
from testing.fakegithub import FakeGitHub
from testing.repos import ROOT, git, init_repo, tmpfs_works
from tests.agent_support import REPO, agent_repo, bash, denied, hook, hook_process
from tests.faults.forge import FAR_FUTURE, PAST, forge


@pytest.fixture
def bench(github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    workdir = agent_repo(tmp_path / "agent", github.bare_path(REPO), ["agent/T1", "agent/T2"])
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    monkeypatch.setenv("GITHUB_API_URL", github.url)
    monkeypatch.setenv("GITLEDGER_GITHUB_BACKOFF", "0.01")
    monkeypatch.setenv("GITLEDGER_GITHUB_RETRIES", "2")
    monkeypatch.setenv("GITLEDGER_TASK", "T1")
    monkeypatch.setenv("GITLEDGER_AGENT_PID", str(__import__("os").getpid()))
    gh = Github(auth=Auth.Token("test-token"), **github.pygithub_kwargs()).get_repo(REPO)
    yield {"dir": workdir, "server": github, "repo": gh}


PR = "gh pr create --head agent/T1 --base main --title 'Add paging' --body 'Adds paging.'"


def _open_pr(bench: dict[str, Any], command: str = PR, tool_use_id: str = "toolu_1") -> str:
    code, out, err = hook("claude", bash("PreToolUse", command, bench["dir"], tool_use_id=tool_use_id))
    assert (code, out, err) == (0, "", ""), err
    url = bench["repo"].create_pull(title="Add paging", body="x", head="agent/T1", base="main").html_url
    post = bash("PostToolUse", command, bench["dir"], tool_use_id=tool_use_id)
    post["tool_response"] = {"stdout": url + "\n", "stderr": "", "interrupted": False, "isImage": False}
    assert hook("claude", post) == (0, "", "")
    return str(url)


def test_claude_golden_deny_of_a_reworded_pr(bench: dict[str, Any]) -> None:
    url = _open_pr(bench)
    reworded = "gh pr create --title 'Paginate the users endpoint' --body 'New body' --head agent/T1"
    code, out, err = hook(
        "claude", bash("PreToolUse", reworded, bench["dir"], session="s2", tool_use_id="t2")
    )
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": (
                f"gitledger: task T1 already has pull request #1 (open) from branch agent/T1: {url}. Do not "
                "open another. To change it, push to agent/T1 or run: gh pr edit 1 --title ... --body ..."
            ),
        }
    }
    # one PR per task: another head branch of the same task is refused too, and so is pushing it
    other = "gh pr create --head agent/T2 --title 'x' --body 'y'"
    assert "already has pull request #1" in str(
        denied(*hook("claude", bash("PreToolUse", other, bench["dir"]))[:2])
    )
    push = bash("PreToolUse", "git push -u origin agent/T2", bench["dir"])
    assert "Push your commits to agent/T1" in str(denied(*hook("claude", push)[:2]))
    for options in ("-C .", "-c push.default=current", "--no-pager -C ../agent"):  # git's own options
        push = bash("PreToolUse", f"git {options} push -u origin agent/T2", bench["dir"])
        assert "Push your commits to agent/T1" in str(denied(*hook("claude", push)[:2])), options
    assert hook("claude", bash("PreToolUse", "git push origin agent/T1", bench["dir"])) == (0, "", "")


@pytest.mark.parametrize(
    "wrapped",
    [
        "(gh pr create --title 'Paginate' --body 'New' --head agent/T1)",
        "{ gh pr create --title 'Paginate' --head agent/T1; }",
        "if true; then gh pr create --title 'Paginate' --head agent/T1; fi",
        "sh -c 'gh pr create --title Paginate --head agent/T1'",
        "bash -lc \"cd . && gh pr create --title 'Paginate' --head agent/T1\"",
        "command gh pr create --title Paginate --head agent/T1",
        "env GH_PROMPT_DISABLED=1 gh pr create --title Paginate --head agent/T1",
        "timeout 60 /usr/bin/gh pr create --title Paginate --head agent/T1",
        "gh pr create --head $(git branch --show-current) --title Paginate --head agent/T1",
        "PR_URL=$(gh pr create --title Paginate --head agent/T1) && echo $PR_URL",
        'echo "Opened: `gh pr create --title Paginate --head agent/T1`"',
        "gh pr new --title Paginate --head agent/T1",
        "gh api https://api.github.com/repos/acme/widgets/pulls -f head=agent/T1 -f base=main -f title=P",
        "eval 'gh pr create --title Paginate --head agent/T1'",
        "bash <<'EOF'\nset -e\ngh pr create --title Paginate --head agent/T1\nEOF",
        'sh -s <<< "gh pr create --title Paginate --head agent/T1"',
    ],
)
def test_a_reworded_pr_wrapped_in_a_subshell_a_shell_or_a_wrapper_is_denied(
    bench: dict[str, Any], wrapped: str
) -> None:
    """Each of these runs gh pr create; the guard let them all pass (nothing recorded, a second PR)."""
    url = _open_pr(bench)
    code, out, err = hook("claude", bash("PreToolUse", wrapped, bench["dir"], session="s2", tool_use_id="t2"))
    assert (code, err) == (0, "")
    assert f"task T1 already has pull request #1 (open) from branch agent/T1: {url}" in str(denied(code, out))


CURRENT = [
    '"$(git branch --show-current)"',
    "`git rev-parse --abbrev-ref HEAD`",
    "$(git symbolic-ref --short HEAD)",
]


@pytest.mark.parametrize("current", CURRENT)
def test_a_head_given_as_the_current_branchs_substitution_is_that_branch(
    bench: dict[str, Any], monkeypatch: pytest.MonkeyPatch, current: str
) -> None:
    """Without a task a pull request is keyed on its head. ``--head "$(git branch --show-current)"``
    was keyed on that text, so after ``--head agent/T1`` it was a new key: now it is the current
    branch, as with no ``--head`` at all."""
    monkeypatch.delenv("GITLEDGER_TASK")
    url = _open_pr(bench)
    git("checkout", "-q", "agent/T1", cwd=bench["dir"])
    retry = f"gh pr create --head {current} --title 'Paginate' --body 'New words'"
    reason = denied(*hook("claude", bash("PreToolUse", retry, bench["dir"], session="s2"))[:2])
    assert reason is not None and f"pull request #1 (open) from branch agent/T1: {url}" in reason
    other = bash("PreToolUse", f"gh pr create --head {current} --title x", bench["dir"])
    git("checkout", "-q", "agent/T2", cwd=bench["dir"])
    assert hook("claude", other) == (0, "", "")  # agent/T2 has none


@pytest.mark.parametrize("current", [*CURRENT, "@", "HEAD:$(git branch --show-current)"])
def test_a_push_of_the_current_branchs_substitution_is_a_push_of_that_branch(
    bench: dict[str, Any], current: str
) -> None:
    """``git push -u origin "$(git branch --show-current)"`` was keyed on that text: with the task's PR
    on agent/T1 it was refused as "a new branch $(git branch --show-current)" while on agent/T1."""
    _open_pr(bench)
    git("checkout", "-q", "agent/T1", cwd=bench["dir"])
    push = bash("PreToolUse", f"git push -u origin {current}", bench["dir"], tool_use_id="p1")
    assert hook("claude", push) == (0, "", "")
    git("checkout", "-q", "agent/T2", cwd=bench["dir"])
    reason = denied(*hook("claude", bash("PreToolUse", f"git push origin {current}", bench["dir"]))[:2])
    assert reason is not None and "Do not push a new branch agent/T2" in reason


@pytest.mark.parametrize("head", ['"$BRANCH"', "agent/$TASK", '"feature-$(date +%s)"'])
def test_a_head_the_shell_expands_otherwise_is_refused_with_the_reason(
    bench: dict[str, Any], head: str
) -> None:
    """Keyed on its text, a retry that spells the branch out would be a new key: the call is blocked
    (one line on stderr, exit 2) with what to write instead."""
    code, out, err = hook("claude", bash("PreToolUse", f"gh pr create --head {head} --title t", bench["dir"]))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "cannot tell the head branch" in err and "is expanded by the shell: write the branch" in err


def test_a_pr_opened_after_cd_into_another_repository_is_keyed_on_that_repository(
    bench: dict[str, Any], tmp_path: Path
) -> None:
    """``cd ../gadgets && gh pr create`` acts on acme/gadgets. It was keyed on the hook's repository
    (acme/widgets): the task's PR there was then refused as a second one, pointing at gadgets' PR."""
    server: FakeGitHub = bench["server"]
    other = init_repo(tmp_path / "gadgets")
    git("remote", "add", "origin", "https://github.com/acme/gadgets.git", cwd=other)
    git("push", "-q", str(server.add_repo("acme/gadgets")), "main", cwd=other)
    git("checkout", "-q", "-b", "feat", cwd=other)
    git("commit", "-q", "--allow-empty", "-m", "feat", cwd=other)
    git("push", "-q", str(server.bare_path("acme/gadgets")), "feat", cwd=other)
    there = f"cd {other} && gh pr create --head feat --title 'Gadget paging' --body 'x'"
    assert hook("claude", bash("PreToolUse", there, bench["dir"], tool_use_id="g1")) == (0, "", "")
    gadgets = Github(auth=Auth.Token("test-token"), **server.pygithub_kwargs()).get_repo("acme/gadgets")
    url = gadgets.create_pull(title="Gadget paging", body="x", head="feat", base="main").html_url
    post = bash("PostToolUse", there, bench["dir"], tool_use_id="g1")
    post["tool_response"] = {"stdout": url + "\n", "stderr": "", "interrupted": False, "isImage": False}
    assert hook("claude", post) == (0, "", "")
    assert hook("claude", bash("PreToolUse", PR, bench["dir"])) == (0, "", "")  # widgets' own PR
    reworded = f"cd {other} && gh pr create --head feat --title 'Paginate gadgets' --body 'y'"
    reason = denied(*hook("claude", bash("PreToolUse", reworded, bench["dir"], session="s2"))[:2])
    assert reason is not None and url in reason


@pytest.mark.parametrize("flag", ["--dry-run", "--web", "-w"])
def test_a_pr_create_that_opens_nothing_does_not_stand_for_the_tasks_pr(
    bench: dict[str, Any], flag: str
) -> None:
    """``gh pr create --dry-run`` prints what it would do, ``--web`` opens a browser: neither opens a pull
    request. Both were claimed and recorded done (with no URL), and the real ``gh pr create`` after
    them was refused as a second pull request."""
    preview = f"gh pr create {flag} --head agent/T1 --title 'Add paging'"
    assert hook("claude", bash("PreToolUse", preview, bench["dir"], tool_use_id="d1")) == (0, "", "")
    post = bash("PostToolUse", preview, bench["dir"], tool_use_id="d1")
    post["tool_response"] = {
        "stdout": "Would have created a Pull Request with:\ntitle: Add paging\n",
        "stderr": "",
    }
    assert hook("claude", post) == (0, "", "")
    assert hook("claude", bash("PreToolUse", PR, bench["dir"], tool_use_id="d2")) == (0, "", "")
    issue = f"gh issue create {flag} --title 'Flaky export_job.py'"
    assert hook("claude", bash("PreToolUse", issue, bench["dir"], tool_use_id="d3")) == (0, "", "")


@pytest.mark.parametrize("made", [True, False])
def test_a_pr_call_that_names_no_url_is_settled_by_github_not_recorded_as_a_pr(
    bench: dict[str, Any], made: bool
) -> None:
    """``gh pr create … > /dev/null`` (made, URL not shown) and ``gh pr create … || true`` after gh
    failed (not made) both end well and name no URL. Both were recorded done without a URL: in the
    second case the task's real ``gh pr create`` was then refused as 'pull request #None'."""
    quiet = "gh pr create --head agent/T1 --title 'Add paging' --body 'x' > /dev/null || true"
    assert hook("claude", bash("PreToolUse", quiet, bench["dir"], tool_use_id="q1")) == (0, "", "")
    url = None
    if made:
        url = bench["repo"].create_pull(title="Add paging", body="x", head="agent/T1", base="main").html_url
    post = bash("PostToolUse", quiet, bench["dir"], tool_use_id="q1")
    post["tool_response"] = {"stdout": "", "stderr": "", "interrupted": False, "isImage": False}
    assert hook("claude", post) == (0, "", "")
    again = bash("PreToolUse", PR, bench["dir"], session="s2", tool_use_id="q2")
    if made:
        reason = denied(*hook("claude", again)[:2])
        assert reason is not None and f"pull request #1 (open) from branch agent/T1: {url}" in reason
    else:
        assert hook("claude", again) == (0, "", "")  # no PR was made: this one goes ahead


def test_a_directory_the_shell_expands_is_refused_where_it_would_name_the_repository(
    bench: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cd "$DIR" && gh pr create`` was read in the hook's repository (the path does not exist as
    written): keyed, and checked against GitHub, on what may be another repository."""
    unknown = 'cd "$DIR" && gh pr create --title t --body b'
    code, out, err = hook("claude", bash("PreToolUse", unknown, bench["dir"]))
    assert code == 2 and out == "" and "which the shell expands" in err and err.count("\n") == 1
    told = 'cd "$DIR" && gh pr create -R acme/widgets --head agent/T1 --title t --body b'
    assert hook("claude", bash("PreToolUse", told, bench["dir"])) == (0, "", "")  # nothing read there
    monkeypatch.delenv("GITLEDGER_TASK")
    push = 'cd "$DIR" && git push origin'  # a push without a task is not checked at all
    assert hook("claude", bash("PreToolUse", push, bench["dir"])) == (0, "", "")


def test_a_pr_made_outside_the_ledger_is_found_on_github_in_any_state(bench: dict[str, Any]) -> None:
    pr = bench["repo"].create_pull(title="t", body="b", head="agent/T1", base="main")
    pr.edit(state="closed")
    reason = denied(*hook("claude", bash("PreToolUse", PR, bench["dir"]))[:2])
    assert (
        reason is not None
        and "(closed)" in reason
        and "gh pr reopen 1" in reason
        and "found on GitHub" in reason
    )


def test_comments_and_issues_keyed_on_task_and_target(bench: dict[str, Any]) -> None:
    issue = bench["repo"].create_issue(title="Tracking target_1").number
    first = f"gh issue comment {issue} --body 'Tests pass on build_7; ready for review.'"
    assert hook("claude", bash("PreToolUse", first, bench["dir"])) == (0, "", "")
    comment = bench["repo"].get_issue(issue).create_comment("Tests pass on build_7; ready for review.")
    post = bash("PostToolUse", first, bench["dir"])
    post["tool_response"] = {"stdout": comment.html_url + "\n", "stderr": ""}
    assert hook("claude", post)[0] == 0
    again = f"gh pr comment {issue} -b 'All tests are green for build_7, ready to be reviewed.'"
    reason = denied(*hook("claude", bash("PreToolUse", again, bench["dir"], tool_use_id="t9"))[:2])
    assert reason is not None and comment.html_url in reason and "PATCH" in reason
    # the repository named in another case is the same one (its comments too)
    for spelling in ("-R ACME/Widgets", "--repo=https://github.com/Acme/WIDGETS.git"):
        cased = f"gh issue comment {issue} {spelling} --body 'build_7 is green, can someone review it?'"
        reason = denied(*hook("claude", bash("PreToolUse", cased, bench["dir"], tool_use_id="t8"))[:2])
        assert reason is not None and comment.html_url in reason, spelling
    different = f"gh issue comment {issue} --body 'Found a regression in export_job.py, investigating.'"
    issue_first = "gh issue create --title 'Flaky export_job.py on CI' --body 'Seen twice.'"
    assert hook("claude", bash("PreToolUse", issue_first, bench["dir"], tool_use_id="t11")) == (0, "", "")
    # gh's alias of create, reworded, while the first call is in flight: the same issue
    issue_new = "gh issue new -t 'export_job.py is flaky on CI' -b 'Seen twice now.'"
    reason = denied(*hook("claude", bash("PreToolUse", issue_new, bench["dir"], tool_use_id="t12"))[:2])
    assert reason is not None and "is being made right now" in reason
    assert hook("claude", bash("PreToolUse", different, bench["dir"], tool_use_id="t10")) == (0, "", "")
    # without a task, comments are refused (exit 2) with what to set
    code, out, err = hook("claude", bash("PreToolUse", first, bench["dir"]), {"GITLEDGER_TASK": ""})
    assert code == 2 and out == "" and "set GITLEDGER_TASK" in err.replace("Set", "set")


def test_another_repository_named_in_another_case_is_the_same_one(bench: dict[str, Any]) -> None:
    """Only the hook's own repository was matched without case: a comment on acme/gadgets #1 was keyed
    on the spelling of -R, so a reworded retry with -R Acme/Gadgets (or the issue's URL) was a new key,
    and GitHub's copy, reworded, is under the high bar: a second comment."""
    server: FakeGitHub = bench["server"]
    server.add_repo("acme/gadgets")
    gadgets = Github(auth=Auth.Token("test-token"), **server.pygithub_kwargs()).get_repo("acme/gadgets")
    issue = gadgets.create_issue(title="Tracking target_1")
    first = f"gh issue comment {issue.number} -R acme/gadgets -b 'Tests pass on build_7; ready for review.'"
    assert hook("claude", bash("PreToolUse", first, bench["dir"])) == (0, "", "")
    comment = issue.create_comment("Tests pass on build_7; ready for review.")
    post = bash("PostToolUse", first, bench["dir"])
    post["tool_response"] = {"stdout": comment.html_url + "\n", "stderr": ""}
    assert hook("claude", post)[0] == 0
    body = "-b 'build_7 is green, can someone review it?'"
    for spelling in (
        "1 -R Acme/Gadgets",
        "1 --repo=ACME/GADGETS",
        "https://github.com/Acme/Gadgets/issues/1",
    ):
        again = bash("PreToolUse", f"gh pr comment {spelling} {body}", bench["dir"], tool_use_id="t9")
        reason = denied(*hook("claude", again)[:2])
        assert reason is not None and comment.html_url in reason, spelling


def test_failure_is_recorded_and_the_retry_is_allowed(bench: dict[str, Any]) -> None:
    assert hook("claude", bash("PreToolUse", PR, bench["dir"])) == (0, "", "")
    fail = bash("PostToolUseFailure", PR, bench["dir"], error="Exit code 1\nno commits", is_interrupt=False)
    assert hook("claude", fail) == (0, "", "")
    assert hook("claude", bash("PreToolUse", PR, bench["dir"], tool_use_id="t3")) == (0, "", "")


def test_a_comment_posted_by_a_call_that_then_failed_is_found_and_not_posted_again(
    bench: dict[str, Any],
) -> None:
    """The command failed after gh posted (a later command of the line, a timeout): the claim was
    recorded failed, and the reworded retry, compared with GitHub's comments at the high bar only,
    posted a second comment."""
    issue = bench["repo"].create_issue(title="Tracking target_2").number
    first = f"gh issue comment {issue} --body 'Tests pass on build_7; ready for review.' && make lint"
    assert hook("claude", bash("PreToolUse", first, bench["dir"])) == (0, "", "")
    comment = bench["repo"].get_issue(issue).create_comment("Tests pass on build_7; ready for review.")
    failure = bash(
        "PostToolUseFailure", first, bench["dir"], error="Exit code 2\nmake: *** lint", is_interrupt=False
    )
    assert hook("claude", failure)[0] == 0
    again = f"gh issue comment {issue} --body 'build_7 is green, can someone review it?'"
    reason = denied(*hook("claude", bash("PreToolUse", again, bench["dir"], tool_use_id="t2"))[:2])
    assert reason is not None and comment.html_url in reason
    # a call that failed before posting is still failed: its retry goes ahead
    other = f"gh issue comment {issue} --body 'Regression in export_job.py, investigating.'"
    assert hook("claude", bash("PreToolUse", other, bench["dir"], tool_use_id="t3")) == (0, "", "")
    assert (
        hook("claude", bash("PostToolUseFailure", other, bench["dir"], tool_use_id="t3", error="x"))[0] == 0
    )
    assert hook("claude", bash("PreToolUse", other, bench["dir"], tool_use_id="t4")) == (0, "", "")


def test_session_start_briefing_and_stop_gate(bench: dict[str, Any]) -> None:
    url = _open_pr(bench)
    start = {
        "session_id": "s9",
        "cwd": str(bench["dir"]),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    code, out, _ = hook("claude", start)
    context = json.loads(out)["hookSpecificOutput"]
    assert code == 0 and context["hookEventName"] == "SessionStart"
    assert f"pull request #1 from branch agent/T1: {url}" in context["additionalContext"]
    stop = {
        "session_id": "s9",
        "cwd": str(bench["dir"]),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    assert hook("claude", stop) == (0, "", "")
    # a half-done comment whose owner is alive (this process) keeps the model working, once
    issue = bench["repo"].create_issue(title="Tracking target_2").number
    hook("claude", bash("PreToolUse", f"gh issue comment {issue} --body 'Done: shipped v2.0'", bench["dir"]))
    code, out, _ = hook("claude", stop)
    assert (
        code == 0
        and json.loads(out)["decision"] == "block"
        and "gitledger resolve" in json.loads(out)["reason"]
    )
    assert hook("claude", {**stop, "stop_hook_active": True}) == (0, "", "")


def test_codex_and_gemini_formats(bench: dict[str, Any]) -> None:
    _open_pr(bench)
    codex = {
        "session_id": "c1",
        "transcript_path": None,
        "cwd": str(bench["dir"]),
        "hook_event_name": "PreToolUse",
        "model": "gpt-5",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": PR},
        "tool_use_id": "call_1",
    }
    code, out, _ = hook("codex", codex)
    data = json.loads(out)
    assert code == 0 and set(data) == {"hookSpecificOutput"}
    assert set(data["hookSpecificOutput"]) == {
        "hookEventName",
        "permissionDecision",
        "permissionDecisionReason",
    }
    gemini = {
        "session_id": "g1",
        "transcript_path": "/t",
        "cwd": str(bench["dir"]),
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-01-01T00:00:00Z",
        "tool_name": "run_shell_command",
        "tool_input": {"command": PR},
    }
    code, out, _ = hook("gemini", gemini)
    data = json.loads(out)
    assert code == 0 and data["decision"] == "deny" and "pull request #1" in data["reason"]
    mcp = {
        **gemini,
        "tool_name": "mcp__github__create_pull_request",
        "tool_input": {
            "owner": "acme",
            "repo": "widgets",
            "head": "agent/T1",
            "base": "main",
            "title": "Other",
        },
    }
    assert json.loads(hook("gemini", mcp)[1])["decision"] == "deny"


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_unrecognised_calls_pass_with_no_output(agent: str, tmp_path: Path) -> None:
    name = "BeforeTool" if agent == "gemini" else "PreToolUse"
    tool = "run_shell_command" if agent == "gemini" else "Bash"
    for command in ("ls -la", "pytest -q", "git status", "echo 'gh pr create'"):
        payload = {
            "session_id": "x",
            "cwd": str(tmp_path),
            "hook_event_name": name,
            "tool_name": tool,
            "tool_input": {"command": command},
        }
        assert hook(agent, payload) == (0, "", ""), command


def test_unrecognised_calls_import_no_typer_no_pygithub_and_touch_no_network(tmp_path: Path) -> None:
    payload = json.dumps(bash("PreToolUse", "pytest -q && git status", tmp_path))
    script = (
        "import io, sys, socket\n"
        "def no(*a, **k): raise AssertionError('network')\n"
        "socket.socket.connect = no\n"
        "sys.stdin = io.StringIO(sys.argv[1])\n"
        "from gitledger.cli import main\n"
        "rc = main(['agent-hook', 'claude'])\n"
        "bad = [m for m in ('typer', 'github', 'yaml', 'requests', 'gitledger.session', 'gitledger.git.repo',"
        " 'gitledger.core.keys', 'gitledger.core.protocol', 'gitledger.config') if m in sys.modules]\n"
        "print(rc, bad)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, payload], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert proc.stdout.strip() == "0 []", proc.stderr


def _pre(bench: dict[str, Any]) -> tuple[int, str, str]:
    return hook("claude", bash("PreToolUse", PR, bench["dir"]))


def test_fails_closed_when_github_is_down(bench: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")
    code, out, err = _pre(bench)
    assert code == 2 and out == "" and "not acting" in err and err.count("\n") == 1


def test_fails_closed_on_a_5xx_storm(bench: dict[str, Any]) -> None:
    bench["server"].inject("*", r"/pulls", fakegithub.status(502), times=None)
    code, out, err = _pre(bench)
    assert code == 2 and out == "" and "502" in err


def test_fails_closed_on_a_bad_token(bench: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "wrong")
    code, _, err = _pre(bench)
    assert code == 2 and "401" in err


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "not json",
        "[]",
        '{"hook_event_name": "PreToolUse"}',
        '{"tool_name": "Bash"}',
        '{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": "gh pr create"}',
        "[" * 100_000 + "]" * 100_000,
        '{"a": ' * 100_000 + "1" + "}" * 100_000,
    ],
)
def test_fails_closed_on_malformed_input(payload: str) -> None:
    code, out, err = hook("claude", payload)
    assert code == 2 and out == "" and err.startswith("gitledger:") and err.count("\n") == 1
    assert "internal error" not in err, err  # JSON nested too deeply was one (a RecursionError)


def test_fails_closed_on_an_internal_error(bench: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from gitledger.features.agent import guard

    def boom(self: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(guard.AgentGuard, "pre", boom)
    code, out, err = _pre(bench)
    assert code == 2 and out == "" and "internal error" in err and "a bug" in err


def test_never_asks(bench: dict[str, Any]) -> None:
    _open_pr(bench)
    for agent in ("claude", "codex"):
        assert '"ask"' not in hook(agent, bash("PreToolUse", PR, bench["dir"], tool_use_id="z"))[1]


def test_the_hook_as_its_own_process_writes_and_answers_before_it_exits(bench: dict[str, Any]) -> None:
    """``python -m gitledger agent-hook`` leaves without the interpreter's teardown (os._exit): its
    answer must be on the pipe and its ledger records on disk by then."""
    first = hook_process("claude", bash("PreToolUse", PR, bench["dir"]), cwd=bench["dir"])
    assert (first.returncode, first.stdout, first.stderr) == (0, "", "")
    held = hook_process("claude", bash("PreToolUse", PR, bench["dir"], session="s2", tool_use_id="t2"))
    assert (
        held.returncode == 0
        and "being made right now"
        in json.loads(held.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    )  # the first process's claim was on disk when it exited
    url = bench["repo"].create_pull(title="Add paging", body="x", head="agent/T1", base="main").html_url
    post = bash("PostToolUse", PR, bench["dir"])
    post["tool_response"] = {"stdout": url + "\n", "stderr": "", "interrupted": False, "isImage": False}
    assert hook_process("claude", post).returncode == 0
    again = hook_process("claude", bash("PreToolUse", PR, bench["dir"], session="s3", tool_use_id="t3"))
    reason = json.loads(again.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert again.returncode == 0 and url in reason
    broken = hook_process("claude", "{not json")
    assert broken.returncode == 2 and broken.stdout == "" and broken.stderr.count("\n") == 1


def _refused(proc: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a hook process that failed closed (exit 2, nothing on stdout)."""
    assert (proc.returncode, proc.stdout) == (2, ""), proc
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gitledger: "), proc.stderr
    assert "internal error" not in proc.stderr and "not acting" in proc.stderr, proc.stderr
    return proc.stderr


@pytest.mark.parametrize("command", [5, None, "missing", [5, None], {"gh": "pr create"}])
@pytest.mark.parametrize(
    ("agent", "event", "tool"),
    [("claude", "PreToolUse", "Bash"), ("gemini", "BeforeTool", "run_shell_command")],
)
def test_a_shell_call_without_a_command_line_fails_closed(
    tmp_path: Path, agent: str, event: str, tool: str, command: object
) -> None:
    tool_input = {} if command == "missing" else {"command": command}
    payload = {"session_id": "s", "cwd": str(tmp_path), "hook_event_name": event, "tool_name": tool}
    err = _refused(hook_process(agent, {**payload, "tool_input": tool_input}, cwd=tmp_path))
    assert f"the {event} input has no command line" in err


def test_a_working_directory_with_a_nul_fails_closed_with_one_line(tmp_path: Path) -> None:
    """A NUL in the hook's ``cwd`` was an internal error ("embedded null byte")."""
    payload = bash("PreToolUse", "gh pr create --head h", tmp_path) | {"cwd": "/tmp/a\x00b"}
    assert "cannot open '/tmp/a\\x00b': embedded null byte" in _refused(hook_process("claude", payload))


@pytest.mark.parametrize(
    "state,fields",
    [
        ("done", {"ref": {"a": 1}}),
        ("done", {"agent": [1]}),
        ("done", {"agent": {"kind": "issue", "text": {"a": 1}}}),
        ("attempting", {"lease_until": FAR_FUTURE, "owner": [1]}),
        ("attempting", {"lease_until": FAR_FUTURE, "agent": "x"}),
        ("attempting", {"lease_until": PAST, "agent": {"kind": "pr", "repo": 5, "head": [1]}}),
        ("attempting", {"lease_until": PAST, "agent": {"kind": "comment", "repo": REPO, "target": "x"}}),
    ],
)
def test_a_forged_ledger_event_is_named_not_an_internal_error(
    tmp_path: Path, state: str, fields: dict[str, Any]
) -> None:
    """Anyone who can push the ledger refs can write any event: one whose ref, owner or agent details
    had another type made every hook event of the task an internal error ("Report it")."""
    workdir = init_repo(tmp_path / "agent")
    git("remote", "add", "origin", f"https://github.com/{REPO}.git", cwd=workdir)
    forge(workdir, StepKey.derive("T1", STEP["pr"], Content.args({"repo": REPO})), state, **fields)
    env = {"GITLEDGER_TASK": "T1", "GITHUB_TOKEN": "t", "GITHUB_API_URL": "http://127.0.0.1:9"}
    env["GITLEDGER_GITHUB_RETRIES"] = "0"  # nothing listens there
    events = [
        {"session_id": "s", "cwd": str(workdir), "hook_event_name": "SessionStart", "source": "startup"},
        {"session_id": "s", "cwd": str(workdir), "hook_event_name": "Stop", "stop_hook_active": False},
        bash("PreToolUse", "gh pr create --head agent/T1 --title t --body b", workdir),
    ]
    for payload in events:
        proc = hook_process("claude", payload, env=env, cwd=workdir)
        assert "internal error" not in proc.stderr and proc.stderr.count("\n") <= 1, proc.stderr
    if fields.get("ref"):
        assert "is corrupt (the ref of its done event is a dict)" in _refused(proc)


@pytest.mark.parametrize(
    "text,problem",
    [
        ("agent:\n  rules: 5\n", "line 2: agent.rules must be a list of rules"),
        ('agent:\n  rules:\n    - {tool: "(", effect: pr}\n', "agent.rules[0].tool is not a valid regular"),
    ],
)
def test_a_bad_agent_rule_in_the_config_is_named_not_an_internal_error(
    tmp_path: Path, text: str, problem: str
) -> None:
    """A .gitledger.yml the hook could not read for its rules was an internal error ("Report it")."""
    workdir = init_repo(tmp_path / "agent")
    (workdir / ".gitledger.yml").write_text(text)
    for command in ("gh pr create --head agent/T1 --title t --body b", "ls"):  # any call may be a rule's
        err = _refused(hook_process("claude", bash("PreToolUse", command, workdir), cwd=workdir))
        assert f"{workdir / '.gitledger.yml'} " in err and problem in err, err


def test_a_closed_stdin_fails_closed_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gitledger", "agent-hook", "claude", "pre"],
        preexec_fn=lambda: os.close(0),  # the hook started with <&-
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert "no hook input: stdin is closed" in _refused(proc)


def test_a_4_mb_title_is_answered_in_seconds(tmp_path: Path) -> None:
    """The shell words were read in quadratic time: 800 KB of title took 14 s, 4 MB minutes."""
    command = "gh pr create --head agent/T1 --body b --title '" + "word " * 800_000 + "'"
    started = time.monotonic()
    proc = hook_process("claude", bash("PreToolUse", command, tmp_path), cwd=tmp_path)  # timeout: 60 s
    assert time.monotonic() - started < 30
    assert "not inside a git repository" in _refused(proc)  # read, recognised, then refused


def test_a_full_disk_fails_closed_with_one_line(bench: dict[str, Any], tmp_path: Path) -> None:
    """The claim cannot be written (the repository's git directory is on a full tmpfs): the call is
    refused, naming the full disk; it was an internal error ("Report it")."""
    import shlex

    work = Path(bench["dir"])
    (tmp_path / "probe").mkdir()
    if not tmpfs_works(tmp_path / "probe"):
        pytest.skip("needs unshare and mount (a tmpfs in a mount namespace of its own: root)")
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(bash("PreToolUse", PR, work)))
    dotgit, saved = shlex.quote(str(work / ".git")), shlex.quote(str(tmp_path / "saved-git"))
    hook_cmd = shlex.join([sys.executable, "-m", "gitledger", "agent-hook", "claude"])
    script = f"""
        cp -a {dotgit} {saved} && mount -t tmpfs -o size=4m tmpfs {dotgit} || exit 99
        cp -a {saved}/. {dotgit}/ || exit 98
        head -c 8m /dev/zero > {dotgit}/filler 2>/dev/null
        {hook_cmd} < {shlex.quote(str(payload))}
    """
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "gitledger: the disk is full (No space left on device" in _refused(proc)
    assert "could not record this call, not acting. Free space, then retry the call" in proc.stderr


def test_each_comment_of_a_line_records_its_own_url(bench: dict[str, Any]) -> None:
    """A line that posts on two targets prints two comment URLs: both comments were recorded with the
    first one, so the retry on the second target was refused naming the comment on the first."""
    first = bench["repo"].create_issue(title="Tracking target_1")
    second = bench["repo"].create_issue(title="Tracking target_2")
    line = (
        f"gh issue comment {first.number} --body 'Tests pass on build_7.' && "
        f"gh issue comment {second.number} --body 'Regression in export_job.py, investigating.'"
    )
    assert hook("claude", bash("PreToolUse", line, bench["dir"])) == (0, "", "")
    one = first.create_comment("Tests pass on build_7.").html_url
    two = second.create_comment("Regression in export_job.py, investigating.").html_url
    post = bash("PostToolUse", line, bench["dir"])
    post["tool_response"] = {"stdout": f"{one}\n{two}\n", "stderr": ""}
    assert hook("claude", post)[0] == 0
    again = f"gh issue comment {second.number} --body 'Investigating a regression in export_job.py'"
    reason = denied(*hook("claude", bash("PreToolUse", again, bench["dir"], tool_use_id="t2"))[:2])
    assert reason is not None and two in reason and one not in reason


@pytest.mark.parametrize(
    "command",
    [
        "gh pr comment {n} --body-file note.md",
        "gh api repos/acme/widgets/issues/{n}/comments -F body=@note.md",
    ],
)
def test_a_comment_whose_body_file_the_line_removes_is_recorded(bench: dict[str, Any], command: str) -> None:
    """``gh pr comment N --body-file F && rm F``: PostToolUse read F again, found nothing, and recorded
    nothing (a warning): the claim stayed open, the reworded retry was "being made right now" and the
    model could not stop. The key needs no body: the claim's text is what was posted."""
    issue = bench["repo"].create_issue(title="Tracking target_1")
    note = bench["dir"] / "note.md"
    note.write_text("Tests pass on build_7; ready for review.\n")
    line = command.format(n=issue.number) + " && rm note.md"
    assert hook("claude", bash("PreToolUse", line, bench["dir"])) == (0, "", "")
    url = issue.create_comment("Tests pass on build_7; ready for review.").html_url
    note.unlink()
    post = bash("PostToolUse", line, bench["dir"])
    post["tool_response"] = {"stdout": url + "\n", "stderr": ""}
    assert hook("claude", post) == (0, "", "")
    again = f"gh pr comment {issue.number} --body 'build_7 is green, can someone review it?'"
    reason = denied(*hook("claude", bash("PreToolUse", again, bench["dir"], tool_use_id="t2"))[:2])
    assert reason is not None and url in reason and "right now" not in reason
    other = f"gh pr comment {issue.number} --body 'Found a regression in export_job.py, investigating.'"
    assert hook("claude", bash("PreToolUse", other, bench["dir"], tool_use_id="t3")) == (0, "", "")
