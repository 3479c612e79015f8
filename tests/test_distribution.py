"""What the package index and a packager get: the metadata, the sdist (whose tests collect and run), the
distribution name everywhere, and a README whose links work off the repository."""

from __future__ import annotations

import email.parser
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from testing.repos import ROOT
from tests.packaging_support import dists, ok, pyproject, run

# one worker for the packaging modules under pytest-xdist: they build and install this tree (its
# build/ and *.egg-info), and this module builds its environment once
pytestmark = pytest.mark.xdist_group("packaging")

DIST_NAME = "gitledger-agents"
REPO_URL = "https://github.com/gitledger/gitledger"


def _tracked_files() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist): nothing to compare the sdist with")
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [name for name in proc.stdout.decode().split("\0") if name and (ROOT / name).exists()]


def test_project_metadata() -> None:
    project = pyproject()["project"]
    assert project["name"] == DIST_NAME
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert project["scripts"] == {"gitledger": "gitledger.cli:main"}
    assert project["urls"]["Repository"] == REPO_URL
    assert all(url.startswith(REPO_URL) for url in project["urls"].values())
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # SPDX instead (PEP 639)


def test_wheel_metadata() -> None:
    wheel = dists().wheel
    assert wheel.name.startswith("gitledger_agents-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [meta_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(archive.read(meta_name).decode())
        entry_points = archive.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    assert meta["Name"] == DIST_NAME and meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert {"gitledger/__init__.py", "gitledger/py.typed", "gitledger/_hookscripts/pre-push"} <= set(names)
    assert "gitledger/mcp/profiles/github.yaml" in names  # the packaged MCP proxy profile
    assert "Package would be ignored" not in dists().log  # every folder with files is a listed package
    assert not any(n.startswith("tests/") for n in names)  # tests ship in the sdist, not in the wheel
    assert "gitledger = gitledger.cli:main" in entry_points
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL", []))
    assert urls["Repository"] == REPO_URL
    assert meta["Keywords"] and len(meta.get_all("Classifier", [])) >= 5
    requires = meta.get_all("Requires-Dist", [])
    for spec in pyproject()["project"]["dependencies"]:
        name, floor = spec.split(">=")
        assert any(re.fullmatch(rf"(?i){re.escape(name)}>={re.escape(floor)}", r) for r in requires), spec
    assert str(meta.get_payload()).startswith("# gitledger")  # the README is the long description


def test_the_sdist_holds_the_tracked_tree_and_its_tests_run(tmp_path: Path) -> None:
    sdist = dists().sdist
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    missing = sorted(set(_tracked_files()) - members)
    assert not missing, f"tracked files missing from the sdist (add them to MANIFEST.in): {missing}"
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in members)
    [unpacked] = tmp_path.iterdir()
    assert not (unpacked / ".git").exists()

    def collected(where: Path) -> list[str]:
        argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"]
        lines = ok(run(argv, cwd=where, timeout=180)).splitlines()
        return sorted(line for line in lines if "::" in line)

    from_sdist = collected(unpacked)
    assert len(from_sdist) > 400
    assert from_sdist == collected(ROOT)
    # and a few of them run from the unpacked archive, against the code in it
    argv = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_keys.py"]
    output = ok(run(argv, cwd=unpacked, env=None, timeout=300))
    assert re.search(r"\d+ passed", output)
    shutil.rmtree(unpacked)


def test_the_distribution_name_is_used_everywhere() -> None:
    """Installing "gitledger" from the index would get an unrelated project: every install line names ours."""
    bad = re.compile(r"(pip|pipx)\s+install\s+(?:-[-\w]+\s+)*['\"]?gitledger(?![-\w])")
    offenders = []
    for name in _tracked_files():
        path = ROOT / name
        if path.suffix not in {".md", ".yml", ".yaml", ".toml", ".py", ".txt", ""} or path.is_dir():
            continue
        text = path.read_text(errors="replace")
        offenders += [f"{name}: {m[0]}" for m in bad.finditer(text)]
    assert not offenders
    readme = (ROOT / "README.md").read_text()
    assert f"pip install {DIST_NAME}" in readme
    # the README's first command still installs this checkout, so it works on a fresh machine
    first = re.search(r"```sh\n(?:#.*\n)*(.*)\n", readme)
    assert first and first[1].startswith("python3 -m pip install . &&")


def test_readme_links_work_off_the_repository() -> None:
    """The README is also the index page: every link is absolute, and links into the repository name
    files that exist."""
    readme = (ROOT / "README.md").read_text()
    inline = re.findall(r"\]\(([^)\s]+)\)", readme)
    references = re.findall(r"^\[[^\]]+\]:\s*(\S+)", readme, flags=re.M)
    assert references, "expected reference-style links at the end of the README"
    for target in inline + references:
        assert re.match(r"https?://|#", target), f"relative link {target!r} is dead on the package index"
        if target.startswith(f"{REPO_URL}/blob/main/"):
            path = target.removeprefix(f"{REPO_URL}/blob/main/").split("#")[0]
            assert (ROOT / path).is_file(), f"link to a file that does not exist: {target}"
    defined = set(re.findall(r"^\[([^\]]+)\]:", readme, flags=re.M))
    used = set(re.findall(r"\]\[([^\]]+)\]", readme)) | set(re.findall(r"\[([\w./-]+\.md)\](?![(:])", readme))
    assert used <= defined, f"references without a definition: {used - defined}"


def test_ci_runs_the_checkers_then_exactly_the_readme_test_command() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    readme = (ROOT / "README.md").read_text()
    test_command = re.search(r"# 2\. run the whole test suite.*\n(.*)\n", readme)
    assert test_command and lines[-1] == test_command[1]
    checkers = ["ruff check .", "ruff format --check .", "mypy --strict", "lint-imports"]
    positions = [lines.index(c) for c in checkers]
    assert positions == sorted(positions) and positions[-1] < len(lines) - 1
    install = next(line for line in lines if "--constraint .ci/constraints.txt" in line)
    assert lines.index(install) < positions[0]
    pinned = {
        line.split("==")[0].lower()
        for line in (ROOT / ".ci" / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    assert {"ruff", "mypy", "import-linter"} <= pinned
