"""The examples run: the agent loop under the chaos driver makes every effect exactly once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from testing.repos import ROOT

DRIVER = ROOT / "examples" / "chaos_driver.py"


def chaos(*args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--seed", "7", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr
    summary = json.loads(proc.stdout)
    assert proc.returncode == 0 and summary["ok"], summary
    return dict(summary)


def test_chaos_driver_local_effects_exactly_once() -> None:
    summary = chaos("--rounds", "16", "--tasks", "2")
    assert summary["killed"], summary  # the kills really happened


@pytest.mark.parametrize("policy", ["retry", "skip"])
def test_chaos_driver_weaker_policies_hold_their_bounds(policy: str) -> None:
    chaos("--rounds", "8", "--tasks", "2", "--notify-policy", policy)


def test_chaos_driver_with_github() -> None:
    summary = chaos("--rounds", "12", "--tasks", "2", "--github")
    assert summary["killed"], summary
