"""Deterministic crash points for the fault-injection tests.

``GITLEDGER_FAULT=<point>`` makes the process SIGKILL itself when it reaches ``<point>``; with the
variable unset (production) :func:`point` is a dictionary lookup and nothing else. Points:

- ``before-claim``: reality was queried and found absent, the claim is not written yet
- ``after-claim``: the claim is recorded, the action has not started
- ``during-effect``: the action's process has started (the command is killed with us)
- ``after-effect``: the action finished successfully, ``done`` is not recorded yet
- ``during-done``: the ``done`` objects are written, the ref is not moved yet
"""

from __future__ import annotations

import os
import signal

POINTS = ("before-claim", "after-claim", "during-effect", "after-effect", "during-done")


def point(name: str) -> None:
    if os.environ.get("GITLEDGER_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
