"""Lease renewal: a heartbeat thread that keeps a claim's lease ahead of the clock while its effect runs.

Owners on other machines (see :mod:`gitledger.core.owner`) know a claim is held only by its lease. A step
that runs longer than its lease would be taken over (and made twice), so while the effect runs, its
owner appends a heartbeat at a fraction of the lease (:data:`FRACTION`) that moves the lease on. A
heartbeat that finds the claim closed by someone else (another owner took over after seeing the lease
run out, or settled the entry) stops the renewal and is reported: the caller's outcome still gets
recorded (outcomes are facts), and a second ``created`` is visible as a duplicate.

Standard library only; what a heartbeat writes is the caller's ``renew`` function.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from gitledger.core.errors import GitledgerError

FRACTION = 1 / 3  # renew after a third of the lease: two heartbeats may fail before the lease runs out
MIN_INTERVAL = 0.1
_BLOCKED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD}


class ClaimLostError(GitledgerError):
    """Our claim was closed by another owner while the effect ran; renewing it stopped."""


def interval_for(lease: float) -> float:
    return max(lease * FRACTION, MIN_INTERVAL)


class Renewal:
    """Calls ``renew`` every ``interval`` seconds on a daemon thread from :meth:`start` to :meth:`stop`.

    ``renew`` returns a warning or None, and raises :class:`ClaimLostError` when the claim is no longer
    ours (the thread then ends). Other errors become warnings and the heartbeats go on: a missed one
    only brings the deadline others see closer. The thread blocks the signals the main thread waits
    for, so Ctrl-C and SIGTERM always reach the main thread.
    """

    def __init__(
        self, renew: Callable[[], str | None], interval: float, name: str = "gitledger-renew"
    ) -> None:
        self._renew = renew
        self.interval = interval
        self.name = name
        self.warnings: list[str] = []
        self.lost = False
        self.beats = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the heartbeats (once; a stopped renewal stays stopped)."""
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
        while not self._stop.wait(self.interval):
            try:
                warning = self._renew()
            except ClaimLostError as exc:
                self.lost = True
                self._warn(exc.message)
                return
            except Exception as exc:  # a heartbeat must never end the run: say what failed
                warning = f"a heartbeat of the claim failed ({type(exc).__name__}: {exc})"
            self.beats += 1
            if warning:
                self._warn(warning)

    def _warn(self, warning: str) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)

    def stop(self) -> list[str]:
        """Stop the heartbeats and wait for one in flight; the warnings they gave."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        return list(self.warnings)
