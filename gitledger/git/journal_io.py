"""The journal's file operations (:mod:`gitledger.git.journal`): reading up to the zeros that follow
the records, writing in place, syncing the file (at once or later) and the folder."""

import atexit
import contextlib
import os
import sys

from gitledger.core.errors import GitError

FIRST_READ = 1024  # what a refresh reads first (a reader that is up to date finds a zero in it)


def read_to_zero(fd: int, pos: int, first: int = FIRST_READ) -> tuple[bytes, bytes]:
    """(the bytes of ``fd`` from ``pos`` up to the first zero byte or the end of the file, what the last
    read held from that zero byte on). A first read of ``first`` bytes, then larger ones: a reader that
    is up to date reads one block of zeros."""
    chunks = []
    want = first
    while True:
        chunk = os.pread(fd, want, pos)
        zero = chunk.find(0)
        if zero != -1:
            chunks.append(chunk[:zero])
            return b"".join(chunks), chunk[zero:]
        chunks.append(chunk)
        if len(chunk) < want:  # the end of the file (a journal of an earlier build has no zeros)
            return b"".join(chunks), b""
        pos += len(chunk)
        want = min(want * 8, 1 << 20)


def open_noatime(path: str, flags: int) -> int:
    """``os.open`` without access-time updates where the owner may ask for that (each read after a
    write would otherwise dirty the inode)."""
    try:
        return os.open(path, flags | os.O_NOATIME)
    except PermissionError:  # O_NOATIME: only the file's owner (or CAP_FOWNER)
        return os.open(path, flags)


def write_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, at)
        view, at = view[written:], at + written


def write_at(path: str, data: bytes, at: int, *, sync: bool) -> None:
    """Write ``data`` at offset ``at`` of the file ``path`` (then ``fdatasync`` it when ``sync``)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        write_all(fd, data, at)
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def sync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def keep_aside(path: str, pieces: list[bytes], durable: bool) -> None:
    """Append ``pieces`` (torn writes, damaged lines), each ending in a newline, to the file ``path``
    (``gitledger.journal.torn``), then ``fsync`` it when ``durable``.

    Unless the file already ends with exactly these pieces: a repair, rotation or fold killed after
    keeping them and before the journal dropped them keeps the same pieces again when it is run
    again (each torn write holds its own checksum and random event id, so two different ones are
    not the same bytes)."""
    block = b"".join(piece if piece.endswith(b"\n") else piece + b"\n" for piece in pieces)
    try:
        with open(path, "a+b") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size >= len(block):
                fh.seek(size - len(block))
                if fh.read(len(block)) == block:
                    return
            fh.write(block)
            if durable:
                os.fsync(fh.fileno())
    except OSError as exc:  # nothing is dropped from the journal then
        raise GitError(
            f"cannot keep torn journal lines in {path} ({exc.strerror}); make it a writable file (or move "
            "it away), then try again"
        ) from exc


def remove_leftovers(path: str) -> None:
    """Remove the ``<path>.<pid>.tmp`` files of journal rotations killed before their rename. Only
    under the exclusive ledger lock: no other rotation runs then, so every such file is a leftover
    (its content is still in the journal it was to replace: the rename never happened)."""
    folder, name = os.path.split(path)
    for entry in os.scandir(folder or "."):
        rest = entry.name.removeprefix(f"{name}.")
        if rest != entry.name and rest.endswith(".tmp") and rest[: -len(".tmp")].isdigit():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


_CHUNK = 64 * 1024
_ZERO_CHUNK = bytes(_CHUNK)


def zeros_from(fd: int, pos: int, size: int) -> bool:
    """Whether the bytes of ``fd`` from ``pos`` to ``size`` are all zeros. Read 64 KiB at a time and
    compared with zeros (memcmp): one read of the 256 KiB a journal reserves costs ~150 us in a new
    process (fresh memory is mapped for it), and counting zeros in it another ~140 us."""
    while pos < size:
        chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
        if not chunk:
            break
        if chunk != (_ZERO_CHUNK if len(chunk) == _CHUNK else bytes(len(chunk))):
            return False
        pos += len(chunk)
    return True


_LATER: dict[int, int] = {}  # descriptor -> the pid that wrote through it and left the sync for later


def sync_now(fd: int) -> None:
    """``fdatasync`` the file: what anyone wrote to it before is on the disk when this returns."""
    os.fdatasync(fd)
    _LATER.pop(fd, None)


def sync_later(fd: int) -> None:
    """Leave the sync of what was just written to ``fd`` for later: the next sync of the file (anyone's
    ``fdatasync`` covers every byte written to it before), :func:`sync_left` before ``fd`` is closed, or
    the exit of this process; the kernel writes it back within its writeback interval meanwhile."""
    _LATER[fd] = os.getpid()


def sync_left(fd: int) -> None:
    """Sync what :func:`sync_later` left on ``fd``, if anything (call it before closing ``fd``). A
    failure is said on stderr, not raised: the events were written and acted on, and a close or an
    exit has nobody to hand an error to."""
    if _LATER.pop(fd, None) == os.getpid():
        try:
            os.fdatasync(fd)
        except OSError as exc:
            said = f"gitledger: syncing the ledger journal failed ({exc.strerror}): check the disk"
            print(f"{said}; the last outcomes recorded may not survive a power cut", file=sys.stderr)


@atexit.register
def _sync_at_exit() -> None:
    for fd in list(_LATER):
        sync_left(fd)
