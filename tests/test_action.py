"""The composite GitHub Action (action.yml) and the workflows: they parse, and the action's script runs
end to end against the local fake GitHub (the setup-python and pip-install steps are replaced by a shim)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from testing.fakegithub import FakeGitHub
from testing.repos import ROOT
from tests.audit_support import KEY_B, make_scenario, prepare_work
from tests.github_support import REPO, TOKEN, fast_env


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
    github: FakeGitHub, cwd: Path, tmp_path: Path, inputs: dict[str, str]
) -> tuple[int, str, Path]:
    """Run the composite action's shell steps like the runner does (setup/install steps skipped)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    values = {"github.token": TOKEN, "github.repository": REPO, "github.action_path": str(ROOT)}
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
        if step.get("id") == "install":  # pip install of this checkout: replaced by a shim on PATH
            values["steps.install.outputs.gitledger"] = str(shim / "gitledger")
            continue
        env = {
            **fast_env(github),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(outputs_file),
            "GITHUB_ACTION_PATH": str(ROOT),
            "RUNNER_TEMP": str(tmp_path),
        }
        env.pop("GITHUB_TOKEN")  # the action must pass it itself
        env.update({k: _expand(str(v), values) for k, v in (step.get("env") or {}).items()})
        assert step.get("shell") == "bash"
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _expand(step["run"], values)],
            cwd=cwd,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
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
