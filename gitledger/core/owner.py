"""Who holds a claim, and whether that owner is still alive.

An owner is identified by host name, boot id, process id, the process's start time and a random
session id. An owner on this host is dead at once when its pid is gone, is a zombie, or belongs to a
process started at another time (pid reuse) or in another boot. An owner on another host can only be
presumed dead when its lease has expired; a claim without a deadline is locked, never expired.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import Any


@cache
def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, or None when there is no such process.

    A zombie counts as gone: it has stopped running and only waits to be reaped.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    # the command name is in parentheses and may contain spaces; fields follow the last ')'
    rest = stat[stat.rfind(b")") + 2 :].split()
    if rest[0] in (b"Z", b"X"):
        return None
    return rest[19].decode()


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Owner:
    host: str
    boot: str
    pid: int
    start: str | None
    session: str

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        return cls(os.uname().nodename, boot_id(), pid, process_start(pid), os.urandom(8).hex())

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "boot": self.boot,
            "pid": self.pid,
            "start": self.start,
            "session": self.session,
        }

    @classmethod
    def from_json(cls, data: Any) -> Owner | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                str(data["host"]),
                str(data.get("boot") or ""),
                int(data["pid"]),
                data.get("start"),
                str(data.get("session") or ""),
            )
        except (KeyError, TypeError, ValueError):
            return None


def is_dead(owner: Owner, here: Owner) -> bool:
    """True when ``owner`` certainly no longer runs; False when it may still run (or runs elsewhere)."""
    if owner.host != here.host or owner.session == here.session:
        return False
    if owner.boot and here.boot and owner.boot != here.boot:
        return True
    if owner.start is not None:
        now = process_start(owner.pid)
        return now is None or (now != "" and now != owner.start)
    return not pid_exists(owner.pid)
