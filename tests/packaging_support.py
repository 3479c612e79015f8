"""Helpers for the packaging tests: the distributions built once per session, throwaway virtualenvs.

These tests install packages from the package index (CI has it); every step is bounded in time.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testing.repos import ROOT

BUILD_TIMEOUT = 240
INSTALL_TIMEOUT = 300


def pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout on PYTHONPATH (conftest puts it there), pip kept quiet."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    env.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_PROGRESS_BAR": "off"})
    env.update(extra)
    return env


def run(
    argv: list[str], *, timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=clean_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    """stdout of a process that must have succeeded; its output in the assertion message otherwise."""
    output = f"{proc.stdout[-4000:]}{proc.stderr[-4000:]}"
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}\n{output}"
    return proc.stdout


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path  # built from the sdist, not from the checkout
    log: str  # what the build printed


def checkout_copy() -> Path:
    """The files of this checkout that git does not ignore (tracked or new), as they are on disk,
    copied to a folder of their own.

    Other tests run Python from the checkout meanwhile: the ``.pyc`` files they write (under a
    temporary name, then renamed) could vanish under a build walking the live tree ("No such file").
    """
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout  # fmt: skip
    tree = Path(tempfile.mkdtemp(prefix="gitledger-tree-")) / "gitledger"
    for raw in filter(None, listing.split(b"\0")):
        source = ROOT / os.fsdecode(raw)
        if source.is_file():  # not a file deleted in the working tree
            target = tree / os.fsdecode(raw)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return tree


@functools.cache
def dists() -> Dists:
    """``python -m build`` of this checkout (a copy of its files): the sdist, then the wheel built from
    that sdist."""
    out = Path(tempfile.mkdtemp(prefix="gitledger-dists-"))
    source = checkout_copy()
    proc = run([sys.executable, "-m", "build", "--outdir", str(out), str(source)], timeout=BUILD_TIMEOUT)
    ok(proc)
    [sdist] = out.glob("*.tar.gz")
    [wheel] = out.glob("*.whl")
    return Dists(sdist, wheel, proc.stdout + proc.stderr)


def make_venv(path: Path) -> Path:
    """A fresh virtualenv with pip; returns its bin directory."""
    ok(run([sys.executable, "-m", "venv", str(path)], timeout=120))
    return path / "bin"
