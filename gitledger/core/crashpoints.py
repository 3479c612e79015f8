"""Deterministic crash points for the fault-injection tests.

``GITLEDGER_FAULT=<point>`` makes the process SIGKILL itself when it reaches ``<point>``. The variable
is read once, when gitledger is imported (the tests set it in a process's environment); unset
(production), :func:`point` compares with None and nothing else. Points:

- ``before-claim``: reality was queried and found absent, the claim is not written yet
- ``after-claim``: the claim is recorded, the action has not started
- ``fork-window``: the command's process exists but has not bound itself to us yet (no death signal):
  the child kills gitledger (SIGKILL), then goes on; it must notice that nobody waits for it
- ``during-effect``: the action's process has started (the command is killed with us)
- ``after-effect``: the action finished successfully, ``done`` is not recorded yet
- ``during-done``: the ``done`` event is decided, not yet written to the journal

Storage points (the git store's journal and fold; ``STORAGE_POINTS``):

- ``journal-torn``: half of an event's journal line is written (a torn tail)
- ``fold-objects``: a fold wrote its pack (kept), no ref is moved yet
- ``fold-intents``: a fold moved the intents ref, not the notes ref
- ``fold-refs``: a fold moved both refs, the journal is not emptied yet
- ``fold-rotate``: a fold wrote the journal's replacement (what was appended while it ran), not
  renamed yet
- ``fold-marked``: a fold also wrote the line that tells readers the journal is replaced, not renamed
  yet
- ``journal-retaken-rotate``, ``journal-retaken-marked``: the same two moments of a repair that takes
  back records found behind zeros (not in ``STORAGE_POINTS``: a step never reaches them; tested in
  ``tests/test_journal.py``)
"""

from __future__ import annotations

import os
import signal

POINTS = ("before-claim", "after-claim", "fork-window", "during-effect", "after-effect", "during-done")
STORAGE_POINTS = ("journal-torn", "fold-objects", "fold-intents", "fold-refs", "fold-rotate", "fold-marked")


ARMED = os.environ.get("GITLEDGER_FAULT")  # the point this process dies at, if any


def point(name: str) -> None:
    if name == ARMED:
        os.kill(os.getpid(), signal.SIGKILL)


def kill_parent(parent: int) -> None:  # pragma: no cover - runs in a forked child
    """``fork-window``: SIGKILL ``parent`` from its child and wait (bounded) until the child is orphaned."""
    import time

    os.kill(parent, signal.SIGKILL)
    for _ in range(5000):
        if os.getppid() != parent:
            return
        time.sleep(0.001)
