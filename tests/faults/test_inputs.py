"""Bad inputs: property tests for keys and configs, a malformed-config corpus, hostile names.

Hypothesis example counts are bounded (``GITLEDGER_STRESS=full`` multiplies them by ten).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gitledger.config import parse as parse_config
from gitledger.core.errors import ConfigError, UsageError
from gitledger.core.keys import KEY_RE, MAX_LABEL_LEN, Content, Names, StepKey
from testing.repos import git, gitledger_argv, init_repo
from tests.faults.tally import TALLY, full_size

SCALE = 10 if full_size() else 1


def examples(n: int) -> settings:
    return settings(
        max_examples=n * SCALE,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def valid_branch(name: str) -> bool:
    proc = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True, check=False)
    return proc.returncode == 0 and proc.stdout.decode().strip() == name


def valid_ref(name: str) -> bool:
    return subprocess.run(["git", "check-ref-format", name], capture_output=True, check=False).returncode == 0


# -- keys ------------------------------------------------------------------------------------------------

contents = st.one_of(
    st.none(),
    st.text().map(Content.text),
    st.binary().map(Content.raw),
    st.dictionaries(st.text(max_size=20), st.one_of(st.text(), st.integers(), st.booleans(), st.none())).map(
        Content.args
    ),
)


def derive_or_usage_error(task: str, step: str, content: Content | None, names: Names | None = None) -> Any:
    try:
        return StepKey.derive(task, step, content, names)
    except UsageError:
        return None


@examples(200)
@given(task=st.text(), step=st.text(), content=contents)
def test_keys_from_any_text_are_valid_deterministic_names(
    task: str, step: str, content: Content | None
) -> None:
    TALLY.add("inputs.property_examples")
    first = derive_or_usage_error(task, step, content)
    refused = should_refuse(task) or should_refuse(step)
    assert (first is None) == refused, (task, step)
    if first is None:
        return
    again = StepKey.derive(task, step, content)
    assert again == first and again.key == first.key  # deterministic
    assert KEY_RE.match(first.key)
    assert valid_branch(first.branch) and first.branch.startswith("gitledger/")
    assert valid_ref(f"refs/gitledger/{first.key}")
    assert len(first.label) <= MAX_LABEL_LEN and first.label.startswith("gitledger:")
    assert (
        first.trailer == f"Gitledger-Key: {first.key}" and first.marker == f"<!-- gitledger:{first.key} -->"
    )
    assert "\n" not in first.key + first.branch + first.label


def should_refuse(name: str) -> bool:
    """The contract for task and step names: refused when empty or blank, with a control character
    (C0, DEL, C1), longer than 1024 characters, or without a UTF-8 form (lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    control = any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name)
    return not name.strip() or control or len(name) > 1024


PREFIX_ALPHABET = "abcXYZ019._/-@{}~^:?*[\\ \n"


@examples(200)
@given(branch=st.text(PREFIX_ALPHABET, max_size=12), label=st.text(max_size=40))
def test_any_prefix_is_refused_or_gives_valid_names(branch: str, label: str) -> None:
    TALLY.add("inputs.property_examples")
    try:
        names = Names(branch_prefix=branch, label_prefix=label)
    except UsageError:
        return
    step = StepKey.derive("task", "step", names=names)
    assert valid_branch(step.branch), step.branch
    assert len(step.label) <= MAX_LABEL_LEN and step.label.startswith(label)
    assert len(step.label) - len(label) >= 16


@pytest.fixture(scope="module")
def cli_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_repo(tmp_path_factory.mktemp("cli") / "repo")


argv_text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=80)


@examples(20)
@given(task=argv_text, step=argv_text, content=argv_text)
def test_the_cli_derives_the_same_key_or_says_why_in_one_line(
    cli_repo: Path, task: str, step: str, content: str
) -> None:
    TALLY.add("inputs.property_examples")
    argv = gitledger_argv("key", f"--task={task}", f"--step={step}", f"--content={content}", "--json")
    proc = subprocess.run(argv, cwd=cli_repo, capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in proc.stderr
    expected = derive_or_usage_error(task, step, Content.text(content))
    if expected is None:
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["key"] == expected.key


# -- configuration ---------------------------------------------------------------------------------------

CONFIG = Path("/repo/.gitledger.yml")


def parse_or_config_error(text: str) -> None:
    try:
        parse_config(text, CONFIG)
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith(str(CONFIG)) and "\n" not in message, message


@examples(300)
@given(text=st.text())
def test_config_text_either_parses_or_is_one_config_error(text: str) -> None:
    TALLY.add("inputs.property_examples")
    parse_or_config_error(text)


yaml_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=15), inner, max_size=4)
    ),
    max_leaves=20,
)
config_keys = st.sampled_from(
    ["version", "remote", "claims", "lease", "on_unconfirmed", "prefixes", "github", "steps", "other"]
)


