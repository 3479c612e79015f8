"""``gitledger agent install``: merges idempotently, keeps foreign hooks, uninstalls only its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitledger.features.agent.install import hook_entries, merge, strip
from testing.repos import run_gitledger

FOREIGN = {
    "model": "x",
    "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}]},
}


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_merge_is_idempotent_and_uninstall_restores(agent: str) -> None:
    once = merge(FOREIGN, agent)
    assert merge(once, agent) == once
    assert strip(once) == FOREIGN
    assert "ask" not in json.dumps(once)


def test_claude_entries_filter_with_if_rules() -> None:
    pre = hook_entries("claude")["PreToolUse"]
    rules = [h["if"] for h in pre[0]["hooks"]]
    assert "Bash(gh pr create *)" in rules and "Bash(git push *)" in rules
    assert pre[1]["matcher"].startswith("mcp__github__")


def test_cli_install_dry_run_and_uninstall(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(FOREIGN))
    dry = run_gitledger("agent", "install", "claude", "--dry-run", "--repo", str(tmp_path), cwd=tmp_path)
    assert dry.returncode == 0 and "gitledger agent-hook claude pre" in dry.stdout
    assert json.loads(settings.read_text()) == FOREIGN
    done = run_gitledger("agent", "install", "claude", "--project", "--repo", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0 and "--settings" in done.stderr
    installed = settings.read_text()
    assert run_gitledger("agent", "install", "claude", "--repo", str(tmp_path), cwd=tmp_path).returncode == 0
    assert settings.read_text() == installed
    run_gitledger("agent", "install", "claude", "--uninstall", "--repo", str(tmp_path), cwd=tmp_path)
    assert json.loads(settings.read_text()) == FOREIGN
    bad = run_gitledger("agent", "install", "cursor", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown agent" in bad.stderr
