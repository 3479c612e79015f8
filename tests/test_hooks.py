"""The git hooks: real `git commit` and `git push` in temporary repositories with a bare remote."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest

from gitledger.core.errors import CheckError, GitledgerError
from gitledger.core.keys import KEY_RE, TRAILER_TOKEN, StepKey, branch_for
from gitledger.features.hooks import install as hooks
from gitledger.features.hooks import prepush
from gitledger.features.hooks.install import (
    CHAINED_SUFFIX,
    HOOK_NAMES,
    HOOK_VERSION,
    hook_version,
    hooks_dir,
    install,
    uninstall,
)
from gitledger.features.hooks.prepush import Push, check_push
from gitledger.git.hooks import no_git_env
from testing.repos import ROOT, git, init_repo, run_gitledger

ZERO = "0" * 40
KEY = StepKey.derive("T-1", "open-pr").key
OTHER_KEY = StepKey.derive("T-2", "open-pr").key


def run_git(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "GITLEDGER_KEY"}
    full_env.update(env or {})
    return subprocess.run(
        ["git", *args], cwd=cwd, env=full_env, input=input, capture_output=True, text=True, check=False
    )


def commit(
    repo: Path, message: str, *, key: str | None = None, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    env = {"GITLEDGER_KEY": key} if key is not None else {}
    return run_git("commit", "-q", "--allow-empty", "-m", message, *extra, cwd=repo, env=env)


def raw_message(repo: Path, rev: str = "HEAD") -> bytes:
    data = subprocess.run(
        ["git", "cat-file", "commit", rev], cwd=repo, capture_output=True, check=True
    ).stdout
    return data.split(b"\n\n", 1)[1]


def push(
    repo: Path, *refspecs: str, env: Mapping[str, str] | None = None, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return run_git("push", *extra, "origin", *refspecs, cwd=repo, env=env)


def remote_branches(remote: Path) -> set[str]:
    out = git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=remote)
    return set(out.split())


def write_script(path: Path, body: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(mode)
    return path


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "remote.git", bare=True)


@pytest.fixture
def clone(tmp_path: Path, remote: Path) -> Path:
    """A clone of ``remote`` with one commit on main, pushed."""
    work = tmp_path / "work"
    git("clone", "-q", str(remote), str(work), cwd=tmp_path)
    (work / "README").write_text("hello\n")
    git("add", "README", cwd=work)
    git("commit", "-q", "-m", "initial", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    return work


@pytest.fixture
def hooked(clone: Path) -> Path:
    install(clone)
    return clone


def publish_convention_branch(remote: Path, tmp_path: Path, key: str = KEY) -> str:
    """Another agent (another clone) already did the step: the key's branch is on the remote."""
    other = tmp_path / "earlier-agent"
    git("clone", "-q", str(remote), str(other), cwd=tmp_path)
    assert commit(other, f"earlier attempt\n\nGitledger-Key: {key}").returncode == 0  # no hooks there
    branch = branch_for(key)
    git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=other)
    return branch


