"""``gitledger agent install``: merges idempotently, keeps foreign hooks, uninstalls only its own."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from gitledger.features.agent.install import hook_entries, merge, strip
from testing.repos import gitledger_argv, run_gitledger

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


def _fake_claude(tmp_path: Path, version: str) -> dict[str, str]:
    """A 'claude' on PATH that prints ``version`` for --version (a real executable, not a mock)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "claude"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo '{version}' && exit 0\nexit 1\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _handlers(settings: Path) -> list[dict[str, object]]:
    hooks = json.loads(settings.read_text())["hooks"]
    return [h for group in hooks["PreToolUse"] for h in group["hooks"]]


@pytest.mark.parametrize(
    ("version", "flag", "blocks"),
    [
        ("2.1.295 (Claude Code)", None, True),
        ("2.2.0 (Claude Code)", None, True),
        ("2.1.294 (Claude Code)", None, False),
        ("not a version", None, False),
        ("2.1.294 (Claude Code)", "--fail-closed", True),
        ("2.2.0 (Claude Code)", "--no-fail-closed", False),
    ],
)
def test_install_sets_on_failure_block_where_claude_supports_it(
    tmp_path: Path, version: str, flag: str | None, blocks: bool
) -> None:
    env = _fake_claude(tmp_path, version)
    args = ["agent", "install", "claude", "--repo", str(tmp_path), *([flag] if flag else [])]
    done = run_gitledger(*args, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    handlers = _handlers(tmp_path / ".claude" / "settings.json")
    assert handlers and all((h.get("onFailure") == "block") is blocks for h in handlers)
    assert blocks == ('"onFailure":"block"' in done.stderr)  # the --settings form says the same


def test_install_without_claude_on_path_leaves_on_failure_out(tmp_path: Path) -> None:
    done = run_gitledger(
        "agent", "install", "claude", "--repo", str(tmp_path), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}
    )
    assert done.returncode == 0, done.stderr
    assert all("onFailure" not in h for h in _handlers(tmp_path / ".claude" / "settings.json"))


def _one_line(stderr: str) -> str:
    """The single line of a clean error (no traceback, no internal error)."""
    assert stderr.count("\n") == 1 and stderr.startswith("gitledger: "), stderr
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    return stderr


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"hooks": 5}', '"hooks" is not a JSON object'),
        (b'{"hooks": {"PreToolUse": 5}}', '"hooks"."PreToolUse" is not a JSON array'),
        (b'{"hooks": {"Stop": "x"}}', '"hooks"."Stop" is not a JSON array'),
        (b'\xff\xfe{"model": "x"}', "is not UTF-8 text"),
        (b'{"a": ' * 100_000 + b"1" + b"}" * 100_000, "nests JSON too deeply"),
        (b'{"model": "a", "env": {"X": "1", "X": "2"}}', 'gives the key "X" twice in one object'),
        (b'{"hooks": {}, "hooks": {"Stop": []}}', 'gives the key "hooks" twice in one object'),
    ],
    ids=[
        "hooks-not-object",
        "event-not-array",
        "stop-not-array",
        "not-utf8",
        "deep-nesting",
        "twice",
        "hooks-twice",
    ],
)
def test_install_refuses_settings_it_cannot_merge_and_leaves_them(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(content)
    done = run_gitledger(
        "agent", "install", "claude", "--no-fail-closed", "--repo", str(tmp_path), cwd=tmp_path
    )
    err = _one_line(done.stderr)
    assert done.returncode == 2 and str(settings) in err and problem in err and "fix it first" in err
    assert settings.read_bytes() == content
    assert os.listdir(settings.parent) == ["settings.json"]


@pytest.mark.parametrize("where", ["missing", "a file"])
def test_install_into_a_repo_that_is_no_directory_creates_nothing(tmp_path: Path, where: str) -> None:
    repo = tmp_path / "nowhere" / "project"
    if where == "a file":
        repo = tmp_path / "file"
        repo.write_text("x")
    done = run_gitledger("agent", "install", "claude", "--no-fail-closed", "--repo", str(repo), cwd=tmp_path)
    err = _one_line(done.stderr)
    assert done.returncode == 2 and f"--repo {repo}" in err and "project's directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["file"] if where == "a file" else [])


def _limit_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))  # the new settings are ~5 KB: EFBIG


def _immutable(path: Path) -> bool:
    """Set the immutable flag (root on a file system that has it); False when it cannot."""
    try:
        return subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode == 0
    except OSError:
        return False


@pytest.mark.parametrize("how", ["the write fails", "the rename fails"])
def test_a_failed_write_keeps_the_settings_and_removes_the_temporary_file(tmp_path: Path, how: str) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(FOREIGN))
    before = settings.read_bytes()
    if how == "the rename fails" and not _immutable(settings):
        pytest.skip("chattr +i is not available here (needs root and a file system with the flag)")
    try:
        done = subprocess.run(
            gitledger_argv("agent", "install", "claude", "--no-fail-closed", "--repo", str(tmp_path)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            preexec_fn=_limit_file_size if how == "the write fails" else None,
        )
    finally:
        subprocess.run(["chattr", "-i", str(settings)], capture_output=True, check=False)
    err = _one_line(done.stderr)
    assert done.returncode == 1 and f"cannot write {settings}" in err and "left as it was" in err
    assert settings.read_bytes() == before
    assert os.listdir(settings.parent) == ["settings.json"]


def test_a_settings_file_that_is_a_link_is_written_where_it_points(tmp_path: Path) -> None:
    """A settings file kept in a dotfiles checkout and linked in: the hook goes into the linked file,
    whose permissions stay; the link stays a link (the rename put a plain file in its place)."""
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(json.dumps(FOREIGN))
    dotfiles.chmod(0o600)
    settings = tmp_path / "repo" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.symlink_to(dotfiles)
    done = run_gitledger(
        "agent", "install", "claude", "--no-fail-closed", "--repo", str(tmp_path / "repo"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert settings.is_symlink() and settings.resolve() == dotfiles
    assert "gitledger" in json.loads(dotfiles.read_text())["hooks"]["PreToolUse"][-1]["hooks"][0]["command"]
    assert stat.S_IMODE(dotfiles.stat().st_mode) == 0o600
    assert sorted(os.listdir(dotfiles.parent)) == ["claude-settings.json"]


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_settings_file_that_is_a_device_or_a_pipe_is_refused_and_left(tmp_path: Path, kind: str) -> None:
    """A link to a device (a committed '.claude/settings.json -> /dev/null') read as empty settings, and
    the rename then put a plain file in the device's place: /dev/null itself, for root. A named pipe
    blocked the install forever."""
    special = tmp_path / "special"
    if kind == "device":
        try:
            os.mknod(special, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a null device of our own
        except OSError:
            pytest.skip("mknod needs root")
    else:
        os.mkfifo(special)
    settings = tmp_path / "repo" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.symlink_to(special)
    done = run_gitledger(
        "agent",
        "install",
        "claude",
        "--no-fail-closed",
        "--repo",
        str(tmp_path / "repo"),
        cwd=tmp_path,
        timeout=20,
    )
    err = _one_line(done.stderr)
    assert done.returncode == 2 and f"{settings} is not a regular file (nor a link to one)" in err
    assert (stat.S_ISCHR if kind == "device" else stat.S_ISFIFO)(special.stat().st_mode)
    assert os.listdir(settings.parent) == ["settings.json"]