@examples(300)
@given(data=st.dictionaries(config_keys, yaml_values, max_size=5))
# names holding a newline made a two-line message (found by the full soak)
@example(data={"steps": {"\n": None}})
@example(data={"steps": {"\n": {"": None}}})
def test_config_structures_either_parse_or_are_one_config_error(data: dict[str, Any]) -> None:
    import yaml

    TALLY.add("inputs.property_examples")
    parse_or_config_error(yaml.safe_dump(data))


# (text, line the message must name)
MALFORMED_CONFIGS: list[tuple[str, int]] = [
    ("steps: [\n", 2),
    ("lease: -5\n", 1),
    ("lease: abc\n", 1),
    ("lease: true\n", 1),
    ("lease: .inf\n", 1),
    ("lease: .nan\n", 1),
    ("on_unconfirmed: maybe\n", 1),
    ("\n\nsteps:\n  open-pr:\n    checks: [bogus]\n", 5),
    ("steps:\n  x:\n    checks: ['cmd:']\n", 3),
    ("steps:\n  x:\n    checks: ['cmd:   ']\n", 3),
    ("steps:\n  x:\n    checks: ['github-comment:0']\n", 3),
    ("steps:\n  x:\n    checks: ['github-comment:-1']\n", 3),
    ("steps:\n  x:\n    checks: ['branch:--upload-pack']\n", 3),
    ("steps:\n  x:\n    checks: [[nested]]\n", 3),
    ("steps:\n  x:\n    lease: 0\n", 3),
    ("steps:\n  x:\n    retries: 3\n", 3),
    ("steps:\n  x: 5\n", 2),
    ("steps: 5\n", 1),
    ("prefixes:\n  branch: 'a..b/'\n", 2),
    ("prefixes:\n  branch: 'has space/'\n", 2),
    ("prefixes:\n  label: '" + "l" * 40 + "'\n", 2),
    ("prefixes:\n  colour: red\n", 2),
    ("github:\n  repo: not-a-repo\n", 2),
    ("github:\n  repo: a/b/c\n", 2),
    ("github: acme/widgets\n", 1),
    ("unknown: 1\n", 1),
    ("lease: 900\nlease: 100\n", 2),
    ("- a\n- b\n", 1),
    ("claims: sometimes\n", 1),
    ("version: 2\n", 1),
    ("remote: ''\n", 1),
    ("steps:\n\tx: 1\n", 2),
    ("on_unconfirmed: !!python/object/apply:os.system ['touch /tmp/gitledger-pwned-config']\n", 1),
    (
        'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b]\n',
        1,
    ),
    ("lease: 900\n  bad-indent: 1\n", 2),
    ('"unterminated\n', 2),
    ("key: value\n...\n---\nsecond: doc\n", 3),
]