# --- the scripts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOOK_NAMES)
def test_scripts_are_portable_sh_and_marked(name: str) -> None:
    path = ROOT / "hooks" / name
    assert path.stat().st_mode & stat.S_IXUSR, f"{path} must be executable"
    data = path.read_bytes()
    assert data.startswith(b"#!/bin/sh\n")
    assert hook_version(data) == HOOK_VERSION
    assert hooks.hook_source(name) == data
    for shell in ("sh", "dash", "bash"):
        exe = shutil.which(shell)
        if exe:
            args = [exe, "--posix", "-n"] if shell == "bash" else [exe, "-n"]
            proc = subprocess.run([*args, str(path)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", "-s", "sh", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


def test_scripts_agree_with_the_python_key_format() -> None:
    for name in HOOK_NAMES:
        text = (ROOT / "hooks" / name).read_text()
        assert f"KEY_RE='{KEY_RE.pattern}'\n" in text
        assert TRAILER_TOKEN in text


def test_render_records_the_interpreter_safely_quoted() -> None:
    rendered = hooks.render_hook("pre-push", "/opt/it's here/python")
    assert rendered.count(b"\nINSTALL_PYTHON=") == 1
    assert b"\nINSTALL_PYTHON='/opt/it'\"'\"'s here/python'\n" in rendered
    assert hooks.render_hook("commit-msg", "/x/python") == hooks.hook_source("commit-msg")


def test_every_package_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gitledger").rglob("__init__.py")}
    assert on_disk <= set(config["packages"]), "add the new package to [tool.setuptools] packages"
    assert config["package-dir"]["gitledger._hookscripts"] == "hooks"
    assert set(config["package-data"]["gitledger._hookscripts"]) == set(HOOK_NAMES)


# --- commit-msg -------------------------------------------------------------------------------------


def test_trailer_added_exactly_once_even_after_amend(hooked: Path) -> None:
    assert commit(hooked, "work for the step", key=KEY).returncode == 0
    assert raw_message(hooked) == f"work for the step\n\nGitledger-Key: {KEY}\n".encode()
    proc = run_git(
        "commit", "-q", "--amend", "--allow-empty", "--no-edit", cwd=hooked, env={"GITLEDGER_KEY": KEY}
    )
    assert proc.returncode == 0, proc.stderr
    assert raw_message(hooked).count(b"Gitledger-Key:") == 1
    message = raw_message(hooked).decode()
    proc = commit(hooked, message, key=KEY, extra=("--amend",))
    assert proc.returncode == 0, proc.stderr
    assert raw_message(hooked).count(b"Gitledger-Key:") == 1


def test_without_key_the_message_is_byte_identical(hooked: Path, tmp_path: Path) -> None:
    message = "subject  \n\n  body with trailing spaces  \n\nSigned-off-by: A <a@example.invalid>\n\n\n"
    assert commit(hooked, message, extra=("--cleanup=verbatim",)).returncode == 0
    assert raw_message(hooked) == message.encode()
    # the hook itself, run by hand, does not even touch the file
    msg = tmp_path / "MSG"
    msg.write_bytes(b"x\n")
    before = msg.stat()
    env = {k: v for k, v in os.environ.items() if k != "GITLEDGER_KEY"}
    env["GITLEDGER_KEY"] = ""
    proc = subprocess.run([str(hooks_dir(hooked) / "commit-msg"), str(msg)], cwd=hooked, env=env)
    assert proc.returncode == 0
    assert msg.read_bytes() == b"x\n" and msg.stat().st_mtime_ns == before.st_mtime_ns


def test_other_trailers_are_kept(hooked: Path) -> None:
    message = "fix\n\nbody\n\nSigned-off-by: A <a@example.invalid>\nCo-authored-by: B <b@example.invalid>"
    assert commit(hooked, message, key=KEY).returncode == 0
    assert (
        raw_message(hooked)
        == (
            "fix\n\nbody\n\nSigned-off-by: A <a@example.invalid>\nCo-authored-by: B <b@example.invalid>\n"
            f"Gitledger-Key: {KEY}\n"
        ).encode()
    )


def test_editor_comments_and_verbose_diff_do_not_hide_the_trailer(hooked: Path) -> None:
    (hooked / "README").write_text("changed\n")
    git("add", "README", cwd=hooked)
    proc = run_git(
        "commit",
        "-q",
        "-v",
        "-e",
        "-m",
        "edited",
        cwd=hooked,
        env={"GITLEDGER_KEY": KEY, "GIT_EDITOR": "true"},
    )
    assert proc.returncode == 0, proc.stderr
    assert raw_message(hooked) == f"edited\n\nGitledger-Key: {KEY}\n".encode()


def test_empty_message_still_aborts_the_commit(hooked: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=hooked)
    proc = commit(hooked, "", key=KEY)
    assert proc.returncode != 0
    assert git("rev-parse", "HEAD", cwd=hooked) == head


@pytest.mark.parametrize("bad", ["junk", KEY + "0", KEY.upper(), f"{KEY}\n{KEY}"])
def test_malformed_key_aborts_the_commit_with_one_line(hooked: Path, bad: str) -> None:
    head = git("rev-parse", "HEAD", cwd=hooked)
    proc = commit(hooked, "msg", key=bad)
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "GITLEDGER_KEY is not a gitledger key" in proc.stderr
    assert git("rev-parse", "HEAD", cwd=hooked) == head


# --- install, chaining, uninstall -------------------------------------------------------------------


def test_install_is_idempotent(clone: Path) -> None:
    first = install(clone)
    assert [c.action for c in first] == ["installed", "installed"]
    directory = hooks_dir(clone)
    before = {name: (directory / name).read_bytes() for name in HOOK_NAMES}
    second = install(clone)
    assert [c.action for c in second] == ["unchanged", "unchanged"]
    assert {name: (directory / name).read_bytes() for name in HOOK_NAMES} == before
    assert not list(directory.glob(f"*{CHAINED_SUFFIX}"))
    assert (directory / "pre-push").read_bytes().count(os.fsencode(sys.executable)) == 1


def test_reinstall_with_another_interpreter_updates(clone: Path) -> None:
    install(clone, python="/old/python")
    assert [c.action for c in install(clone)] == ["unchanged", "updated"]


def test_foreign_hook_is_chained_and_still_runs(clone: Path, tmp_path: Path) -> None:
    log = tmp_path / "foreign.log"
    directory = hooks_dir(clone)
    write_script(directory / "commit-msg", f'#!/bin/sh\necho "ran $1" >> {log}\n')
    original = (directory / "commit-msg").read_bytes()
    changes = install(clone)
    assert changes[0].action == "chained"
    assert (directory / f"commit-msg{CHAINED_SUFFIX}").read_bytes() == original
    assert [c.action for c in install(clone)] == ["unchanged", "unchanged"]  # never chains itself
    assert (directory / f"commit-msg{CHAINED_SUFFIX}").read_bytes() == original

    assert commit(clone, "chained", key=KEY).returncode == 0
    assert log.read_text() == "ran .git/COMMIT_EDITMSG\n"
    assert raw_message(clone).endswith(f"Gitledger-Key: {KEY}\n".encode())


def test_chained_hook_still_runs_when_pre_commit_displaced_ours(clone: Path, tmp_path: Path) -> None:
    """'pre-commit install' renames an existing hook to NAME.legacy and runs it from its own hook."""
    log = tmp_path / "foreign.log"
    directory = hooks_dir(clone)
    write_script(directory / "commit-msg", f"#!/bin/sh\necho ran >> {log}\n")
    install(clone)
    os.rename(directory / "commit-msg", directory / "commit-msg.legacy")
    write_script(directory / "commit-msg", '#!/bin/sh\nexec "$0.legacy" "$@"\n')
    assert commit(clone, "displaced", key=KEY).returncode == 0
    assert log.read_text() == "ran\n"
    assert raw_message(clone).endswith(f"Gitledger-Key: {KEY}\n".encode())


def test_failing_foreign_hook_blocks_the_commit(clone: Path) -> None:
    write_script(hooks_dir(clone) / "commit-msg", '#!/bin/sh\necho "foreign says no" >&2\nexit 1\n')
    install(clone)
    head = git("rev-parse", "HEAD", cwd=clone)
    proc = commit(clone, "blocked", key=KEY)
    assert proc.returncode != 0 and "foreign says no" in proc.stderr
    assert git("rev-parse", "HEAD", cwd=clone) == head


def test_chained_pre_push_gets_args_and_stdin_and_both_hooks_decide(
    clone: Path, remote: Path, tmp_path: Path
) -> None:
    record = tmp_path / "foreign-pre-push"
    write_script(
        hooks_dir(clone) / "pre-push",
        f'#!/bin/sh\nprintf "%s|" "$@" > {record}.args\ncat > {record}.stdin\n',
    )
    install(clone)
    publish_convention_branch(remote, tmp_path)
    assert commit(clone, "redo", key=KEY).returncode == 0
    sha = git("rev-parse", "HEAD", cwd=clone)

    proc = push(clone, "HEAD:refs/heads/retry")
    assert proc.returncode == 1, proc.stderr  # the foreign hook passed, ours refused
    assert Path(f"{record}.args").read_text() == f"origin|{remote}|"
    assert Path(f"{record}.stdin").read_text() == f"HEAD {sha} refs/heads/retry {ZERO}\n"
    assert "retry" not in remote_branches(remote)

    write_script(hooks_dir(clone) / f"pre-push{CHAINED_SUFFIX}", "#!/bin/sh\nexit 7\n")
    proc = push(clone, "main:refs/heads/unrelated")
    assert proc.returncode != 0
    assert "unrelated" not in remote_branches(remote)


@pytest.mark.parametrize("relative", [False, True])
def test_core_hooks_path(clone: Path, tmp_path: Path, relative: bool) -> None:
    if relative:
        git("config", "core.hooksPath", ".githooks", cwd=clone)
        expected = clone / ".githooks"
        (clone / "sub").mkdir()
        where = clone / "sub"  # a relative core.hooksPath is taken from the top of the work tree
    else:
        expected = tmp_path / "shared-hooks"
        git("config", "core.hooksPath", str(expected), cwd=clone)
        where = clone
    assert hooks_dir(where) == expected
    changes = install(where)
    assert {c.path for c in changes} == {expected / name for name in HOOK_NAMES}
    assert not (clone / ".git" / "hooks" / "commit-msg").exists()
    assert commit(clone, "with hooksPath", key=KEY).returncode == 0
    assert raw_message(clone).endswith(f"Gitledger-Key: {KEY}\n".encode())


def test_uninstall_restores_the_original_byte_for_byte(clone: Path) -> None:
    directory = hooks_dir(clone)
    original = b"#!/bin/sh\r\n# someone else's hook\r\nexit 0"
    write_script(directory / "pre-push", "", mode=0o750).write_bytes(original)
    install(clone)
    changes = uninstall(clone)
    assert [(c.name, c.action) for c in changes] == [("commit-msg", "removed"), ("pre-push", "restored")]
    assert (directory / "pre-push").read_bytes() == original
    assert stat.S_IMODE((directory / "pre-push").stat().st_mode) == 0o750
    assert not (directory / "commit-msg").exists()
    assert not list(directory.glob(f"*{CHAINED_SUFFIX}"))
    assert [c.action for c in uninstall(clone)] == ["not-installed", "kept-foreign"]
    assert (directory / "pre-push").read_bytes() == original


def test_symlinked_foreign_hook_is_chained_and_restored_as_a_link(clone: Path, tmp_path: Path) -> None:
    target = write_script(tmp_path / "team-hooks" / "commit-msg", "#!/bin/sh\nexit 0\n")
    link = hooks_dir(clone) / "commit-msg"
    link.symlink_to(target)
    install(clone)
    assert target.read_text() == "#!/bin/sh\nexit 0\n"  # not written through the link
    assert (hooks_dir(clone) / f"commit-msg{CHAINED_SUFFIX}").is_symlink()
    uninstall(clone)
    assert link.is_symlink() and os.readlink(link) == str(target)


def test_install_refuses_when_the_chained_slot_is_taken(clone: Path) -> None:
    directory = hooks_dir(clone)
    write_script(directory / "pre-push", "#!/bin/sh\nexit 0\n")
    write_script(directory / f"pre-push{CHAINED_SUFFIX}", "#!/bin/sh\nexit 1\n")
    with pytest.raises(GitledgerError, match="already exists"):
        install(clone)
    assert not (directory / "commit-msg").exists()  # nothing half-installed
    assert (directory / "pre-push").read_text() == "#!/bin/sh\nexit 0\n"


def test_other_version_needs_force(clone: Path) -> None:
    directory = hooks_dir(clone)
    old = hooks.hook_source("commit-msg").replace(b"# gitledger-hook v1", b"# gitledger-hook v0")
    write_script(directory / "commit-msg", "").write_bytes(old)
    proc = run_gitledger("hooks", "install", "--repo", str(clone), cwd=clone)
    assert proc.returncode == 1 and "--force" in proc.stderr and proc.stderr.count("\n") == 1
    assert (directory / "commit-msg").read_bytes() == old
    proc = run_gitledger("hooks", "install", "--force", "--repo", str(clone), cwd=clone)
    assert proc.returncode == 0, proc.stderr
    assert "replaced" in proc.stdout
    assert hook_version((directory / "commit-msg").read_bytes()) == HOOK_VERSION
    assert not (directory / f"commit-msg{CHAINED_SUFFIX}").exists()


def test_cli_help_and_uninstall(clone: Path) -> None:
    proc = run_gitledger("hooks", "--help", cwd=clone)
    assert proc.returncode == 0 and "install" in proc.stdout and "uninstall" in proc.stdout
    assert "check-push" not in proc.stdout
    assert run_gitledger("hooks", "install", cwd=clone).returncode == 0
    proc = run_gitledger("hooks", "uninstall", "--repo", str(clone), cwd=clone)
    assert proc.returncode == 0 and "commit-msg: removed" in proc.stdout
    proc = run_gitledger("hooks", "install", "--repo", str(clone / "nope"), cwd=clone)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


# --- pre-push ---------------------------------------------------------------------------------------


def test_pre_push_refuses_a_duplicate_branch_and_allows_the_override(
    hooked: Path, remote: Path, tmp_path: Path
) -> None:
    existing = publish_convention_branch(remote, tmp_path)
    assert commit(hooked, "the same step again", key=KEY).returncode == 0

    proc = push(hooked, "HEAD:refs/heads/agent-retry")
    assert proc.returncode == 1
    assert f"'{existing}'" in proc.stderr and KEY in proc.stderr
    assert "GITLEDGER_ALLOW_DUPLICATE=1 git push" in proc.stderr and "--no-verify" in proc.stderr
    assert "agent-retry" not in remote_branches(remote)

    assert push(hooked, "HEAD:refs/heads/agent-retry", env={"GITLEDGER_ALLOW_DUPLICATE": "1"}).returncode == 0
    assert push(hooked, "HEAD:refs/heads/by-hand", extra=("--no-verify",)).returncode == 0
    assert {"agent-retry", "by-hand"} <= remote_branches(remote)


def test_pre_push_in_a_repository_whose_path_is_not_utf8(remote: Path, tmp_path: Path) -> None:
    # the check's git answers (the repository's path) were decoded as strict UTF-8: an internal error,
    # and every push of a new keyed branch was refused
    existing = publish_convention_branch(remote, tmp_path)
    work = tmp_path / os.fsdecode(b"work \xff")
    git("clone", "-q", str(remote), str(work), cwd=tmp_path)
    install(work)
    assert commit(work, "the same step again", key=KEY).returncode == 0
    proc = push(work, "HEAD:refs/heads/agent-retry")
    assert proc.returncode == 1 and f"'{existing}'" in proc.stderr and "internal error" not in proc.stderr
    git("checkout", "-q", "--orphan", "fresh", cwd=work)
    assert commit(work, "another step", key=OTHER_KEY).returncode == 0
    proc = push(work, "HEAD:refs/heads/other-step")
    assert proc.returncode == 0, proc.stderr
    assert "other-step" in remote_branches(remote)


def test_pre_push_allows_unrelated_and_convention_pushes(hooked: Path, remote: Path, tmp_path: Path) -> None:
    publish_convention_branch(remote, tmp_path)
    assert commit(hooked, "another step", key=OTHER_KEY).returncode == 0
    assert push(hooked, "HEAD:refs/heads/feature").returncode == 0  # its key has no branch yet
    assert push(hooked, f"HEAD:refs/heads/{branch_for(OTHER_KEY)}").returncode == 0  # the key's own name
    assert commit(hooked, "more", key=KEY).returncode == 0
    assert push(hooked, "HEAD:refs/heads/feature").returncode == 0  # an update, not a new branch
    assert push(hooked, "--delete", "feature").returncode == 0


def test_pre_push_allows_building_on_the_existing_branch(hooked: Path, remote: Path, tmp_path: Path) -> None:
    existing = publish_convention_branch(remote, tmp_path)
    # fetched, but with no remote-tracking ref (as in a single-branch clone): its keyed commit looks
    # new to the sh part, and check-push sees that the new branch builds on the existing one
    git("fetch", "-q", "origin", existing, cwd=hooked)
    git("update-ref", "-d", f"refs/remotes/origin/{existing}", cwd=hooked)
    git("checkout", "-q", "-b", "next-step", "FETCH_HEAD", cwd=hooked)
    assert commit(hooked, "next step", key=OTHER_KEY).returncode == 0
    proc = push(hooked, "HEAD:refs/heads/next-step")
    assert proc.returncode == 0, proc.stderr


def test_pre_push_with_nothing_to_check_starts_no_python(clone: Path, remote: Path, tmp_path: Path) -> None:
    tripwire = tmp_path / "python-started"
    fake = f'#!/bin/sh\necho "$0 $*" >> {tripwire}\nexit 3\n'
    fake_python = write_script(tmp_path / "fakebin" / "python", fake)
    write_script(tmp_path / "fakebin" / "gitledger", fake)
    install(clone, python=str(fake_python))
    env = {"PATH": f"{tmp_path / 'fakebin'}{os.pathsep}{os.environ['PATH']}"}

    assert commit(clone, "keyed commit on main", key=KEY).returncode == 0  # commit-msg: sh only
    assert push(clone, "main", env=env).returncode == 0  # an update of an existing branch
    git("checkout", "-q", "-b", "plain", cwd=clone)
    assert commit(clone, "no key").returncode == 0
    git("tag", "v1", cwd=clone)
    proc = run_git("push", "origin", "HEAD:refs/heads/plain", "v1", cwd=clone, env=env)
    assert proc.returncode == 0, proc.stderr  # a new branch whose new commits carry no key, a tag
    assert push(clone, "--delete", "plain", env=env).returncode == 0
    assert not tripwire.exists()

    # control: a keyed commit on a new branch does reach the (failing) interpreter
    assert commit(clone, "keyed", key=OTHER_KEY).returncode == 0
    proc = push(clone, "HEAD:refs/heads/keyed", env=env)
    assert proc.returncode != 0
    assert tripwire.read_text().startswith(f"{fake_python} -m gitledger hooks check-push")


def test_pre_push_with_git_dir_from_a_subdirectory(hooked: Path, remote: Path, tmp_path: Path) -> None:
    publish_convention_branch(remote, tmp_path)
    assert commit(hooked, "again", key=KEY).returncode == 0
    (hooked / "sub").mkdir()
    proc = run_git(
        f"--git-dir={hooked / '.git'}", "push", "origin", "HEAD:refs/heads/elsewhere", cwd=hooked / "sub"
    )
    assert proc.returncode == 1 and "duplicate" in proc.stderr


def test_pre_push_under_the_pre_commit_framework(clone: Path, remote: Path, tmp_path: Path) -> None:
    """pre-commit reads git's stdin itself and describes one ref in PRE_COMMIT_* variables."""
    publish_convention_branch(remote, tmp_path)
    assert commit(clone, f"again\n\nGitledger-Key: {KEY}").returncode == 0  # no hooks installed
    sha = git("rev-parse", "HEAD", cwd=clone)
    write_script(tmp_path / "bin" / "gitledger", f'#!/bin/sh\nexec {sys.executable} -m gitledger "$@"\n')
    env = {k: v for k, v in os.environ.items() if k != "GITLEDGER_KEY"}
    env.update(
        PATH=f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}",
        PRE_COMMIT="1",
        PRE_COMMIT_REMOTE_NAME="origin",
        PRE_COMMIT_REMOTE_URL=str(remote),
        PRE_COMMIT_LOCAL_BRANCH="refs/heads/main",
        PRE_COMMIT_REMOTE_BRANCH="refs/heads/copy",
        PRE_COMMIT_FROM_REF=git("rev-parse", "HEAD~1", cwd=clone),
        PRE_COMMIT_TO_REF=sha,
    )
    script = str(ROOT / "hooks" / "pre-push")
    proc = subprocess.run(
        [script], cwd=clone, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert proc.returncode == 1 and "duplicate" in proc.stderr
    env["PRE_COMMIT_REMOTE_BRANCH"] = "refs/heads/main"  # tracked: an update
    proc = subprocess.run(
        [script], cwd=clone, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


# --- check_push as a library ------------------------------------------------------------------------


def test_check_push_consults_existence_finders(clone: Path, remote: Path) -> None:
    assert commit(clone, "keyed", key=KEY).returncode == 0
    sha = git("rev-parse", "HEAD", cwd=clone)
    asked: list[str] = []

    def pr_finder(key: str) -> str | None:
        asked.append(key)
        return "https://example.invalid/pulls/7" if key == KEY else None

    new = [Push(sha, "refs/heads/new-branch", KEY), Push(sha, "refs/heads/new-branch", OTHER_KEY)]
    conflicts = check_push(clone, "origin", new, finders=[pr_finder])
    assert [(c.key, c.artifact) for c in conflicts] == [(KEY, "https://example.invalid/pulls/7")]
    assert asked == [KEY, OTHER_KEY]
    assert "new-branch" in conflicts[0].message()
    # a branch that already exists on the remote is an update: never a duplicate, finders not asked
    asked.clear()
    assert check_push(clone, "origin", [Push(sha, "refs/heads/main", KEY)], finders=[pr_finder]) == []
    assert asked == []


def test_no_git_env_drops_repository_variables_and_keeps_transport_ones() -> None:
    env = {
        "GIT_DIR": ".git",
        "GIT_INDEX_FILE": ".git/index",
        "GIT_PREFIX": "sub/",
        "GIT_WORK_TREE": "/x",
        "GIT_SSH_COMMAND": "ssh -i key",
        "GIT_CONFIG_GLOBAL": "/home/me/.gitconfig",
        "GIT_CONFIG_KEY_0": "a.b",
        "PATH": "/bin",
    }
    assert no_git_env(env) == {
        "GIT_SSH_COMMAND": "ssh -i key",
        "GIT_CONFIG_GLOBAL": "/home/me/.gitconfig",
        "GIT_CONFIG_KEY_0": "a.b",
        "PATH": "/bin",
    }


def test_check_push_command_reports_finder_results(
    clone: Path, remote: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gitledger.cli import main

    sha = git("rev-parse", "HEAD", cwd=clone)
    argv = ["hooks", "check-push", "--git-dir", str(clone / ".git"), "--", "origin", str(remote)]

    def found(key: str) -> str | None:
        return "https://example.invalid/pulls/7"

    def cannot_tell(key: str) -> str | None:
        raise CheckError("the forge is unreachable")

    for finder, expected in ((found, "pulls/7"), (cannot_tell, "the forge is unreachable")):
        monkeypatch.setattr(prepush, "existence_finders", lambda *args, f=finder: [f])
        monkeypatch.setattr(sys, "stdin", io.StringIO(f"{sha} refs/heads/new {KEY}\n"))
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert expected in err and "GITLEDGER_ALLOW_DUPLICATE=1 git push" in err


def test_check_push_with_a_git_directory_that_is_gone_says_so(tmp_path: Path) -> None:
    """It said 'git is not installed or not on PATH' (the missing directory made git's start fail)."""
    gone = tmp_path / "gone" / ".git"
    argv = ["hooks", "check-push", "--git-dir", str(gone), "--", "origin", "url"]
    proc = run_gitledger(*argv, cwd=tmp_path, input=f"{'a' * 40} refs/heads/new {KEY}\n")
    assert (
        proc.returncode == 1
        and proc.stderr == f"gitledger: {gone} is not a directory; give a git repository's path\n"
    )
