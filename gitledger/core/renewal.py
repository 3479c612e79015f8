"""Lease renewal: a heartbeat thread that keeps a claim's lease ahead of the clock while its effect runs.

Owners on other machines (see :mod:`gitledger.core.owner`) know a claim is held only by its lease. A step
that runs longer than its lease would be taken over (and made twice), so while the effect runs, its
owner appends a heartbeat at a fraction of the lease (:data:`FRACTION`) that moves the lease on. A
heartbeat that finds the claim closed by someone else (another owner took over after seeing the lease
run out, or settled the entry) stops the renewal and is reported: the caller's outcome still gets
recorded (outcomes are facts), and a second ``created`` is visible as a duplicate.

Standard library only; what a heartbeat writes is the caller's ``renew`` function. One thread per
process runs the beats of all its claims (:class:`_Heartbeats`).
"""

from __future__ import annotations

import heapq
import math
import os
import signal
import threading
import time
from collections.abc import Callable

from gitledger.core.errors import GitledgerError

FRACTION = 1 / 3  # renew after a third of the lease: two heartbeats may fail before the lease runs out
MIN_INTERVAL = 0.1
_BLOCKED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD}


class ClaimLostError(GitledgerError):
    """Our claim was closed by another owner while the effect ran; renewing it stopped."""


def interval_for(lease: float) -> float:
    return max(lease * FRACTION, MIN_INTERVAL)


class _Heartbeats:
    """The one heartbeat thread of a process: it runs every :class:`Renewal`'s beats when they are due.

    A thread per claim cost a thread start and join per step (about half of a fresh step's CPU with
    many steps in one process); this thread starts with the first renewal and then waits, idle, for
    the next. A child made by ``fork`` has no such thread and starts its own. A beat that takes long
    (a remote claim pushed over a slow network) delays the beats of other claims of the same process
    by as much: far below a third of any lease.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """Empty, without a thread (also in a forked child: the lock may have been held at the fork,
        and the parent's claims are not the child's to renew)."""
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, Renewal]] = []
        self._count = 0
        self._stopped = 0  # stopped renewals possibly still in _due
        self._wake_at = math.inf  # when the thread wakes next on its own (inf: only when notified)
        self.wakeups = 0  # times the thread woke up (it should not for every claim)
        self._pid = 0  # the process whose thread runs
        self._thread: threading.Thread | None = None

    def add(self, renewal: Renewal) -> None:
        with self._cond:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="gitledger-renew", daemon=True)
                self._thread.start()
            self._schedule(renewal)

    def _schedule(self, renewal: Renewal) -> None:
        """Queue the next beat; the thread is woken only when that beat is due before it wakes anyway
        (each wake-up is a thread switch: one per claim cost as much CPU as the step itself with more
        busy processes than cores)."""
        self._count += 1
        due = time.monotonic() + renewal.interval
        heapq.heappush(self._due, (due, self._count, renewal))
        if due < self._wake_at:
            self._cond.notify_all()

    def _run(self) -> None:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    if self._due and self._due[0][0] <= now:
                        renewal = heapq.heappop(self._due)[2]
                        if renewal.stopped:
                            self._stopped = max(0, self._stopped - 1)
                            continue
                        renewal.beating = True
                        self._wake_at = -math.inf  # beating: it looks at the queue again after the beat
                        break
                    # a stopped claim stays queued until it is due, and the thread sleeps until then:
                    # the next claims' beats are due later, so they do not wake it (see _schedule).
                    # Dropping it earlier left an empty queue between two steps, and then every
                    # claim woke the thread (a thread switch per step in a loop of short steps)
                    self._wake_at = self._due[0][0] if self._due else math.inf
                    self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)
                    self.wakeups += 1
            again = renewal.beat()
            with self._cond:
                renewal.beating = False
                if again and not renewal.stopped:
                    self._schedule(renewal)
                self._cond.notify_all()

    def wait_idle(self, renewal: Renewal) -> None:
        """Stop ``renewal`` and wait for a beat of it in flight (not when called from that beat).

        Its queued beat is not removed: the thread drops it when it comes up (no wake-up, see
        :meth:`_schedule`); when stopped beats make up most of the queue (a process running many short
        steps under long leases), the queue is rebuilt without them."""
        with self._cond:
            if not renewal.stopped:
                renewal.stopped = True
                self._stopped += renewal.started
            if self._stopped > 64 and self._stopped * 2 > len(self._due):
                self._due = [item for item in self._due if not item[2].stopped]
                heapq.heapify(self._due)
                self._stopped = 0
            if threading.current_thread() is not self._thread:
                while renewal.beating:
                    self._cond.wait()


_HEARTBEATS = _Heartbeats()
os.register_at_fork(after_in_child=_HEARTBEATS._reset)


class Renewal:
    """Calls ``renew`` every ``interval`` seconds, on the process's heartbeat thread, from :meth:`start`
    to :meth:`stop`.

    ``renew`` returns a warning or None, and raises :class:`ClaimLostError` when the claim is no longer
    ours (the beats then end). Other errors become warnings and the heartbeats go on: a missed one
    only brings the deadline others see closer. The thread blocks the signals the main thread waits
    for, so Ctrl-C and SIGTERM always reach the main thread.
    """

    def __init__(self, renew: Callable[[], str | None], interval: float) -> None:
        self._renew = renew
        self.interval = interval
        self.warnings: list[str] = []
        self.lost = False
        self.beats = 0
        self.started = False
        self.stopped = False  # guarded by the heartbeat thread's condition
        self.beating = False

    def start(self) -> None:
        """Start the heartbeats (once; a stopped renewal stays stopped)."""
        if self.started or self.stopped:
            return
        self.started = True
        _HEARTBEATS.add(self)

    def beat(self) -> bool:
        """One heartbeat; False when the claim is lost (no more beats)."""
        try:
            warning = self._renew()
        except ClaimLostError as exc:
            self.lost = True
            self._warn(exc.message)
            return False
        except Exception as exc:  # a heartbeat must never end the run: say what failed
            warning = f"a heartbeat of the claim failed ({type(exc).__name__}: {exc})"
        self.beats += 1
        if warning:
            self._warn(warning)
        return True

    def _warn(self, warning: str) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)

    def stop(self) -> list[str]:
        """Stop the heartbeats and wait for one in flight; the warnings they gave."""
        _HEARTBEATS.wait_idle(self)
        return list(self.warnings)
