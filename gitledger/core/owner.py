"""Who holds a claim, and whether that owner is still alive.

An owner is identified by host name, machine, boot id, pid namespace, process id, the process's start
time and a random session id. Two owners are on the **same machine** only when the machine id (a
hash of ``/etc/machine-id``), the boot id and the pid namespace all match and are known: then the
pids they record are pids of one process table, and an owner is dead at once when its pid is gone,
is a zombie, or belongs to a process started at another time (pid reuse). The host name decides
nothing: two VMs or containers often share one (``localhost``, a CI image's default). An owner on
another machine, or one whose identity is incomplete (events written before these fields existed, a
platform without them), can only be presumed dead when its lease has expired; a claim without a
deadline is locked, never expired.

The guarded command carries its claim's id in ``GITLEDGER_CLAIM``; :func:`claims_running` finds
processes that still carry it, so a command that outlived its owner (a grandchild of a killed
gitledger) keeps the claim held until it ends.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from functools import cache
from typing import Any

MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
CLAIM_ENV = "GITLEDGER_CLAIM"


@cache
def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


@cache
def machine_id() -> str:
    """A hash of this machine's id (``/etc/machine-id``), or "" when there is none.

    The id itself is confidential (machine-id(5): hash it with an application key before sharing);
    the ledger travels to remotes, so only the hash is recorded. ``GITLEDGER_MACHINE_ID`` replaces the
    file's value (containers without a machine id, tests simulating machines): it can only make two
    owners look *more* different, since boot id and pid namespace must match as well.
    """
    raw = os.environ.get("GITLEDGER_MACHINE_ID", "").strip()
    if not raw:
        for path in MACHINE_ID_FILES:
            try:
                with open(path) as fh:
                    raw = fh.read().strip()
            except (OSError, UnicodeDecodeError):
                continue
            if raw:
                break
    if not raw:
        return ""
    return hashlib.sha256(b"gitledger machine\0" + raw.encode("utf-8", "surrogateescape")).hexdigest()[:32]


@cache
def pid_namespace() -> str:
    """This process's pid namespace (``pid:[inode]``), "" when it cannot be read (not Linux)."""
    if not sys.platform.startswith("linux"):
        return ""
    try:
        return os.readlink("/proc/self/ns/pid")
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


def claims_running() -> set[str]:
    """The claim ids (``GITLEDGER_CLAIM``) in the environment of live processes this user can read.

    One pass over ``/proc``; only needed when a claim's owner on this machine is found dead. Processes
    that cleared their environment, or belong to users whose environment cannot be read, are not seen.
    """
    found: set[str] = set()
    marker = CLAIM_ENV.encode() + b"="
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if marker not in data:
            continue
        if process_start(int(pid)) is None:  # a zombie keeps its environ readable: it no longer runs
            continue
        for item in data.split(b"\0"):
            if item.startswith(marker):
                found.add(item[len(marker) :].decode(errors="replace"))
    return found


@dataclass(frozen=True)
class Owner:
    host: str
    boot: str
    pid: int
    start: str | None
    session: str
    machine: str = ""
    pidns: str = ""

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        return cls(
            os.uname().nodename,
            boot_id(),
            pid,
            process_start(pid),
            os.urandom(8).hex(),
            machine_id(),
            pid_namespace(),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "machine": self.machine,
            "boot": self.boot,
            "pidns": self.pidns,
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
                str(data.get("machine") or ""),
                str(data.get("pidns") or ""),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def same_machine(self, other: Owner) -> bool:
        """Do both owners' pids live in one process table? Only when machine, boot and pid namespace
        are all known and equal; anything less (old events, missing ids) counts as another machine."""
        mine = (self.machine, self.boot, self.pidns)
        return all(mine) and mine == (other.machine, other.boot, other.pidns)


def is_dead(owner: Owner, here: Owner) -> bool:
    """True when ``owner`` certainly no longer runs; False when it may still run (or runs elsewhere)."""
    if owner.session == here.session or not owner.same_machine(here):
        return False
    if owner.start is not None:
        now = process_start(owner.pid)
        return now is None or (now != "" and now != owner.start)
    return not pid_exists(owner.pid)
