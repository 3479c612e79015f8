"""The AI agents installed on this machine, as far as gitledger needs to know them."""

from __future__ import annotations

import shutil
import subprocess


def claude_version_text() -> str | None:
    """What ``claude --version`` prints, or None when Claude Code is not on PATH or does not answer."""
    program = shutil.which("claude")
    if program is None:
        return None
    try:
        proc = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


__all__ = ["claude_version_text"]
