"""An agent loop whose side effects survive SIGKILL at any moment.

For each task the agent

1. commits its work on the task's pull-request branch (a local commit carrying the step's
   ``Gitledger-Key`` trailer; check: ``trailer``),
2. pushes the branch and opens a pull request (GitHub; check: ``github-pr``),
3. posts a comment on the pull request (GitHub; check: ``github-comment:N``),

   both through :mod:`gitledger.github.writes`, which look before they write and never re-send a
   write blindly, on the ledger's GitHub client (``ledger.github()``),
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
    """Commit ``path`` = ``text`` on ``branch`` (started from HEAD) without touching the worktree."""
    ref = f"refs/heads/{branch}"
    old = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", ref], cwd=repo, capture_output=True, text=True
    )
    parent = old.stdout.strip() or git(repo, "rev-parse", "HEAD")
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


def pull_number(url: str) -> int:
    match = re.search(r"/pull/(\d+)", url)
    if not match:
        raise RuntimeError(f"cannot tell the pull request number from {url!r}")
    return int(match.group(1))


class Agent:
    def __init__(self, ledger: gitledger.Ledger, repo: Path, outbox: Path, policy: str, github: bool):
        self.ledger, self.repo, self.use_github = ledger, repo, github

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
            ref=lambda made: made["url"],
            from_ref=lambda url: {"url": url},
        )
        def comment(task_id: str, number: int, text: str) -> dict[str, Any]:
            from gitledger.github.writes import post_comment

            step_key = gitledger.key_of(comment, task_id, number, text)
            return post_comment(ledger.github(), step_key, number, text).to_json()

        self.comment = comment

    def work(self, task: str, branch: str) -> str:
        """Commit the task's work on its pull-request branch; the trailer finds it after a crash."""
        with self.ledger.step(task, "work", checks=[checks.trailer()]) as s:
            if s.should_run:
                sha = commit_on_branch(
                    self.repo, branch, f"work/{task}.txt", f"result of {task}\n", f"Agent work for {task}",
                    s.step_key.trailer,
                )  # fmt: skip
                s.done(ref=sha)
        assert s.ref is not None
        return s.ref

    def open_pull(self, task: str) -> int:
        from gitledger.github.writes import open_pull_request

        with self.ledger.step(task, "open-pr", checks=[checks.github_pr()]) as s:
            if s.should_run:
                branch = s.step_key.branch
                git(self.repo, "push", "-q", "origin", f"refs/heads/{branch}:refs/heads/{branch}")
                pull = open_pull_request(
                    self.ledger.github(), s.step_key, title=f"Agent: {task}", body=f"Work for {task}.",
                    git_repo=self.ledger.repo,
                )  # fmt: skip
                s.done(ref=pull.url, result={"number": pull.number})
        if s.result:
            return int(s.result["number"])
        assert s.ref is not None  # found by the check: the ref is the pull request's URL
        return pull_number(s.ref)

    def run_task(self, task: str) -> None:
        pr_key = self.ledger.key(task, "open-pr")
        sha = self.work(task, pr_key.branch)
        if not self.use_github:
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
        agent = Agent(ledger, repo, args.outbox.resolve(), args.notify_policy, args.github)
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
