"""The one adapter between gitledger and git.

Every git call goes through :class:`GitRepo`, which turns git failures into gitledger errors with a
message a user can act on. It also holds the repository's locks (the ledger lock, the key stripes, the
fold lock: ``flock`` files in the common git directory). Names other than object ids are read through
one persistent ``git cat-file --batch`` process, and :meth:`GitRepo.update_refs` moves refs through
``git update-ref --stdin`` transactions with expected old values (compare-and-swap). The ledger itself
is read and written in-process by the store (:mod:`gitledger.git.objects`, :mod:`gitledger.git.store`):
objects from packs and loose files, new objects as one pack per fold, and its refs moved by a fresh
``update-ref`` process each time (:mod:`gitledger.git.refupdate`); see docs/design.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from gitledger.core.errors import DamagedObjectError, GitError, UsageError, cannot_open, git_message

LOCK_TIMEOUT = 60.0
# The longest wait GITLEDGER_LOCK_TIMEOUT may ask for: a day. A holder stopped for longer is not
# coming back by itself, and every platform's alarm timer (setitimer) takes a day.
MAX_LOCK_TIMEOUT = 86400.0
LEDGER_LOCK = "gitledger.lock"
FOLD_LOCK = "gitledger.fold.lock"  # one fold at a time (it runs beside the journal's appenders)
KEY_LOCKS = "gitledger.locks"  # a directory of stripe lock files (see GitRepo.append_lock)
KEY_STRIPES = 64


_pid = os.getpid()  # asked on every lock taken: os.getpid() is a system call


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


def current_pid() -> int:
    """This process's id (kept up to date across ``os.fork``) without a system call."""
    return _pid


def git_env() -> dict[str, str]:
    """The environment for git children: C locale for parseable messages, no prompts.

    :class:`GitRepo` names its repository with ``--git-dir``/``-C``, so the caller's GIT_* variables are
    passed through; code that runs inside a git hook, where git exports GIT_DIR, GIT_INDEX_FILE and
    friends, uses :func:`gitledger.git.hooks.no_git_env` instead.
    """
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


