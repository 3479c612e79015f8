"""An independent audit of a repository's ledger, with git plumbing only (no gitledger code).

- every note line parses as a JSON event object with a known state;
- the notes history is append-only: each commit on ``refs/notes/gitledger`` appends one or more lines
  to one or more notes and removes none; so the lines ever appended equal the event lines there now,
  and an event that was ever recorded is still there (no event is lost);
- the journal (``gitledger.journal`` in the git directory, events not yet folded into the notes) is
  read by its documented format: ``<crc32 hex> <key> <intent>\t<event>``; a line whose checksum holds
  and that is not in the notes yet is an event of the ledger;
- ``git fsck`` reports no error.
"""

from __future__ import annotations

import json
import subprocess
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOTES_REF = "refs/notes/gitledger"
STATES = {"attempting", "done", "failed", "forgotten", "info"}


def _git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, input=input, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def read_blobs(repo: Path, oids: list[str], missing_ok: bool = False) -> dict[str, bytes]:
    """Contents of many blobs through one ``git cat-file --batch`` (``missing_ok``: left out)."""
    unique = list(dict.fromkeys(oids))
    if not unique:
        return {}
    out = _git(repo, "cat-file", "--batch", input=("\n".join(unique) + "\n").encode())
    blobs: dict[str, bytes] = {}
    pos = 0
    for oid in unique:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) != 3:
            if missing_ok:
                pos = end + 1
                continue
            raise AssertionError(f"object {oid} is missing: {out[pos:end]!r}")
        size = int(header[2])
        blobs[oid] = out[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1
    return blobs


@dataclass
class Audit:
    commits: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[str] = field(default_factory=list)  # lines that do not parse as events
    history_problems: list[str] = field(default_factory=list)  # commits that were not a one-line append
    fsck_problems: list[str] = field(default_factory=list)

    @property
    def ids(self) -> set[str]:
        return {str(e.get("id")) for e in self.events}

    journal_events: int = 0  # events read from the journal (not yet in the notes)

    @property
    def lost(self) -> int:
        """Lines once appended to the notes that are no longer there (0 when nothing was lost)."""
        return max(0, self.commits - (len(self.events) - self.journal_events))

    def by_key(self) -> dict[str, list[dict[str, Any]]]:
        keys: dict[str, list[dict[str, Any]]] = {}
        for event in self.events:
            keys.setdefault(str(event.get("key")), []).append(event)
        return keys

    def created_counts(self) -> Counter[str]:
        """Per key: done events with outcome 'created' since the key's last tombstone."""
        counts: Counter[str] = Counter()
        for key, events in self.by_key().items():
            n = 0
            for event in events:
                if event.get("state") == "forgotten":
                    n = 0
                elif event.get("state") == "done" and event.get("outcome") == "created":
                    n += 1
            counts[key] = n
        return counts

    def twice(self) -> list[str]:
        """Event ids recorded more than once (an event applied twice)."""
        return [i for i, n in Counter(str(e.get("id")) for e in self.events).items() if n > 1]

    def assert_clean(self) -> None:
        assert not self.bad_lines, self.bad_lines[:5]
        assert not self.twice(), self.twice()[:5]
        assert not self.history_problems, self.history_problems[:5]
        assert not self.fsck_problems, self.fsck_problems[:5]
        assert self.lost == 0, f"{self.commits} commits but {len(self.events)} events"


def parse_line(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(event, dict) or event.get("state") not in STATES or not event.get("id"):
        return None
    return event


def audit(repo: Path, *, fsck: bool = True) -> Audit:
    result = Audit()
    has_ref = subprocess.run(
        ["git", "rev-parse", "-q", "--verify", NOTES_REF], cwd=repo, capture_output=True, check=False
    )
    if has_ref.returncode == 0:
        _audit_notes(repo, result)
    _audit_journal(repo, result)
    if fsck:
        proc = subprocess.run(
            ["git", "fsck", "--no-progress", "--no-dangling"], cwd=repo, capture_output=True, text=True
        )
        problems = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        if proc.returncode != 0 or problems:
            result.fsck_problems = problems or [f"git fsck exited {proc.returncode}"]
    return result


def _audit_notes(repo: Path, result: Audit) -> None:
    # final notes: every blob in the notes tree
    tree = _git(repo, "ls-tree", "-r", "-z", NOTES_REF).split(b"\0")
    note_blobs = [entry.split()[2].decode() for entry in tree if entry]
    # the key of each note is its intent's (the object the note annotates; events omit it)
    annotated = {
        entry.split()[2].decode(): entry.partition(b"\t")[2].decode().replace("/", "")
        for entry in tree
        if entry
    }
    intents = read_blobs(repo, sorted(set(annotated.values())), missing_ok=True)
    note_keys = {oid: _intent_key(intents.get(target, b"")) for oid, target in annotated.items()}
    # history: for each commit, the notes it changed (old blob -> new blob)
    raw = _git(
        repo, "log", "--raw", "--no-renames", "--root", "--no-abbrev", "--format=commit %H", NOTES_REF
    ).decode()
    changes: list[tuple[str, list[tuple[str, str, str]]]] = []
    for line in raw.splitlines():
        if line.startswith("commit "):
            changes.append((line[7:], []))
        elif line.startswith(":"):
            meta = line.partition("\t")[0]
            parts = meta.split()
            changes[-1][1].append((parts[2], parts[3], parts[4]))
    result.commits = len(changes)
    zero = "0" * len(changes[0][0]) if changes else ""
    wanted = note_blobs + [
        oid for _c, ch in changes for old, new, _s in ch for oid in (old, new) if oid != zero
    ]
    blobs = read_blobs(repo, wanted)
    for oid in note_blobs:
        for raw_line in blobs[oid].split(b"\n"):
            if not raw_line.strip():
                continue
            event = parse_line(raw_line)
            if event is None:
                result.bad_lines.append(raw_line[:200].decode(errors="replace"))
            else:
                if note_keys.get(oid) is not None:
                    event.setdefault("key", note_keys[oid])
                result.events.append(event)
    appended = 0
    for commit, changed in changes:
        if not changed:
            result.history_problems.append(f"{commit} changed no note")
            continue
        for old, new, status in changed:
            before = b"" if old == zero else blobs[old]
            after = blobs.get(new, b"")
            if status not in ("A", "M") or not after.startswith(before):
                result.history_problems.append(f"{commit} rewrote a note ({status})")
                continue
            added = after[len(before) :]
            if added.count(b"\n") < 1 or not added.endswith(b"\n"):
                result.history_problems.append(f"{commit} added a partial line")
            appended += added.count(b"\n")
    result.commits = appended


def _intent_key(data: bytes) -> str | None:
    try:
        key = json.loads(data).get("key")
    except (ValueError, AttributeError):
        return None
    return key if isinstance(key, str) else None


def _intact_record(line: bytes) -> bytes | None:
    """The record of a journal line: the line when its checksum holds, else the first suffix whose
    checksum does (a writer killed in its append left a fragment, and the next one appended behind
    it), else None."""
    for start in range(len(line) - 9):
        if start and line[start + 8 : start + 9] != b" ":
            continue
        raw = line[start:]
        try:
            if zlib.crc32(raw[9:]) == int(raw[:8], 16):
                return raw
        except ValueError:
            pass
    return None


def _audit_journal(repo: Path, result: Audit) -> None:
    common = Path(_git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").decode().strip())
    try:
        data = (common / "gitledger.journal").read_bytes()
    except FileNotFoundError:
        return
    data = data.partition(b"\0")[0]  # the lines; zeros written ahead of them follow
    in_notes = {json.dumps(e, sort_keys=True) for e in result.events}
    for line in data.split(b"\n"):
        raw = _intact_record(line)
        if raw is None:
            continue  # a torn tail (never confirmed to anyone); gitledger cuts it off
        event = parse_line(raw.partition(b"\t")[2])
        if event is not None:
            event.setdefault("key", raw[9:].partition(b" ")[0].decode(errors="replace"))
        if event is None:
            result.bad_lines.append(raw[:200].decode(errors="replace"))
        elif json.dumps(event, sort_keys=True) not in in_notes:
            in_notes.add(json.dumps(event, sort_keys=True))
            result.events.append(event)
            result.journal_events += 1
