"""Helpers for the agent guard's tests: call the hook in-process or as a process, build payloads."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitledger.cli.agent_hook import run
from testing.repos import ROOT, git, init_repo

REPO = "acme/widgets"


def hook(
    agent: str, payload: Mapping[str, Any] | str, env: Mapping[str, str] | None = None
) -> tuple[int, str, str]:
    """Run the hook in this process: (exit code, stdout, stderr)."""
    import os

    data = payload if isinstance(payload, str) else json.dumps(payload)
    out, err = io.StringIO(), io.StringIO()
    code = run([agent], io.StringIO(data), out, err, {**os.environ, **(env or {})})
    return code, out.getvalue(), err.getvalue()


def hook_process(
    agent: str,
    payload: Mapping[str, Any] | str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    import os

    data = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-m", "gitledger", "agent-hook", agent],
        input=data,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd or ROOT,
        timeout=60,
        check=False,
    )


def bash(
    event: str, command: str, cwd: Path, *, session: str = "s1", tool_use_id: str = "toolu_1", **extra: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "", "timeout": 120000, "run_in_background": False},
        "tool_use_id": tool_use_id,
    }
    data.update(extra)
    return data


def denied(code: int, out: str) -> str | None:
    """The deny reason of a Claude answer, or None when it allowed."""
    if code != 0 or not out.strip():
        return None
    data = json.loads(out)
    spec = data["hookSpecificOutput"]
    assert spec["permissionDecision"] == "deny"
    return str(spec["permissionDecisionReason"])


def agent_repo(path: Path, bare: Path, branches: list[str]) -> Path:
    """A clone-like repository whose origin names acme/widgets; ``branches`` pushed to ``bare``."""
    init_repo(path)
    git("remote", "add", "origin", f"https://github.com/{REPO}.git", cwd=path)
    git("push", "-q", str(bare), "main", cwd=path)
    for name in branches:
        git("checkout", "-q", "-b", name, "main", cwd=path)
        (path / f"{name.replace('/', '_')}.txt").write_text(name)
        git("add", "-A", cwd=path)
        git("commit", "-q", "-m", f"work on {name}", cwd=path)
    if branches:
        git("push", "-q", str(bare), *branches, cwd=path)
    git("checkout", "-q", "main", cwd=path)
    return path
