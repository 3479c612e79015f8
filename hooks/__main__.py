"""Run a shipped hook script: ``python -m gitledger._hookscripts commit-msg|pre-push [ARGS...]``.

This is the entry of the hooks in .pre-commit-hooks.yaml. The pre-commit framework installs gitledger
into a virtualenv of its own (``language: python``) and starts each hook with that environment's
``python`` first on PATH, where the sh scripts of this folder are not: this module finds the script in
the installed package and runs it with ``sh``, with the environment's ``bin`` first on PATH so that the
pre-push script's ``gitledger`` is the one installed next to it. Standard library only (no typer).
"""

from __future__ import annotations

import os
import sys
from importlib import resources

NAMES = ("commit-msg", "pre-push")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in NAMES:
        print(
            f"gitledger: usage: python -m gitledger._hookscripts {{{','.join(NAMES)}}} [ARGS...]",
            file=sys.stderr,
        )
        return 2
    script = resources.files(__package__ or "gitledger._hookscripts").joinpath(argv[0])
    bin_dir = os.path.dirname(sys.executable)
    os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", os.defpath)])
    with resources.as_file(script) as path:
        os.execvp("sh", ["sh", str(path), *argv[1:]])
    return 1  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