@pytest.mark.parametrize(
    ("text", "line"), MALFORMED_CONFIGS, ids=[f"{i:02d}" for i in range(len(MALFORMED_CONFIGS))]
)
def test_a_malformed_config_is_exit_2_and_one_line_naming_file_and_line(
    cli_repo: Path, tmp_path: Path, text: str, line: int
) -> None:
    TALLY.add("inputs.bad")
    config = cli_repo / ".gitledger.yml"
    config.write_text(text)
    sentinel = tmp_path / "ran"
    try:
        proc = subprocess.run(
            gitledger_argv("run-step", "-t", "t", "-s", "x", "--", "touch", str(sentinel)),
            cwd=cli_repo,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        config.unlink()
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{config} line {line}:" in proc.stderr, proc.stderr
    assert not sentinel.exists() and not Path("/tmp/gitledger-pwned-config").exists()


def test_a_config_that_is_not_utf8_is_one_line(cli_repo: Path) -> None:
    TALLY.add("inputs.bad")
    config = cli_repo / ".gitledger.yml"
    config.write_bytes(b"lease: \xff\xfe\n")
    try:
        proc = subprocess.run(
            gitledger_argv("run-step", "-t", "t", "-s", "x", "--", "true"),
            cwd=cli_repo,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        config.unlink()
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and str(config) in proc.stderr, proc.stderr


# -- hostile names ---------------------------------------------------------------------------------------

SENTINEL_TEMPLATES = [
    "$(touch {s})",
    "`touch {s}`",
    "; touch {s}",
    "a && touch {s}",
    "| touch {s}",
    "'; touch {s}; '",
    '"; touch {s}; "',
    "$(touch${{IFS}}{s})",
    "{s}",
]
HOSTILE = [
    "..",
    "../../etc/passwd",
    "@{",
    "@",
    "~^:",
    "refs/heads/main",
    "HEAD",
    "-rf",
    "--help",
    "*?[",
    "\\",
    "a/b/../c",
    ".lock",
    "x.lock",
    "名前 / ステップ",
    "\u202eevil\u202c",
    "emoji 🎉",
    " leading and trailing ",
    "%s%n%x",
    "<!-- gitledger:x.y.000000000000000000000000 -->",
    "Gitledger-Key: fake.key.000000000000000000000000",
    "x" * 1024,
]
REFUSED = ["x" * 1025, "line1\nline2", "tab\there", "cr\rhere", "bell\a", "del\x7f", "", "   "]

EFFECT = (
    'printf %s "$GITLEDGER_TASK" > "$OUT/task"; printf %s "$GITLEDGER_STEP" > "$OUT/step"; '
    'git branch "$GITLEDGER_BRANCH"'
)
CHECK_CMD = 'cmd:test -e "$OUT/seen-$GITLEDGER_KEY" || exit 1; echo "$GITLEDGER_TASK"'


def hostile_values(sentinel: Path) -> list[str]:
    return [t.format(s=sentinel) for t in SENTINEL_TEMPLATES] + HOSTILE


def refs(repo: Path) -> dict[str, str]:
    lines = git("for-each-ref", "--format=%(refname) %(objectname)", cwd=repo).splitlines()
    return dict(line.split(" ", 1) for line in lines)


def test_hostile_task_and_step_names_never_reach_a_shell_or_a_ref_unvalidated(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    out = tmp_path / "out"
    out.mkdir()
    sentinel = tmp_path / "pwned"
    env = {**os.environ, "OUT": str(out)}
    for value in hostile_values(sentinel) + REFUSED:
        TALLY.add("inputs.bad")
        before = refs(repo)
        argv = gitledger_argv(
            "run-step",
            f"--task={value}",
            f"--step={value}",
            "--json",
            "-c",
            "branch",
            "-c",
            "trailer",
            "-c",
            CHECK_CMD,
            "--",
            "sh",
            "-c",
            EFFECT,
        )
        proc = subprocess.run(
            argv, cwd=repo, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert "Traceback" not in proc.stderr, (value, proc.stderr)
        assert not sentinel.exists(), f"{value!r} reached a shell"
        if value in REFUSED:
            assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (value, proc.stderr)
            assert refs(repo) == before
            continue
        assert proc.returncode == 0, (value, proc.stderr)
        result = json.loads(proc.stdout)
        assert result["status"] == "created"
        # the command saw the names byte for byte, through the environment
        assert (out / "task").read_text() == value and (out / "step").read_text() == value
        step = StepKey.derive(value, value)
        assert result["key"] == step.key
        new_refs = set(refs(repo)) - set(before)
        assert f"refs/heads/{step.branch}" in new_refs and valid_branch(step.branch)
        assert all(
            r.startswith(("refs/heads/gitledger/", "refs/notes/", "refs/gitledger/")) for r in new_refs
        )
        assert {r: before[r] for r in before if r.startswith("refs/heads/main")} == {
            r: refs(repo)[r] for r in before if r.startswith("refs/heads/main")
        }
        entry = json.loads(
            subprocess.run(
                gitledger_argv("show", step.key, "--json"),
                cwd=repo,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert entry["task"] == value and entry["step"] == value
        again = subprocess.run(
            argv, cwd=repo, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert json.loads(again.stdout)["status"] == "skipped", again.stderr
    TALLY.add("inputs.sentinels", int(sentinel.exists()))


def test_hostile_trailers_and_keys_never_reach_a_shell_in_the_hooks(tmp_path: Path) -> None:
    """The commit-msg hook takes GITLEDGER_KEY from the environment, the pre-push hook reads trailers
    from commits: both accept only strings that match the key pattern."""
    repo = init_repo(tmp_path / "repo")
    remote = init_repo(tmp_path / "remote.git", bare=True)
    git("remote", "add", "origin", str(remote), cwd=repo)
    sentinel = tmp_path / "pwned"
    install = subprocess.run(gitledger_argv("hooks", "install"), cwd=repo, capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    for value in hostile_values(sentinel):
        TALLY.add("inputs.bad")
        env = {**os.environ, "GITLEDGER_KEY": value}
        commit = subprocess.run(
            ["git", "commit", "-q", "--allow-empty", "-m", "work"], cwd=repo, env=env, capture_output=True
        )
        assert commit.returncode != 0  # the hook refuses a GITLEDGER_KEY that is not a key
        git("commit", "-q", "--allow-empty", "-m", "work", "-m", f"Gitledger-Key: {value}", cwd=repo)
    push = subprocess.run(
        ["git", "push", "-q", "origin", "HEAD:refs/heads/agent/hostile"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert push.returncode == 0, push.stderr
    assert not sentinel.exists()
    TALLY.add("inputs.sentinels", int(sentinel.exists()))
