"""Writes the suite's figures as JSON when GITLEDGER_RELIABILITY_REPORT=PATH is set.

Under pytest-xdist each worker counts its own tests' figures: a worker writes them next to PATH
(``PATH.gw0`` ...) and the controller, which sees every test's outcome, adds them up into PATH.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.faults.tally import FIGURES, MAXIMA, REPORT_ENV, STRESS_ENV, TALLY

_outcomes: dict[str, int] = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "tests/faults/" not in report.nodeid.replace("\\", "/"):
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        Path(f"{path}.{worker}").write_text(json.dumps(dict(TALLY.counts)), encoding="utf-8")
        return
    counts = dict(TALLY.counts)
    for part in sorted(Path(path).parent.glob(f"{Path(path).name}.gw*")):
        for name, value in json.loads(part.read_text(encoding="utf-8")).items():
            both = (counts.get(name, 0), value)
            counts[name] = max(both) if name in MAXIMA else sum(both)
        part.unlink()
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False).stdout
    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "gitledger"], cwd=root, capture_output=True)
    data: dict[str, Any] = {
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "size": os.environ.get(STRESS_ENV) or "default",
        "commit": head.stdout.strip() + (" (with local changes)" if dirty.stdout.strip() else ""),
        "git": git_version.strip(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "tests": dict(_outcomes),
        "figures": {name: counts.get(name, 0) for name in FIGURES},
    }
    Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
