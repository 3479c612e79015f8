"""The hooks under the real pre-commit framework, in a repository where gitledger is not on PATH:
``language: python`` makes pre-commit install gitledger itself (from this tree, with its dependencies
from the package index).

The hooks run through ``pre-commit run --config`` with a configuration naming this tree, as a user's
``.pre-commit-config.yaml`` would: pre-commit then builds the hooks' environment once into its store
(``PRE_COMMIT_HOME``, one per module) and reuses it for every run (``try-repo`` would build a fresh one
in a temporary store on each call, ~20 s apiece).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gitledger.core.keys import StepKey, branch_for
from testing.repos import ROOT, git, init_repo

# one worker for the whole module under pytest-xdist: its module fixture builds an environment once
pytestmark = pytest.mark.xdist_group("precommit")

KEY = StepKey.derive("T-1", "open-pr").key
IGNORED = shutil.ignore_patterns(
    ".git", "__pycache__", "*.pyc", "*.egg-info", ".venv", "build", "dist", ".*_cache", "results"
)


def _pre_commit() -> str:
    found = Path(sys.executable).parent / "pre-commit"
    if not found.exists():
        pytest.skip("pre-commit is not installed here (it is in the [test] extra: pip install pre-commit)")
    return str(found)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This tree (with uncommitted changes) as a one-commit repository, as try-repo would make it; one
    repository and revision for the whole module, so that pre-commit builds its environment once."""
    repo = tmp_path_factory.mktemp("precommit") / "hook-repo"
    shutil.copytree(ROOT, repo, ignore=IGNORED, symlinks=True)
    init_repo(repo, commit=False)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "snapshot", cwd=repo)
    return repo, git("rev-parse", "HEAD", cwd=repo)


def try_repo(
    hook_repo: tuple[Path, str], hook: str, cwd: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """``pre-commit run HOOK`` of the hook repository, with a PATH that holds git and the system tools,
    but no gitledger."""
    path = os.pathsep.join(
        dict.fromkeys([str(Path(shutil.which("git") or "/usr/bin/git").parent), "/usr/bin", "/bin"])
    )
    assert shutil.which("gitledger", path=path) is None
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITLEDGER_", "PRE_COMMIT")) and k not in {"PYTHONPATH", "VIRTUAL_ENV"}
    }
    full_env.update(PATH=path, PRE_COMMIT_HOME=str(hook_repo[0].parent / "cache"), **env)
    repo, rev = hook_repo
    config = repo.parent / f"config-{hook}.yaml"
    config.write_text(yaml.safe_dump({"repos": [{"repo": str(repo), "rev": rev, "hooks": [{"id": hook}]}]}))
    argv = [_pre_commit(), "run", "--config", str(config), hook, "--verbose", "--color", "never", *args]
    return subprocess.run(
        argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600, check=False
    )


def test_the_manifest_installs_gitledger_itself() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"] for h in hooks} == {"gitledger-key-trailer", "gitledger-no-duplicate-branch"}
    for hook in hooks:
        assert hook["language"] == "python"  # pre-commit installs this repository into its own environment
        assert hook["entry"].startswith("python -m gitledger._hookscripts ")


def test_commit_msg_hook_under_pre_commit(hook_repo: tuple[Path, str], tmp_path: Path) -> None:
    work = init_repo(tmp_path / "work")
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("Fix the parser\n")
    args = ("--hook-stage", "commit-msg", "--commit-msg-filename", str(message))
    proc = try_repo(hook_repo, "gitledger-key-trailer", work, *args, GITLEDGER_KEY=KEY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert message.read_text() == f"Fix the parser\n\nGitledger-Key: {KEY}\n"
    proc = try_repo(hook_repo, "gitledger-key-trailer", work, *args, GITLEDGER_KEY=KEY)
    assert proc.returncode == 0 and message.read_text().count("Gitledger-Key") == 1  # once
    message.write_text("No key here\n")
    proc = try_repo(hook_repo, "gitledger-key-trailer", work, *args)
    assert proc.returncode == 0 and message.read_text() == "No key here\n"


def test_pre_push_hook_under_pre_commit_runs_gitledger(hook_repo: tuple[Path, str], tmp_path: Path) -> None:
    remote = init_repo(tmp_path / "remote.git", bare=True)
    earlier = tmp_path / "earlier"
    git("clone", "-q", str(remote), str(earlier), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=earlier)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=earlier)
    git("commit", "-q", "--allow-empty", "-m", f"first attempt\n\nGitledger-Key: {KEY}", cwd=earlier)
    existing = branch_for(KEY)
    git("push", "-q", "origin", f"HEAD:refs/heads/{existing}", cwd=earlier)

    work = tmp_path / "work"
    git("clone", "-q", "--single-branch", "-b", "main", str(remote), str(work), cwd=tmp_path)
    base = git("rev-parse", "HEAD", cwd=work)
    git("commit", "-q", "--allow-empty", "-m", f"the same step again\n\nGitledger-Key: {KEY}", cwd=work)
    head = git("rev-parse", "HEAD", cwd=work)
    push = ["--hook-stage", "pre-push", "--remote-name", "origin", "--remote-url", str(remote)]
    push += ["--local-branch", "refs/heads/main", "--from-ref", base, "--to-ref", head]

    proc = try_repo(
        hook_repo, "gitledger-no-duplicate-branch", work, *push, "--remote-branch", "refs/heads/retry"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert f"'{existing}'" in output and "duplicate" in output and "cannot find gitledger" not in output
    proc = try_repo(
        hook_repo, "gitledger-no-duplicate-branch", work, *push, "--remote-branch", "refs/heads/main"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr  # main is tracked: an update, not a new branch
