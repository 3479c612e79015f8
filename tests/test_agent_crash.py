"""The crash story of the agent guard: a simulated agent loop, SIGKILLed between effect and PostToolUse.

Each trial is one intended effect of one task (a PR, a comment or an issue). The first attempt runs
in a forked child — the "agent" — that calls the PreToolUse hook, makes the effect on GitHub with
the real PyGithub client (as ``gh`` would), and then calls the PostToolUse hook; the test SIGKILLs it
at a random point, most often right after the effect and before or during PostToolUse. Then the
agent "restarts" (a new session) and, as an LLM does, *rewords* the call; and once more. At the end
every intended effect exists exactly once on the fake GitHub server: no duplicate PR, comment or
issue, nothing missing. Real git, real PyGithub, a real HTTP server in another process.
"""

from __future__ import annotations

import json
import os
import random
import select
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github import Auth, Github

from testing.repos import ROOT
from tests.agent_support import REPO, agent_repo, bash, denied, hook

TRIALS = int(os.environ.get("GITLEDGER_AGENT_TRIALS", "210"))
SHARDS = 3  # the trials in three tests, so that parallel workers share them
TOKEN = "agent-token"

ISSUE_TITLES = [
    "Crash in {x} on empty input",
    "{x} crashes when given empty input",
    "Empty input makes {x} crash",
    "Fix crash in {x} with empty input",
]
COMMENTS = [
    "Tests pass on {x}; ready for review.",
    "All tests are green for {x}, this is ready to be reviewed.",
    "{x}: the test suite passes, ready for review now.",
    "Ready for review - tests pass on {x}.",
]
PR_TITLES = ["Add pagination to {x}", "Paginate {x}", "{x}: support pages", "Implement paging in {x}"]


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("fakegh")
    proc = subprocess.Popen(
        [sys.executable, "-m", "testing.fakegithub", "--repo", REPO, "--token", TOKEN, "--root", str(root)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # killed agents reset their connections: the server logs each one
        text=True,
    )
    assert proc.stdout is not None
    info = json.loads(proc.stdout.readline())
    try:
        yield info
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def _client(server: dict[str, Any]) -> Any:
    """The agent's own GitHub client (what ``gh`` would be), without PyGithub's pause between requests
    (0.25 s by default): it would make the trials wait, and ``gh`` does not pause."""
    pauses = {"seconds_between_requests": None, "seconds_between_writes": None}
    return Github(auth=Auth.Token(TOKEN), base_url=server["url"], **pauses)


def _command(kind: str, i: int, variant: int, target: int | None) -> str:
    x = f"module_{i}.py" if kind == "issue" else f"build_{i}" if kind == "comment" else f"users_{i}"
    if kind == "pr":
        title = PR_TITLES[variant % 4].format(x=x)
        quoted = shlex.quote(title)
        return f"gh pr create --head agent/T{i} --base main --title {quoted} --body {quoted}"
    if kind == "comment":
        return f"gh issue comment {target} --body {shlex.quote(COMMENTS[variant % 4].format(x=x))}"
    title = ISSUE_TITLES[variant % 4].format(x=x)
    return f"gh issue create --title {shlex.quote(title)} --body 'Seen in CI.'"


def _effect(gh_repo: Any, command: str) -> str:
    """What ``gh`` would do for the command (the tool itself, outside the guard): the URL it prints."""
    words = shlex.split(command)
    opts = {words[k]: words[k + 1] for k in range(len(words) - 1) if words[k].startswith("--")}
    if words[1:3] == ["pr", "create"]:
        return str(
            gh_repo.create_pull(
                title=opts["--title"], body=opts["--body"], head=opts["--head"], base="main"
            ).html_url
        )
    if words[1:3] == ["issue", "comment"]:
        return str(gh_repo.get_issue(int(words[3])).create_comment(opts["--body"]).html_url)
    return str(gh_repo.create_issue(title=opts["--title"], body=opts["--body"]).html_url)


def _attempt(
    workdir: Path, gh_repo: Any, task: str, session: str, command: str, report: Any = None
) -> str | None:
    """One agent attempt: Pre → effect → Post. Returns the deny reason, or None when it acted."""
    env = {"GITLEDGER_TASK": task, "GITLEDGER_AGENT_PID": str(os.getpid())}
    tool_use_id = f"toolu_{session}"
    code, out, err = hook(
        "claude", bash("PreToolUse", command, workdir, session=session, tool_use_id=tool_use_id), env
    )
    assert code in (0, 2), (code, err)
    if code == 2:
        raise AssertionError(f"failed closed: {err}")
    reason = denied(code, out)
    if reason is not None:
        return reason
    url = _effect(gh_repo, command)
    if report is not None:
        os.write(report, b"E")
    payload = bash("PostToolUse", command, workdir, session=session, tool_use_id=tool_use_id)
    payload["tool_response"] = {"stdout": url + "\n", "stderr": "", "interrupted": False, "isImage": False}
    code, out, err = hook("claude", payload, env)
    assert code == 0, err
    if report is not None:
        os.write(report, b"P")
    return None


@pytest.mark.parametrize("shard", range(SHARDS))
def test_reworded_retries_after_sigkill_never_duplicate(
    server: dict[str, Any], tmp_path: Path, shard: int
) -> None:
    rng = random.Random(int(os.environ.get("GITLEDGER_AGENT_SEED", "12")) + shard)
    kinds = ["pr", "comment", "issue"]
    plan = [(i, kinds[i % 3]) for i in range(shard * TRIALS // SHARDS, (shard + 1) * TRIALS // SHARDS)]
    bare = Path(server["repos"][REPO])
    workdir = agent_repo(tmp_path / "agent", bare, [f"agent/T{i}" for i, k in plan if k == "pr"])
    env = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": server["url"],
        "GITLEDGER_GITHUB_BACKOFF": "0.01",
        "GITLEDGER_GITHUB_WRITE_INTERVAL": "0",
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    gh = _client(server)
    gh_repo = gh.get_repo(REPO)
    targets = {
        i: gh_repo.create_issue(title=f"Tracking target_{i}").number for i, k in plan if k == "comment"
    }
    kills = Counter[str]()
    started = time.monotonic()
    try:
        for i, kind in plan:
            task = f"T{i}"
            mode = rng.choice(["after-effect"] * 6 + ["anywhere"] * 3 + ["none"])
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the agent's first attempt
                os.close(read_fd)
                code = 0
                try:
                    # a client of its own: a request cut off by the SIGKILL on the parent's pooled
                    # keep-alive connection would run into the parent's next request on that socket
                    own_repo = _client(server).get_repo(REPO)
                    _attempt(workdir, own_repo, task, f"a{i}", _command(kind, i, 0, targets.get(i)), write_fd)
                except BaseException:
                    code = 1
                os._exit(code)
            os.close(write_fd)
            if mode == "after-effect":
                ready, _, _ = select.select([read_fd], [], [], 30)
                if ready and os.read(read_fd, 1) == b"E":
                    time.sleep(rng.uniform(0, 0.004))
            elif mode == "anywhere":  # an attempt takes 40-60 ms here: anywhere in it, or after it
                time.sleep(rng.uniform(0, 0.06))
            if mode != "none":
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            os.close(read_fd)
            kills["killed" if os.WIFSIGNALED(status) else "finished"] += 1
            assert not os.WIFEXITED(status) or os.WEXITSTATUS(status) == 0, f"trial {i}: the agent failed"
            # the restarted agent rewords, twice
            for retry in (1, 2):
                reason = _attempt(
                    workdir, gh_repo, task, f"r{retry}-{i}", _command(kind, i, retry, targets.get(i))
                )
                if reason is not None:
                    assert "http" in reason and "Do not" in reason, reason
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    elapsed = time.monotonic() - started
    # every intended effect exists exactly once
    pulls = Counter(p.head.ref for p in gh_repo.get_pulls(state="all"))
    comments = {i: [c for c in gh_repo.get_issue(n).get_comments()] for i, n in targets.items()}
    issues = Counter(
        t.title
        for t in gh_repo.get_issues(state="all")
        if "/pull/" not in t.html_url and not t.title.startswith("Tracking")
    )
    by_trial = Counter[str]()
    for title in issues.elements():
        by_trial[title.split("module_", 1)[1].split(".py", 1)[0]] += 1
    for i, kind in plan:
        if kind == "pr":
            assert pulls[f"agent/T{i}"] == 1, (i, pulls[f"agent/T{i}"])
        elif kind == "comment":
            assert len(comments[i]) == 1, (i, [c.body for c in comments[i]])
        else:
            assert by_trial[str(i)] == 1, (i, by_trial[str(i)])
    assert kills["killed"] >= len(plan) // 2, kills
    print(f"{len(plan)} trials in {elapsed:.1f} s: {dict(kills)}")
