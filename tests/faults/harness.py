"""One repository with the effects of every kind, and gitledger runs against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitledger.core.keys import StepKey
from testing.repos import git, gitledger_argv, init_repo
from tests.faults.effects import KINDS, STEP_CONFIG, WAIT_FOR_GO, Kind, Reality, fx_dirs

TASK = "T-7"


def config_text(github_repo: str | None = None) -> str:
    lines = ["steps:"]
    for step, checks in STEP_CONFIG.items():
        lines.append(f"  {step}:")
        lines.append("    checks:")
        lines.extend(f"      - {json.dumps(c)}" for c in checks)
    if github_repo:
        lines += ["github:", f"  repo: {github_repo}"]
    # a rerun after a crash before the effect waits out the settle window (github-comment: 15 s by
    # default) before it looks at reality; the fake GitHub applies writes at once, so 1 s is plenty
    lines.append("settle: 1")
    return "\n".join(lines) + "\n"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        assert self.stdout.strip(), f"no JSON; rc={self.returncode} stderr={self.stderr}"
        data: dict[str, Any] = json.loads(self.stdout)
        return data

    def json_list(self) -> list[Any]:
        assert self.returncode == 0, self.stderr
        data: list[Any] = json.loads(self.stdout)
        return data

    @property
    def status(self) -> str:
        return str(self.json["status"])


@dataclass
class Workbench:
    """A repository, an effects directory outside it, and (optionally) a fake GitHub."""

    root: Path
    github: Any = None
    marker: str = field(default_factory=lambda: f"GITLEDGER_FAULTS_CASE={uuid.uuid4().hex}")
    effect_prefix: str = ""  # e.g. "sleep 0.05; " to widen the window other workers see
    session: int = 0  # the session of the last gitledger run (gitledger_raw)

    def __post_init__(self) -> None:
        self.repo = init_repo(self.root / "repo")
        self.fx = self.root / "fx"
        fx_dirs(self.fx)
        self.go = self.root / "go"
        github_repo = None
        if self.github is not None:
            github_repo = self.github.repo_name
            git("remote", "add", "origin", str(self.github.bare_path()), cwd=self.repo)
            git("push", "-q", "origin", "main", cwd=self.repo)
            (self.repo / "change.txt").write_text("the agent's change\n")
            git("add", "change.txt", cwd=self.repo)
            git("commit", "-q", "-m", "agent change", cwd=self.repo)  # what the PR will propose
            self.github.seed_prs(1)  # issue #1, for github-comment
        (self.repo / ".gitledger.yml").write_text(config_text(github_repo))
        self.reality = Reality(self.repo, self.fx, self.github)

    def env(self, fault: str | None = None) -> dict[str, str]:
        name, _, value = self.marker.partition("=")
        env = {
            **os.environ,
            name: value,
            "FX_DIR": str(self.fx),
            "GO": str(self.go),
            "PYTHON": sys.executable,
            "GITLEDGER_GITHUB_WRITE_INTERVAL": "0",
            "GITLEDGER_GITHUB_BACKOFF": "0.01",  # a GitHub that answers 5xx is given up on quickly
            "GITLEDGER_GITHUB_MAX_WAIT": "2",
        }
        env.pop("GITLEDGER_FAULT", None)
        if fault:
            env["GITLEDGER_FAULT"] = fault
        if self.github is not None:
            env["GITHUB_TOKEN"] = self.github.token
            env["GITHUB_API_URL"] = self.github.url
        return env

    def argv(self, kind: Kind, task: str = TASK, wait: bool = False) -> list[str]:
        checks = [x for c in kind.checks for x in ("-c", c)]
        script = (WAIT_FOR_GO if wait else "") + self.effect_prefix + kind.effect
        return gitledger_argv(
            "run-step", "-t", task, "-s", kind.name, "--json", *checks, "--", "sh", "-c", script
        )

    def run_step(self, kind: Kind, *, task: str = TASK, fault: str | None = None, wait: bool = False) -> Run:
        return self.gitledger_raw(self.argv(kind, task, wait), fault)

    def gitledger(self, *args: str) -> Run:
        return self.gitledger_raw(gitledger_argv(*args))

    def gitledger_raw(self, argv: list[str], fault: str | None = None) -> Run:
        """Run gitledger in a session of its own (its id is kept in :attr:`session`): every process it
        starts is in it, from fork on, exec included (see ``effects.processes_with``)."""
        with subprocess.Popen(
            argv,
            cwd=self.repo,
            env=self.env(fault),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ) as proc:
            self.session = proc.pid
            try:
                out, err = proc.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
        return Run(proc.returncode, out, err)

    def step(self, kind: str, task: str = TASK) -> StepKey:
        return StepKey.derive(task, kind)

    def effects(self, kind: str, task: str = TASK) -> int:
        step = self.step(kind, task)
        return self.reality.count(kind, step.key, step.branch)


__all__ = ["KINDS", "TASK", "Run", "Workbench"]
