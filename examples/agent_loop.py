"""An agent loop whose side effects survive SIGKILL at any moment.

For each task the agent

1. commits its work on the task's pull-request branch (a local commit carrying the step's
   ``Gitledger-Key`` trailer; check: ``trailer``),
2. pushes the branch and opens a pull request (GitHub; check: ``github-pr``),
3. posts a comment on the pull request (GitHub; check: ``github-comment:N``),
4. sends a notification: appends a line to a local "outbox" file. Nothing can look the
   notification up afterwards (think of a chat message), so its check is ``ledger`` only and its
   ``on_unconfirmed`` policy decides what happens after a crash between the append and the record.

Run it as often as you like, kill it whenever you like: each effect happens once (see
``chaos_driver.py``, which does exactly that). Without ``--github`` steps 2 and 3 are left out.

    python examples/agent_loop.py --repo PATH --outbox PATH [--tasks T-1,T-2] [--notify-policy fail]
        [--github --github-repo OWNER/NAME]   # with GITHUB_TOKEN and GITHUB_API_URL set

Exit codes: 0 every task done; 3 a notification is unconfirmed (stdout has ``{"unconfirmed": KEY}``;
check the outbox, then ``gitledger resolve KEY --done`` or ``--forget``); 75 a step is in progress in
another process; 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import gitledger
from gitledger import checks


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def commit_on_branch(repo: Path, branch: str, path: str, text: str, message: str, trailer: str) -> str:
    """Commit ``path`` = ``text`` on ``branch`` (from main) without touching the worktree."""
    ref = f"refs/heads/{branch}"
    old = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", ref], cwd=repo, capture_output=True, text=True
    )
    parent = old.stdout.strip() or git(repo, "rev-parse", "refs/heads/main")
    with tempfile.TemporaryDirectory() as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", parent, env=index)
        blob = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=repo,
            input=text,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=index)
        tree = git(repo, "write-tree", env=index)
    commit = git(repo, "commit-tree", tree, "-p", parent, "-m", message, "-m", trailer)
    git(repo, "update-ref", ref, commit, old.stdout.strip() or "0" * 40)  # compare-and-swap
    return commit


class GitHub:
    """The few REST calls the agent needs (the checks use gitledger's own GitHub client)."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self.api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
        self.token = os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN") or ""

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.api}/repos/{self.repo}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/vnd.github+json",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # a write is sent once, never retried
            return json.loads(response.read() or b"null")

    def open_pull(self, head: str, title: str, body: str) -> dict[str, Any]:
        try:
            return dict(
                self.call("POST", "/pulls", {"title": title, "head": head, "base": "main", "body": body})
            )
        except urllib.error.HTTPError as exc:
            if exc.code != 422:
                raise
            # "A pull request already exists": it is ours (the check missed it a moment ago); look it up
            owner = self.repo.split("/")[0]
            query = urllib.parse.urlencode({"head": f"{owner}:{head}", "state": "all"})
            for pull in self.call("GET", f"/pulls?{query}"):
                if pull["head"]["ref"] == head:  # GitHub ignores a malformed filter: check it ourselves
                    return dict(pull)
            raise

    def add_label(self, number: int, label: str) -> None:
        self.call("POST", f"/issues/{number}/labels", {"labels": [label]})

    def comment(self, number: int, body: str) -> dict[str, Any]:
        return dict(self.call("POST", f"/issues/{number}/comments", {"body": body}))


def pull_number(url: str) -> int:
    match = re.search(r"/pull/(\d+)", url)
    if not match:
        raise RuntimeError(f"cannot tell the pull request number from {url!r}")
    return int(match.group(1))


class Agent:
    def __init__(self, ledger: gitledger.Ledger, repo: Path, outbox: Path, policy: str, gh: GitHub | None):
        self.ledger, self.repo, self.gh = ledger, repo, gh

        @ledger.idempotent(step="notify", checks=[checks.ledger()], on_unconfirmed=policy)
        def notify(task_id: str, text: str) -> dict[str, str]:
            key = gitledger.key_of(notify, task_id, text).key
            with outbox.open("a") as fh:
                fh.write(f"{key}\t{task_id}\t{text}\n")
            return {"sent": text}

        self.notify = notify

        @ledger.idempotent(
            step="comment",
            checks=lambda task_id, number, text: [checks.github_comment(number)],
            ref=lambda made: made["html_url"],
            from_ref=lambda url: {"html_url": url},
        )
        def comment(task_id: str, number: int, text: str) -> dict[str, Any]:
            assert self.gh is not None
            marker = gitledger.key_of(comment, task_id, number, text).marker
            made = self.gh.comment(number, f"{text}\n\n{marker}")
            return {"html_url": made["html_url"], "id": made["id"]}

        self.comment = comment

    def work(self, task: str, branch: str) -> str:
        """Commit the task's work on its pull-request branch; the trailer finds it after a crash."""
        with self.ledger.step(task, "work", checks=[checks.trailer()]) as s:
            if s.should_run:
                sha = commit_on_branch(
                    self.repo,
                    branch,
                    f"work/{task}.txt",
                    f"result of {task}\n",
                    f"Agent work for {task}",
                    s.step_key.trailer,
                )
                s.done(ref=sha)
        assert s.ref is not None
        return s.ref

    def open_pull(self, task: str) -> int:
        assert self.gh is not None
        with self.ledger.step(task, "open-pr", checks=[checks.github_pr()]) as s:
            if s.should_run:
                branch = s.step_key.branch
                git(self.repo, "push", "-q", "origin", f"refs/heads/{branch}:refs/heads/{branch}")
                pull = self.gh.open_pull(branch, f"Agent: {task}", f"Work for {task}.\n\n{s.step_key.marker}")
                self.gh.add_label(pull["number"], s.step_key.label)
                s.done(ref=pull["html_url"], result={"number": pull["number"]})
        if s.result:
            return int(s.result["number"])
        assert s.ref is not None  # found by the check: the ref is the pull request's URL
        return pull_number(s.ref)

    def run_task(self, task: str) -> None:
        pr_key = self.ledger.key(task, "open-pr")
        sha = self.work(task, pr_key.branch)
        if self.gh is None:
            self.notify(task, f"{task}: work committed as {sha[:12]} on {pr_key.branch}")
            return
        number = self.open_pull(task)
        self.comment(task, number, f"Agent finished {task}; please review.")
        self.notify(task, f"{task}: pull request #{number} is ready")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=Path("."))
    parser.add_argument("--outbox", type=Path, required=True)
    parser.add_argument("--tasks", default="T-1,T-2,T-3")
    parser.add_argument("--notify-policy", choices=("fail", "retry", "skip"), default="fail")
    parser.add_argument("--github", action="store_true", help="also open a PR and comment on it")
    parser.add_argument("--github-repo", default=None, help="OWNER/NAME (default: from origin)")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    with gitledger.Ledger.open(repo, github_repo=args.github_repo) as ledger:
        gh = GitHub(args.github_repo) if args.github else None
        agent = Agent(ledger, repo, args.outbox.resolve(), args.notify_policy, gh)
        for task in filter(None, args.tasks.split(",")):
            try:
                agent.run_task(task)
            except gitledger.StepUnconfirmedError as exc:
                print(json.dumps({"task": task, "unconfirmed": exc.result.key}), flush=True)
                print(f"agent: {exc}", file=sys.stderr)
                return exc.exit_code
            except gitledger.StepInProgressError as exc:
                print(f"agent: {exc}", file=sys.stderr)
                return exc.exit_code
            print(json.dumps({"task": task, "done": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
