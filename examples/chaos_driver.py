"""Kill ``agent_loop.py`` at random moments, again and again, then check every effect happened once.

Each round starts the agent in a fresh process and either SIGKILLs it after a random delay or sets
``GITLEDGER_FAULT`` to a random crash point (the process then SIGKILLs itself exactly there). Tasks
come in waves: once a round gets through the whole wave, the next rounds work on new task ids, so
the kills keep landing on real work. When a
round leaves a notification *unconfirmed* (the ``fail`` policy: nothing can look the outbox line up
for gitledger), the driver plays the operator: it looks at the outbox and runs
``gitledger resolve KEY --done`` or ``--forget``. Finally it lets the agent finish and asserts:

- one commit carrying each task's work trailer, reachable from a branch;
- with ``--github``: one pull request per task branch, one marked comment on each;
- notifications, per ``--notify-policy``: ``fail`` exactly one per task; ``skip`` at most one
  (at-most-once: a kill between the append and the record loses nothing, but a kill between the
  claim and the append loses that notification); ``retry`` at least one (at-least-once).

    python examples/chaos_driver.py [--rounds 40] [--tasks 4] [--seed 1] [--github] [--keep]

``--github`` starts the fake GitHub server (``python -m testing.fakegithub``) and needs gitledger's
GitHub checks (``gitledger.github.client``). Prints a JSON summary; exit 0 when every assertion holds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run from a checkout: use its gitledger
    sys.path.insert(0, str(ROOT))
AGENT = HERE / "agent_loop.py"
FAULTS = ("before-claim", "after-claim", "after-effect", "during-done")
IDENTITY = {
    "GIT_AUTHOR_NAME": "Agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
    "GIT_COMMITTER_NAME": "Agent",
    "GIT_COMMITTER_EMAIL": "agent@example.invalid",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


class FakeGitHubProcess:
    """``python -m testing.fakegithub`` in the background; serves until its stdin closes."""

    def __init__(self, repo: str, token: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "testing.fakegithub", "--repo", repo, "--token", token],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the fake GitHub server did not start (is testing/fakegithub/ there?)")
        info = json.loads(line)
        self.url: str = info["url"]
        self.bare = Path(info["repos"][repo])

    def get(self, path: str, token: str) -> Any:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Driver:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.tmp = Path(tempfile.mkdtemp(prefix="gitledger-chaos-"))
        self.repo = self.tmp / "repo"
        self.outbox = self.tmp / "outbox.txt"
        self.waves: list[list[str]] = []
        self.new_wave()
        self.stats: dict[str, Any] = {"rounds": 0, "killed": 0, "fault": {}, "resolved": [], "exit_codes": {}}
        self.env = {
            **os.environ,
            **IDENTITY,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        self.env.pop("GITLEDGER_FAULT", None)
        self.github: FakeGitHubProcess | None = None
        self.token = "chaos-token"
        self.github_repo = "acme/widgets"

    def new_wave(self) -> None:
        wave = len(self.waves) + 1
        self.waves.append([f"W{wave}-T{i}" for i in range(1, self.args.tasks + 1)])

    @property
    def tasks(self) -> list[str]:
        return [task for wave in self.waves for task in wave]

    # -- setup -------------------------------------------------------------------------------------

    def setup(self) -> None:
        self.repo.mkdir()
        git(self.repo, "init", "-q", "-b", "main")
        for name, value in (("user.name", "Agent"), ("user.email", "agent@example.invalid")):
            git(self.repo, "config", name, value)
        (self.repo / "README").write_text("chaos\n")
        git(self.repo, "add", "README")
        git(self.repo, "commit", "-q", "-m", "initial")
        if self.args.github:
            self.github = FakeGitHubProcess(self.github_repo, self.token)
            git(self.repo, "remote", "add", "origin", str(self.github.bare))
            git(self.repo, "push", "-q", "origin", "main")
            self.env.update(
                {
                    "GITHUB_TOKEN": self.token,
                    "GITHUB_API_URL": self.github.url,
                    "GITLEDGER_GITHUB_WRITE_INTERVAL": "0",
                    "GITLEDGER_GITHUB_BACKOFF": "0.05",
                }
            )

    def agent_argv(self, tasks: list[str]) -> list[str]:
        argv = [
            sys.executable, str(AGENT), "--repo", str(self.repo), "--outbox", str(self.outbox),
            "--tasks", ",".join(tasks), "--notify-policy", self.args.notify_policy,
        ]  # fmt: skip
        if self.args.github:
            argv += ["--github", "--github-repo", self.github_repo]
        return argv

    # -- rounds ------------------------------------------------------------------------------------

    def round(self, tasks: list[str], kill: bool) -> int:
        env = dict(self.env)
        delay = None
        if kill and self.rng.random() < 0.5:
            fault = self.rng.choice(FAULTS)
            env["GITLEDGER_FAULT"] = fault
            self.stats["fault"][fault] = self.stats["fault"].get(fault, 0) + 1
        elif kill:
            delay = self.rng.uniform(0.0, self.args.max_delay)
        proc = subprocess.Popen(
            self.agent_argv(tasks),
            cwd=self.repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if delay is not None:
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)  # the agent only: its git children finish on their own
        out, err = proc.communicate(timeout=300)
        code = proc.returncode
        if code == -signal.SIGKILL:
            self.stats["killed"] += 1
        self.stats["rounds"] += 1
        self.stats["exit_codes"][str(code)] = self.stats["exit_codes"].get(str(code), 0) + 1
        if code == 3:
            self.operator(out)
        elif code not in (0, -signal.SIGKILL):
            raise SystemExit(f"the agent failed unexpectedly (exit {code}):\n{err}")
        return code

    def operator(self, out: str) -> None:
        """What a person does for an unconfirmed notification: look at the outbox, then resolve."""
        key = next(json.loads(line)["unconfirmed"] for line in out.splitlines() if "unconfirmed" in line)
        sent = self.outbox.exists() and any(
            line.startswith(key + "\t") for line in self.outbox.read_text().splitlines()
        )
        action = ["--done", "--ref", "outbox"] if sent else ["--forget"]
        resolve = [sys.executable, "-m", "gitledger", "resolve", key, *action]
        subprocess.run(resolve, cwd=self.repo, env=self.env, check=True, capture_output=True)
        self.stats["resolved"].append({"key": key, "sent": sent})

    # -- verdict -----------------------------------------------------------------------------------

    def counts(self) -> dict[str, Any]:
        import gitledger

        counts: dict[str, Any] = {}
        lines = self.outbox.read_text().splitlines() if self.outbox.exists() else []
        with gitledger.Ledger.open(self.repo) as ledger:
            for task in self.tasks:
                work = ledger.key(task, "work")
                commits = git(
                    self.repo, "log", "--branches", "--format=%H", "--fixed-strings", f"--grep={work.trailer}"
                )
                notified = [line for line in lines if line.split("\t")[1] == task]
                entry: dict[str, Any] = {"commits": len(commits.split()), "notifications": len(notified)}
                if self.github is not None:
                    branch = ledger.key(task, "open-pr").branch
                    owner = self.github_repo.split("/")[0]
                    query = f"state=all&per_page=100&head={owner}:{branch}"
                    pulls = self.github.get(f"/repos/{self.github_repo}/pulls?{query}", self.token)
                    mine = [p for p in pulls if p["head"]["ref"] == branch]
                    entry["pulls"] = len(mine)
                    entry["comments"] = 0
                    for pull in mine:
                        comments = self.github.get(
                            f"/repos/{self.github_repo}/issues/{pull['number']}/comments?per_page=100",
                            self.token,
                        )
                        entry["comments"] += sum("gitledger:" in c["body"] for c in comments)
                counts[task] = entry
            outcomes: dict[str, int] = {}  # how each step ended: created, already_existed (a check), ...
            for found in ledger.store.entries():
                summary = found.summary()
                name = f"{summary['step']}:{summary['outcome'] or summary['state']}"
                outcomes[name] = outcomes.get(name, 0) + 1
            self.stats["outcomes"] = dict(sorted(outcomes.items()))
        return counts

    def verdict(self, counts: dict[str, Any]) -> list[str]:
        problems = []
        policy = self.args.notify_policy
        for task, entry in counts.items():
            for what in ("commits", "pulls", "comments"):
                if what in entry and entry[what] != 1:
                    problems.append(f"{task}: {entry[what]} {what}, expected exactly 1")
            n = entry["notifications"]
            if (policy == "fail" and n != 1) or (policy == "skip" and n > 1) or (policy == "retry" and n < 1):
                problems.append(f"{task}: {n} notifications under policy {policy}")
        return problems

    def run(self) -> int:
        self.setup()
        try:
            for _ in range(self.args.rounds):
                if self.round(self.waves[-1], kill=True) == 0:
                    self.new_wave()
            for _ in range(20):  # let it finish; an unconfirmed notification needs the operator again
                if self.round(self.tasks, kill=False) == 0:
                    break
            else:
                raise SystemExit("the agent never finished")
            counts = self.counts()
        finally:
            if self.github is not None:
                self.github.stop()
        problems = self.verdict(counts)
        summary = {"ok": not problems, "problems": problems, "tasks": len(counts), **self.stats}
        if problems or self.args.verbose:
            summary["counts"] = counts
        print(json.dumps(summary, indent=1))
        if not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print(f"kept {self.tmp}", file=sys.stderr)
        return 0 if not problems else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="killed runs before the final one")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per wave")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-delay", type=float, default=None, help="longest wait before a SIGKILL (s)")
    parser.add_argument("--notify-policy", choices=("fail", "retry", "skip"), default="fail")
    parser.add_argument("--github", action="store_true", help="also open PRs and comments on a fake GitHub")
    parser.add_argument("--keep", action="store_true", help="keep the temporary repository")
    parser.add_argument("--verbose", action="store_true", help="print the counts of every task")
    args = parser.parse_args(argv)
    if args.max_delay is None:  # about one run's length: kills land anywhere in it
        args.max_delay = 2.0 if args.github else 0.4
    if args.seed is None:
        args.seed = int(time.time())
    print(f"chaos: seed {args.seed}", file=sys.stderr)
    return Driver(args).run()


if __name__ == "__main__":
    sys.exit(main())
