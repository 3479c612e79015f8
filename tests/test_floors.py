"""The declared dependency floors are real: exactly the minimum versions, installed in a fresh virtualenv
from the built wheel, run a typer command and GitHub checks (real PyGithub against the local fake).
And every library gitledger imports is declared."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from testing.fakegithub import FakeGitHub, drop_after_effect
from testing.repos import ROOT, init_repo
from tests.github_support import REPO, clone, fast_env
from tests.packaging_support import INSTALL_TIMEOUT, clean_env, dists, make_venv, ok, pyproject, run

# one worker for the packaging modules under pytest-xdist: they build and install this tree (its
# build/ and *.egg-info)
pytestmark = pytest.mark.xdist_group("packaging")

_FLOOR = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)>=([0-9]+(?:\.[0-9]+)*)$")


def minimum_pins() -> dict[str, str]:
    """{distribution: minimum version} from [project].dependencies, each of which must be NAME>=VERSION."""
    pins = {}
    for spec in pyproject()["project"]["dependencies"]:
        match = _FLOOR.match(spec.replace(" ", ""))
        assert match, f"dependency {spec!r} must be declared as NAME>=VERSION (a floor the tests install)"
        pins[match[1]] = match[2]
    return pins


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_top_level_modules() -> dict[str, set[str]]:
    """{top-level module: files} for every absolute import in gitledger/, inside functions too."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "gitledger").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def _commands(result: tuple[int, str]) -> list[str]:
    """The command names listed under 'Commands:' in a help screen."""
    code, help_text = result
    assert code == 0, help_text
    section = help_text.split("Commands:", 1)[1]
    return [line.split()[0] for line in section.splitlines() if re.match(r"  \S", line)]


def test_every_imported_library_is_declared() -> None:
    project = pyproject()["project"]
    declared = {_normal(Requirement(spec).name) for spec in project["dependencies"]}
    optional = {
        _normal(Requirement(spec).name)
        for extra, specs in project.get("optional-dependencies", {}).items()
        if extra not in {"test", "bench"}
        for spec in specs
    }
    providers = importlib.metadata.packages_distributions()
    missing = []
    for module, files in sorted(imported_top_level_modules().items()):
        if module in sys.stdlib_module_names or module in {"gitledger", "__future__"}:
            continue
        dists = {_normal(d) for d in providers.get(module, [])}
        assert dists, f"cannot tell which distribution provides {module!r} (imported in {sorted(files)})"
        if not dists & (declared | optional):
            missing.append(f"{module} ({', '.join(sorted(dists))}) imported in {', '.join(sorted(files))}")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(missing)
    assert {"typer", "pygithub", "pyyaml", "requests", "urllib3"} <= declared
    assert set(minimum_pins())  # every dependency carries a floor


def test_the_declared_minimum_versions_work(github: FakeGitHub, tmp_path: Path) -> None:
    pins = minimum_pins()
    constraints = tmp_path / "minimum.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
    bin_dir = make_venv(tmp_path / "venv")
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q"]
    ok(run([*pip, "-c", str(constraints), str(dists().wheel)], timeout=INSTALL_TIMEOUT))
    probe = (
        "import importlib.metadata as m, json, sys, gitledger;"
        "print(json.dumps([gitledger.__file__, {n: m.version(n) for n in sys.argv[1:]}]))"
    )
    where, versions = json.loads(
        ok(run([str(bin_dir / "python"), "-c", probe, *pins], cwd=tmp_path, timeout=60))
    )
    assert versions == pins  # exactly the floors, nothing newer
    assert Path(where).is_relative_to(tmp_path / "venv")  # the built wheel, not this checkout

    def text(*args: str, cwd: Path) -> tuple[int, str]:
        proc = run([str(bin_dir / "gitledger"), *args], cwd=cwd, timeout=120)
        return proc.returncode, proc.stdout + proc.stderr

    def data(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
        proc = run([str(bin_dir / "gitledger"), *args], cwd=cwd, env=clean_env(**(env or {})), timeout=120)
        assert proc.stdout.strip(), f"rc={proc.returncode} {proc.stderr}"
        return json.loads(proc.stdout)

    # typer: every command's help, a usage error, and a step run twice
    repo = init_repo(tmp_path / "repo")
    commands = _commands(text("--help", cwd=repo))
    assert {"run-step", "list", "github", "hooks"} <= set(commands)
    for group in ("github", "hooks"):
        commands += [f"{group} {sub}" for sub in _commands(text(group, "--help", cwd=repo))]
    for command in commands:
        code, output = text(*command.split(), "--help", cwd=repo)
        assert code == 0 and output.lower().startswith("usage:"), (command, output)
    code, output = text("completion", "bash", cwd=repo)  # typer's completion internals, at the floor
    assert code == 0 and "_GITLEDGER_COMPLETE=complete_bash" in output
    code, output = text(cwd=repo)  # bare gitledger: help on stdout, exit 0
    assert code == 0 and output.startswith("Usage: gitledger")
    code, output = text("run-step", "--no-such-option", cwd=repo)
    assert code == 2 and "Traceback" not in output and "--no-such-option" in output
    step = ("run-step", "-t", "T-1", "-s", "hello", "--json", "--", "true")
    assert data(*step, cwd=repo)["status"] == "created"
    assert data(*step, cwd=repo)["status"] == "skipped"

    # PyGithub, requests, urllib3: a github-pr check and open-pr; a lost answer is not re-sent
    work = clone(github, tmp_path / "work")
    env = fast_env(github)
    pulls = r"^/repos/acme/widgets/pulls$"
    github.inject("POST", pulls, drop_after_effect(), times=1)
    open_pr = [
        str(bin_dir / "gitledger"),
        "github",
        "open-pr",
        "--github-repo",
        REPO,
        "--title",
        "Fix",
        "-b",
        "B",
    ]
    pr_step = ["run-step", "-t", "T-1", "-s", "pr", "-c", "github-pr", "--github-repo", REPO, "--json", "--"]
    first = data(*pr_step, *open_pr, cwd=work, env=env)
    assert first["status"] == "created", first
    assert github.count_requests("POST", pulls) == 1 and len(github.pulls()) == 1
    # the ledger forgets the step: the github-pr check finds the PR by itself
    ok(run([str(bin_dir / "gitledger"), "resolve", first["key"], "--forget"], cwd=work, timeout=60))
    again = data(*pr_step, *open_pr, cwd=work, env=env)
    assert again["status"] == "already_existed" and len(github.pulls()) == 1, again
    assert data("audit", "--github-repo", REPO, "--json", cwd=work, env=env)["duplicates"] == []