class CatFile:
    """A persistent ``git cat-file --batch`` reader."""

    def __init__(self, git_dir: Path) -> None:
        self._proc = subprocess.Popen(
            ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=git_env(),
            process_group=0,  # not in the terminal's group: Ctrl-C is for gitledger, which then still writes
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in: IO[bytes] = self._proc.stdin
        self._out: IO[bytes] = self._proc.stdout

    def read(self, name: str) -> tuple[str, str, bytes] | None:
        """(oid, type, content) of ``name`` (an oid, a ref or ``rev:path``), or None if missing."""
        if "\n" in name:
            raise UsageError(f"object name {name!r} contains a newline")
        try:
            self._in.write(name.encode() + b"\n")
            self._in.flush()
            header = self._out.readline()
        except (BrokenPipeError, OSError) as exc:
            raise GitError(f"git cat-file stopped unexpectedly: {exc}") from exc
        if not header:
            raise GitError("git cat-file stopped unexpectedly; is the repository readable?")
        parts = header.split()
        if len(parts) != 3:  # "<name> missing" / "<name> ambiguous"
            return None
        oid, kind, size = parts[0].decode(), parts[1].decode(), int(parts[2])
        data = self._out.read(size + 1)
        if len(data) != size + 1:
            # git found the object but could not inflate all of it (a torn or overwritten object file)
            # and stopped: never hand back a partial object as if it were the whole one
            raise DamagedObjectError(
                f"object {oid} is damaged (git could not read all of it); run 'git fsck'"
            )
        return oid, kind, data[:size]

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._in.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        with contextlib.suppress(OSError):
            self._out.close()


_CAS_FAILURES = ("cannot lock ref", "but expected", "reference already exists")


class RefUpdater:
    """A persistent ``git update-ref --stdin`` running one transaction at a time.

    Each call is ``start``, the updates (with expected old values), ``prepare``, ``commit``; git answers
    ``<verb>: ok`` for each. A transaction git refuses (a ref moved: the compare-and-swap lost) makes
    git exit; the next call starts a new process. Spawning a process per transition cost ~3.5 ms, a
    transaction through the running process ~0.15 ms (see benchmarks/README.md).
    """

    def __init__(self, git_dir: Path) -> None:
        self._git_dir = git_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._err: IO[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        import tempfile

        self._err = tempfile.TemporaryFile()  # noqa: SIM115  (open while the process runs)
        self._proc = subprocess.Popen(
            ["git", f"--git-dir={self._git_dir}", "update-ref", "--stdin"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=git_env(),
            process_group=0,  # as CatFile: the terminal's signals must not stop a transaction
        )
        return self._proc

    def apply(self, lines: str) -> bool:
        """Run one transaction; False when git refused it because a ref was not at its old value."""
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        assert proc.stdin is not None and proc.stdout is not None
        answers = []
        try:
            proc.stdin.write(f"start\n{lines}prepare\ncommit\n".encode())
            proc.stdin.flush()
            for verb in ("start", "prepare", "commit"):
                line = proc.stdout.readline()
                answers.append(line)
                if line != f"{verb}: ok\n".encode():
                    break
        except (BrokenPipeError, OSError):
            pass
        if answers == [b"start: ok\n", b"prepare: ok\n", b"commit: ok\n"]:
            return True
        err = self._stop()
        if any(marker in err for marker in _CAS_FAILURES):
            return False
        lines_err = [line for line in err.splitlines() if line.strip()]
        detail = lines_err[-1].removeprefix("fatal: ").removeprefix("error: ") if lines_err else "no message"
        raise GitError(f"git update-ref failed: {detail}")

    def _stop(self) -> str:
        """End the process (it has died or must not be reused); its error output."""
        proc, err_file = self._proc, self._err
        self._proc = self._err = None
        if proc is None:
            return ""
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):
            assert proc.stdout is not None
            proc.stdout.close()
        if err_file is None:
            return ""
        err_file.seek(0)
        text = err_file.read().decode(errors="replace")
        err_file.close()
        return text

    def close(self) -> None:
        self._stop()


_PATHS = (("--git-dir",), ("--git-common-dir",), ("--git-path", "objects"))  # discover() asks for these


def _rev_parse(start: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    argv = ["git", "rev-parse", *args]
    return subprocess.run(argv, cwd=start, capture_output=True, env=git_env(), check=False)


class GitRepo:
    """A git repository (normal, worktree or bare) as gitledger uses it."""

    def __init__(
        self,
        git_dir: Path,
        common_dir: Path,
        objects_dir: Path,
        worktree: Path | None,
        object_format: str,
    ) -> None:
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.objects_dir = objects_dir
        self.worktree = worktree
        self.object_format = object_format
        self.zero_oid = "0" * (64 if object_format == "sha256" else 40)
        self._cat: CatFile | None = None
        self._refs: RefUpdater | None = None
        self._locks: dict[str, tuple[int, int, threading.Lock]] = {}  # name -> (fd, pid, in-process lock)
        self._holding = threading.local()  # how many of its locks this thread holds (.count)
        self._remote_urls: dict[str, str | None] = {}

    @classmethod
    def init_bare(cls, path: str | os.PathLike[str]) -> GitRepo:
        """Create an empty bare repository at ``path`` and open it."""
        proc = subprocess.run(
            ["git", "init", "-q", "--bare", os.fspath(path)], capture_output=True, env=git_env()
        )
        if proc.returncode != 0:
            raise GitError(f"git init failed: {git_message(proc.stderr)}")
        return cls.discover(path)

    @classmethod
    def discover(cls, path: str | os.PathLike[str] | None = None) -> GitRepo:
        try:
            start = Path(path or ".").resolve()
            if not start.is_dir():
                raise UsageError(f"{start} is not a directory; pass --repo with a git repository's path")
        except (OSError, ValueError) as exc:  # a name too long, or a NUL (from an agent hook's JSON)
            why = getattr(exc, "strerror", None) or exc
            raise UsageError(f"cannot open {str(path)!r}: {why}; pass --repo with a repository") from exc
        asked = ("--is-bare-repository", "--show-object-format", "--show-cdup", "--path-format=absolute")
        proc = _rev_parse(start, *asked, *sum(_PATHS, ()))
        if proc.returncode != 0:
            raise cannot_open(start, proc.stderr or f"exit {proc.returncode}".encode())
        # in argument order; no --show-cdup line outside a work tree (a bare repository), a newline in
        # a path makes more lines than three; a path is read in whatever bytes it has (os.fsdecode)
        bare, object_format, *rest = os.fsdecode(proc.stdout).split("\n")[:-1]
        cdup = rest.pop(0) if rest and not rest[0].startswith("/") else ""
        if len(rest) != 3:
            rest = [os.fsdecode(_rev_parse(start, asked[-1], *q).stdout[:-1]) for q in _PATHS]
        git_dir, common_dir, objects_dir = rest
        worktree = None if bare == "true" else (start / cdup).resolve()
        return cls(Path(git_dir), Path(common_dir), Path(objects_dir), worktree, object_format)

    # -- running git -------------------------------------------------------------------------------

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run git on this repository; ``env`` adds variables to the environment of :func:`git_env`."""
        try:
            proc = subprocess.run(
                self._argv(args),
                input=input,
                capture_output=True,
                cwd=cwd or self.worktree or self.git_dir,
                env={**git_env(), **env} if env else git_env(),
                check=False,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"git {args[0]} did not answer within {timeout:.0f} s") from exc
        if check and proc.returncode != 0:
            raise GitError(f"git {' '.join(args[:2])} failed: {git_message(proc.stderr)}")
        return proc

    def _argv(self, args: Sequence[str]) -> list[str]:
        """git's command line for ``args`` on this repository (and its work tree)."""
        tree = [f"--work-tree={self.worktree}"] if self.worktree is not None else []
        return ["git", f"--git-dir={self.git_dir}", *tree, *args]

    def start(self, *args: str) -> subprocess.Popen[bytes] | None:
        """Start git on this repository without waiting for it (no input, output discarded, in a
        session of its own: Ctrl-C in the terminal is not for it); None when git cannot be started."""
        try:
            return subprocess.Popen(
                self._argv(args),
                cwd=self.worktree or self.git_dir,
                env=git_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            return None

    def out(self, *args: str, check: bool = True) -> str:
        return self.run(*args, check=check).stdout.decode().strip()

    def remote_url(self, name: str = "origin") -> str | None:
        """The URL of remote ``name`` as git resolves it (``insteadOf`` applied), None when there is no
        such remote; asked once per repository object, and read from the configuration files without
        starting git when that gives git's answer exactly (:mod:`gitledger.git.gitconfig`)."""
        if name not in self._remote_urls:
            from gitledger.git import gitconfig

            found = gitconfig.remote_url(name, self.git_dir, self.common_dir)  # no process when exact
            if found is gitconfig.UNKNOWN:
                proc = self.run("remote", "get-url", "--", name, check=False)
                found = proc.stdout.decode(errors="replace").strip() if proc.returncode == 0 else ""
            self._remote_urls[name] = str(found) if found else None
        return self._remote_urls[name]

    # -- objects -----------------------------------------------------------------------------------

    @property
    def cat(self) -> CatFile:
        if self._cat is None:
            self._cat = CatFile(self.git_dir)
        return self._cat

    def read(self, name: str) -> tuple[str, str, bytes] | None:
        try:
            return self.cat.read(name)
        except GitError:
            self.close()  # the reader stopped; the next read starts a new one
            raise

    # -- refs --------------------------------------------------------------------------------------

    def update_refs(self, updates: Sequence[tuple[str, str, str | None]]) -> bool:
        """Move refs atomically: each (ref, new, expected old or None for "must not exist").

        Returns False when a ref was not at its expected value (someone else wrote first). A ref
        made symbolic by hand is replaced, never written through (``no-deref``).
        """
        lines = []
        for ref, new, old in updates:
            lines.append(f"option no-deref\nupdate {ref} {new} {old or self.zero_oid}\n")
        if self._refs is None:
            self._refs = RefUpdater(self.git_dir)
        return self._refs.apply("".join(lines))

    def resolve(self, rev: str) -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        if proc.returncode != 0:
            return None
        return proc.stdout.decode().strip() or None

    @contextlib.contextmanager
    def lock(
        self, name: str = LEDGER_LOCK, timeout: float | None = None, *, fold: bool = True
    ) -> Iterator[None]:
        """A lock of this repository's gitledger writers (worktrees too), held exclusively: by default
        the ledger lock, which excludes every journal appender (a fold replacing the journal, sync).

        Every lock is an ``flock``, so the kernel releases it when its holder dies, whatever the
        signal; a holder that is alive but stopped (SIGSTOP, Ctrl-Z) is waited for at most ``timeout``
        seconds (``GITLEDGER_LOCK_TIMEOUT``, default 60) in all, then this fails naming the process
        that holds it.

        The ledger lock is ``gitledger.lock`` (one exclusive holder at a time) and then the lock of
        every key stripe, in order: an appender holds only its key's stripe (:meth:`append_lock`), so
        holding them all excludes every appender, and an append takes one lock, not two. It is taken
        after the fold lock (:data:`FOLD_LOCK`, one folder at a time), unless ``fold=False`` (a folder
        that holds it already takes the ledger lock to empty the journal).
        """
        timeout = lock_timeout(timeout)
        if name == LEDGER_LOCK and fold:
            with self.lock(FOLD_LOCK, timeout), self.lock(name, timeout, fold=False):
                yield
            return
        deadline = time.monotonic() + timeout
        held = [self._acquire(name, timeout)]
        try:
            if name == LEDGER_LOCK:
                for stripe in _STRIPES:  # in order: two exclusive holders never wait for each other's
                    held.append(self._acquire(stripe, max(0.0, deadline - time.monotonic()), timeout))
            self._count_held(1)
            try:
                yield
            finally:
                self._count_held(-1)
        finally:
            for one in reversed(held):
                _release(one)

    def _count_held(self, change: int) -> None:
        self._holding.count = getattr(self._holding, "count", 0) + change

    def holds_a_lock(self) -> bool:
        """Whether this thread holds one of this repository's locks (it must not wait for another)."""
        return getattr(self._holding, "count", 0) > 0

    def _acquire(
        self, name: str, timeout: float | None, reported: float | None = None
    ) -> tuple[int, threading.Lock]:
        """Take the lock ``name`` exclusively; (descriptor, in-process lock) to hand to
        :func:`_release`. ``timeout``: None for :func:`lock_timeout`, read only when a wait is needed
        (an environment lookup, twice per append otherwise); ``reported``: the wait to name when it
        runs out, if not ``timeout`` (a part of a longer wait)."""
        fd, _, in_process = self._lock_fd(name)
        if not in_process.acquire(blocking=False) and not in_process.acquire(timeout=lock_timeout(timeout)):
            timeout = lock_timeout(reported if reported is not None else timeout)
            raise GitError(f"the ledger lock {self.common_dir / name} {held_for(timeout)} by another thread")
        try:
            if not take_flock(fd, fcntl.LOCK_EX, timeout):
                timeout = lock_timeout(reported if reported is not None else timeout)
                raise GitError(
                    f"the ledger lock {self.common_dir / name} {held_for(timeout)} by "
                    f"{lock_holders(fd)}; if that process is stopped (Ctrl-Z, SIGSTOP), resume or end "
                    "it, then try again (GITLEDGER_LOCK_TIMEOUT sets the wait)"
                )
        except BaseException:
            in_process.release()
            raise
        return fd, in_process

    def append_lock(self, key: str) -> contextlib.AbstractContextManager[None]:
        """What every journal append takes: the lock of ``key``'s stripe (one of :data:`KEY_STRIPES`,
        by a hash of the key), exclusively. Decisions on one key are serialised, other keys' go on; the
        ledger lock (:meth:`lock`) takes every stripe. A small class rather than a generator-based
        context manager: a generator costs ~10 µs more, twice per fresh step."""
        return _AppendLock(self, key)

    @contextlib.contextmanager
    def try_lock(self, name: str) -> Iterator[bool]:
        """Take the lock ``name`` exclusively if nobody holds it: yields whether it was taken."""
        fd, _, in_process = self._lock_fd(name)
        if not in_process.acquire(blocking=False):
            yield False
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            in_process.release()

    def _lock_fd(self, name: str) -> tuple[int, int, threading.Lock]:
        held = self._locks.get(name)
        if held is None or held[1] != _pid:  # (a forked child must not share the parent's)
            path = self.common_dir / name
            try:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                except FileNotFoundError:
                    path.parent.mkdir(exist_ok=True)
                    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except NotADirectoryError as exc:
                raise GitError(
                    f"{path.parent} is not a directory, but gitledger keeps its lock files in it; move it "
                    f"away (e.g. mv {path.parent} {path.parent}.old) and try again"
                ) from exc
            except OSError as exc:
                raise GitError(
                    f"cannot open the lock file {path}: {exc.strerror}; check that {path.parent} is writable"
                ) from exc
            held = self._locks[name] = (fd, _pid, threading.Lock())
        return held

    def close(self) -> None:
        for fd, pid, _ in self._locks.values():
            if pid == os.getpid():
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._locks.clear()
        if self._cat is not None:
            self._cat.close()
            self._cat = None
        if self._refs is not None:
            self._refs.close()
            self._refs = None

    def __enter__(self) -> GitRepo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_tree(data: bytes, oid_len: int) -> list[tuple[str, str, str]]:
    """Entries (mode, name, oid) of a raw tree object."""
    entries = []
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        mode = data[pos:space].decode()
        name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
        oid = data[nul + 1 : nul + 1 + oid_len].hex()
        entries.append((mode, name, oid))
        pos = nul + 1 + oid_len
    return entries


def format_tree(entries: dict[str, tuple[str, str]]) -> bytes:
    """A raw tree object from {name: (mode, oid)}, in git's order (trees sort as 'name/')."""

    def order(name: str) -> bytes:
        raw = name.encode("utf-8", "surrogateescape")
        return raw + b"/" if entries[name][0] == "40000" else raw

    out = bytearray()
    for name in sorted(entries, key=order):
        mode, oid = entries[name]
        out += f"{mode} ".encode() + name.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(oid)
    return bytes(out)


class _LockTimeout(Exception):
    pass


_STRIPES = [f"{KEY_LOCKS}/{n:02x}" for n in range(KEY_STRIPES)]


def _stripe(key: str) -> str:
    return _STRIPES[zlib.crc32(key.encode("utf-8", "surrogateescape")) % KEY_STRIPES]


def _release(held: tuple[int, threading.Lock]) -> None:
    fd, in_process = held
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        in_process.release()


class _AppendLock:
    """:meth:`GitRepo.append_lock`: the key's stripe, exclusively."""

    __slots__ = ("_held", "_key", "_repo")

    def __init__(self, repo: GitRepo, key: str) -> None:
        self._repo = repo
        self._key = key
        self._held: tuple[int, threading.Lock] | None = None

    def __enter__(self) -> None:
        self._held = self._repo._acquire(_stripe(self._key), None)
        self._repo._count_held(1)

    def __exit__(self, *exc: object) -> None:
        held, self._held = self._held, None
        assert held is not None
        self._repo._count_held(-1)
        _release(held)


def lock_holders(fd: int) -> str:
    """Who holds a lock on the file open at ``fd``: "process N" ("processes N, M" if the table lists
    more than one), from the kernel's table of locks (``/proc/locks``, Linux), read only when a wait
    timed out; "another process" where that table is not there or does not name the file (a file
    system whose ``stat`` reports another device than the table). Nothing is written into lock files
    for it: a holder's id written at every lock taken cost a system call or two per append."""
    try:
        st = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            table = fh.read()
    except OSError:
        return "another process"
    file_id = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids: list[str] = []
    for line in table.splitlines():
        fields = line.split()  # "1: FLOCK ADVISORY WRITE <pid> <dev:ino> 0 EOF"; waiters have "->"
        if len(fields) > 5 and fields[1] != "->" and fields[5] == file_id and fields[4] not in pids:
            pids.append(fields[4])
    if not pids:
        return "another process"
    return ("processes " if len(pids) > 1 else "process ") + ", ".join(pids)


def lock_timeout(timeout: float | None) -> float:
    """``timeout``, or when None the wait ``GITLEDGER_LOCK_TIMEOUT`` sets (default :data:`LOCK_TIMEOUT`):
    a number of seconds from 0 (do not wait: one try) to :data:`MAX_LOCK_TIMEOUT`; any other value is
    a usage error, not a silent default."""
    if timeout is not None:
        return timeout
    text = os.environ.get("GITLEDGER_LOCK_TIMEOUT", "").strip()
    if not text:
        return LOCK_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_LOCK_TIMEOUT:  # (NaN fails every comparison)
        raise UsageError(
            f"GITLEDGER_LOCK_TIMEOUT={text!r} is not a number of seconds from 0 to {MAX_LOCK_TIMEOUT:g}; "
            "set it to one (0: do not wait for a held lock) or unset it for the default, "
            f"{LOCK_TIMEOUT:g}"
        )
    return seconds


def held_for(timeout: float) -> str:
    """How long a lock that was not taken has been held, as a message says it."""
    return f"has been held for {timeout:g} s" if timeout > 0 else "is held"


def take_flock(fd: int, mode: int, timeout: float | None = None) -> bool:
    """Take the ``flock`` at once when it is free, else wait for it at most ``timeout`` seconds
    (:func:`lock_timeout` when None, read only then); False when the time ran out."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return wait_for_flock(fd, lock_timeout(timeout), mode)
    return True


def wait_for_flock(fd: int, timeout: float, mode: int | None = None) -> bool:
    """Block on the lock for at most ``timeout`` seconds; False when the time ran out.

    In the main thread a blocking ``flock`` is woken by a one-shot ``SIGALRM`` (the kernel hands the
    lock over the moment it is free: no polling delay between writers); other threads poll.
    """
    import signal

    if mode is None:
        mode = fcntl.LOCK_EX
    if timeout <= 0:  # do not wait: one try
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    if threading.current_thread() is threading.main_thread() and signal.getitimer(signal.ITIMER_REAL)[0] == 0:
        waiting = [True]

        def expire(signum: int, frame: object) -> None:
            if waiting[0]:  # an alarm that rings once the wait is over must not raise where it lands
                raise _LockTimeout

        previous = signal.signal(signal.SIGALRM, expire)
        try:
            try:  # the alarm set here may ring at once (a tiny timeout): inside this try, never before it
                signal.setitimer(signal.ITIMER_REAL, max(timeout, 1e-6))  # (0 would disarm it)
                fcntl.flock(fd, mode)
                waiting[0] = False
                return True
            except _LockTimeout:
                pass
            finally:
                waiting[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
            try:  # the alarm may have rung just after flock returned: then this descriptor holds it
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False
        finally:
            signal.signal(signal.SIGALRM, previous)
    deadline = time.monotonic() + timeout
    delay = 0.0001
    while True:
        time.sleep(delay)
        delay = min(delay * 2, 0.002)
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
