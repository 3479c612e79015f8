"""The ledger travels: fetch, merge (union of events) and push with a lease; the remote as arbiter.

``gitledger sync REMOTE`` (see docs/sync.md):

1. **fetch** the remote's ledger refs into tracking refs ``refs/gitledger/remotes/<remote>/notes`` and
   ``.../intents`` (forced, pruned: they mirror the remote and are nobody's work);
2. **merge** into the local refs without losing an event: per key, the union of the event lines (local
   order, then the remote-only lines in their order; identical lines once). Only notes whose blob oids
   differ are read: both fanned-out trees are walked together and identical subtrees are skipped by
   oid, so the cost grows with what diverged, not with the ledger. The result is a merge commit with
   both parents (fast-forward when one side contains the other), moved by one compare-and-swap;
3. **push** with ``--atomic --porcelain --force-with-lease=<ref>:<remote oid we merged>`` (never ``+``
   refspecs, never ``--force``: either would cancel the lease), reading the per-ref flags; a rejected
   push means someone wrote first: fetch, merge and try again (bounded, with jitter).

:class:`RemoteArbiter` implements :class:`gitledger.core.protocol.Arbiter` on top of this: a claim stands
when a push containing it was accepted against a remote entry that held nothing the claimant had not
seen when it decided. :func:`init_remote` configures a remote so plain ``git fetch`` follows the ledger.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gitledger.core.errors import (
    ConflictError,
    CorruptLedgerError,
    GitError,
    GitledgerError,
    UsageError,
    git_message,
)
from gitledger.core.events import Entry, Event, encode_event
from gitledger.core.protocol import Verdict
from gitledger.core.store import Intent
from gitledger.git.repo import GitRepo
from gitledger.git.store import FANOUT, INTENTS_REF, LEDGER_REFS, NOTES_REF, GitStore, Tip
from gitledger.git.trees import BLOB, TREE

__all__ = [
    "DEFAULT_REMOTE",
    "REF_KINDS",
    "LedgerSync",
    "RemoteArbiter",
    "RemoteUnavailableError",
    "SyncReport",
    "TreeMerger",
    "default_remote",
    "fetch_refspecs",
    "init_remote",
    "tracking_ref",
    "union_lines",
]

DEFAULT_REMOTE = "origin"
NETWORK_TIMEOUT = 120.0
MAX_TRIES = 30
SYNC_LOCK = "gitledger-sync.lock"
REF_KINDS = {NOTES_REF: "notes", INTENTS_REF: "intents"}  # short names, also of the tracking refs
# rejections that mean "someone else wrote first": fetch, merge, try again
# (the last ones: the remote's own ref transaction lost a lock to a concurrent push)
_RETRYABLE = (
    "stale info",
    "fetch first",
    "non-fast-forward",
    "atomic push failed",
    "atomic transaction failed",
    "failed to update ref",
    "failed to lock",
    "cannot lock ref",
)


# what git says when the two sides hash objects differently (sha1 and sha256); to an empty remote of
# the other kind, a push only gets the wrong length of the zero id of its 'capabilities^{}' line
_OTHER_HASH = ("mismatched algorithms", "support this repository's hash algorithm", "capabilities^{}")


class RemoteUnavailableError(GitError):
    """The remote could not be reached (or refused to talk): the caller decides whether to go on."""


def _unavailable(repo: GitRepo, remote: str, what: str, stderr: bytes) -> GitledgerError:
    """The error for a fetch or push that did not reach ``remote``; another hash algorithm there is no
    network trouble: retrying, or acting offline, would not help."""
    if any(s in stderr.decode(errors="replace") for s in _OTHER_HASH):
        return UsageError(
            f"cannot {what} '{remote}': it hashes objects with another algorithm than this "
            f"{repo.object_format} repository (extensions.objectFormat); a ledger travels only between "
            "repositories of one object format, so sync with a remote of the same one"
        )
    return RemoteUnavailableError(f"cannot {what} '{remote}': {git_message(stderr)}")


def tracking_ref(remote: str, ref: str) -> str:
    """Where the remote's copy of a ledger ref is fetched to: ``refs/gitledger/remotes/<remote>/...``."""
    return f"refs/gitledger/remotes/{remote}/{REF_KINDS[ref]}"


def fetch_refspecs(remote: str) -> list[str]:
    """Refspecs that fetch the ledger refs into the tracking refs.

    The source ends in ``*`` on purpose: git fails a whole fetch when an exact source ref is missing
    on the remote (a remote without a ledger yet), while a pattern matching nothing is fine.
    """
    return [f"+{ref}*:{tracking_ref(remote, ref)}*" for ref in LEDGER_REFS]


def default_remote(repo: GitRepo, configured: str | None = None) -> str:
    """The remote to use: given/configured in .gitledger.yml, else ``gitledger.remote``, else origin."""
    if configured:
        return configured
    return repo.out("config", "--get", "gitledger.remote", check=False) or DEFAULT_REMOTE


def check_remote(repo: GitRepo, remote: str) -> None:
    # a control character (C0 or DEL) or space is in no remote name; a NUL would not even reach git
    if not remote or remote.startswith("-") or any(c <= " " or c in "\x7f:*?[\\^~" for c in remote):
        raise UsageError(f"{remote!r} is not a remote name; give the name of a remote from 'git remote'")
    if not repo.out("config", "--get", f"remote.{remote}.url", check=False):
        raise UsageError(
            f"no git remote named '{remote}'; add it with 'git remote add {remote} URL' or name another "
            "(see 'git remote -v')"
        )


def union_lines(local: bytes, remote: bytes) -> bytes:
    """The union of two note bodies: local lines in order, then remote-only lines in order, once each.

    When one side already holds every line of the other it is returned unchanged (byte for byte), so
    clones converge on one blob instead of swapping orders back and forth.
    """
    seen: set[bytes] = set()
    out: list[bytes] = []
    for line in local.split(b"\n"):
        if line.strip() and line not in seen:
            seen.add(line)
            out.append(line)
    local_count = len(out)
    remote_lines = [line for line in remote.split(b"\n") if line.strip()]
    for line in remote_lines:
        if line not in seen:
            seen.add(line)
            out.append(line)
    if len(out) == local_count:
        return local
    if len(seen) == len(set(remote_lines)):
        return remote
    return b"\n".join(out) + b"\n"


class TreeMerger:
    """Merges two fanned-out ledger trees (``ab/cd/<rest>``), reading only what differs.

    Entries with equal oids are taken as they are (a whole identical subtree costs one comparison);
    an entry on one side only is taken without reading it; only blobs present on both sides with
    different oids go through ``merge_blob``. A level that does not follow the expected layout (a note
    written by another tool with another fanout) is flattened and rewritten in the standard layout.
    """

    def __init__(self, store: GitStore, merge_blob: Callable[[str, str], str]) -> None:
        self.store = store
        self.merge_blob = merge_blob
        self.blobs_merged = 0

    def merge(self, left: str | None, right: str | None) -> str | None:
        return self._merge(left, right, 0, "")

    def _regular(self, entries: dict[str, tuple[str, str]], depth: int) -> bool:
        if depth < FANOUT:
            return all(mode == TREE and len(name) == 2 for name, (mode, _) in entries.items())
        return all(mode != TREE for mode, _ in entries.values())

    def _merge(self, left: str | None, right: str | None, depth: int, prefix: str) -> str | None:
        if right is None or left == right:
            return left
        if left is None:
            return right
        ours, theirs = self.store.trees.tree(left), self.store.trees.tree(right)
        if not (self._regular(ours, depth) and self._regular(theirs, depth)):
            return self._flat_merge(left, right, depth, prefix)
        out = dict(ours)
        changed = False
        for name, (mode, oid) in theirs.items():
            current = out.get(name)
            if current is not None and current[1] == oid:
                continue
            if current is None:
                out[name] = (mode, oid)
            elif mode == TREE:
                merged = self._merge(current[1], oid, depth + 1, prefix + name)
                assert merged is not None
                if merged == current[1]:
                    continue
                out[name] = (TREE, merged)
            else:
                merged = self._blob(current[1], oid)
                if merged == current[1]:
                    continue
                out[name] = (current[0], merged)
            changed = True
        if not changed:
            return left
        if out == theirs:
            return right
        return self.store.trees.write_tree(out)

    def _blob(self, left: str, right: str) -> str:
        self.blobs_merged += 1
        return self.merge_blob(left, right)

    def _collect(self, tree: str, prefix: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for name, oid in self.store.trees.walk(tree, prefix):
            rest = name[len(prefix) :]
            found[rest] = oid if rest not in found or found[rest] == oid else self._blob(found[rest], oid)
        return found

    def _flat_merge(self, left: str, right: str, depth: int, prefix: str) -> str:
        ours, theirs = self._collect(left, prefix), self._collect(right, prefix)
        for name, oid in theirs.items():
            current = ours.get(name)
            ours[name] = oid if current is None or current == oid else self._blob(current, oid)
        return self._build(ours, depth)

    def _build(self, names: dict[str, str], depth: int) -> str:
        entries: dict[str, tuple[str, str]] = {}
        groups: dict[str, dict[str, str]] = {}
        for name, oid in names.items():
            if depth < FANOUT and len(name) > 2:
                groups.setdefault(name[:2], {})[name[2:]] = oid
            else:
                entries[name] = (BLOB, oid)
        for head, sub in groups.items():
            entries[head] = (TREE, self._build(sub, depth + 1))
        return self.store.trees.write_tree(entries)


@dataclass
class SyncReport:
    """What one ``sync`` did."""

    remote: str
    tries: int = 0
    notes_merged: int = 0  # keys whose events were unioned (both sides had changed them)
    intent_conflicts: int = 0
    local: dict[str, str] = field(default_factory=dict)  # ref -> how the local ref moved
    pushed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.local or self.pushed)

    def to_json(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "tries": self.tries,
            "notes_merged": self.notes_merged,
            "local": self.local,
            "pushed": self.pushed,
            "changed": self.changed,
            "warnings": self.warnings,
        }


RemoteTips = dict[str, str | None]  # ledger ref -> the remote's commit (None: the remote has none)


class LedgerSync:
    """Fetch, merge and push the ledger refs of one repository against one remote."""

    def __init__(
        self,
        store: GitStore,
        remote: str,
        *,
        timeout: float = NETWORK_TIMEOUT,
        max_tries: int = MAX_TRIES,
        sleep: Callable[[float], None] = time.sleep,
        validate: bool = True,
    ) -> None:
        self.store = store
        self.repo = store.repo
        self.remote = remote
        self.timeout = timeout
        self.max_tries = max_tries
        self.sleep = sleep
        if validate:
            check_remote(self.repo, remote)

    # -- fetch -------------------------------------------------------------------------------------

    def fetch(self) -> RemoteTips:
        """Fetch the remote's ledger refs into the tracking refs; return the remote's commits."""
        for attempt in range(5):
            proc = self.repo.run(
                "fetch",
                "--quiet",
                "--prune",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-auto-maintenance",
                "--no-recurse-submodules",
                "--no-filter",  # a partial clone's filter would leave the notes out (fetched one by one)
                self.remote,
                *fetch_refspecs(self.remote),
                check=False,
                timeout=self.timeout,
            )
            if proc.returncode == 0:
                return {ref: self._remote_tip(ref) for ref in LEDGER_REFS}
            err = proc.stderr.decode(errors="replace")
            if "cannot lock ref" not in err and "unable to update local ref" not in err:
                break
            self.sleep(0.05 * (attempt + 1))  # a concurrent 'git fetch' holds the tracking ref
        raise _unavailable(self.repo, self.remote, "fetch the ledger from", proc.stderr)

    def _remote_tip(self, ref: str) -> str | None:
        """The fetched copy of the remote's ``ref``; damaged, it is the remote's to repair: the local
        copy is fetched again, as it is, by every sync."""
        tracking = tracking_ref(self.remote, ref)
        try:
            return self.store.tip(tracking).commit
        except CorruptLedgerError as exc:
            what = str(exc).split(";")[0].replace(tracking, ref)
            raise CorruptLedgerError(
                f"the ledger on '{self.remote}' is damaged: its {what}; nothing was merged or pushed. Repair "
                f"it there (its reflog, a backup), or delete it with 'git push {self.remote} :{ref}' when "
                "nothing in it is worth keeping, then sync again"
            ) from exc

    # -- merge -------------------------------------------------------------------------------------

    def _merge_base(self, a: str, b: str) -> str | None:
        proc = self.repo.run("merge-base", a, b, check=False)
        if proc.returncode == 0:
            return proc.stdout.decode().strip() or None
        if proc.returncode == 1:
            return None  # unrelated histories
        raise GitError(f"git merge-base failed: {git_message(proc.stderr)}")

    def _merge_note(self, left: str, right: str) -> str:
        ours, theirs = self.store.read(left), self.store.read(right)
        if ours is None or theirs is None:
            raise GitError(f"ledger note {left if ours is None else right} is missing; fetch again")
        merged = union_lines(ours[2], theirs[2])
        if merged is ours[2]:
            return left
        if merged is theirs[2]:
            return right
        return self.store.write_object("blob", merged)

    def _merge_ref(self, ref: str, local: Tip, remote: str | None, report: SyncReport) -> str | None:
        """The new local commit for ``ref``, or None when the local ref already contains the remote's."""
        if remote is None or remote == local.commit:
            return None
        if local.commit is None:
            report.local[ref] = "fast-forward"
            return remote
        base = self._merge_base(local.commit, remote)
        if base == remote:
            return None
        if base == local.commit:
            report.local[ref] = "fast-forward"
            return remote
        if ref == NOTES_REF:
            merger = TreeMerger(self.store, self._merge_note)
        else:  # an intent blob is a function of its key: two different ones cannot both be right; keep ours

            def keep_ours(left: str, right: str) -> str:
                report.intent_conflicts += 1
                return left

            merger = TreeMerger(self.store, keep_ours)
        tree = merger.merge(local.tree, self.store.tip(remote, ref == NOTES_REF).tree)
        if ref == NOTES_REF:
            report.notes_merged += merger.blobs_merged
        report.local[ref] = "merged"
        assert tree is not None
        return self.store.commit(tree, [local.commit, remote], f"gitledger: merge {self.remote}'s ledger")

    def merge(self, remote: RemoteTips, report: SyncReport | None = None) -> SyncReport:
        """Merge the fetched remote commits into the local ledger refs (one compare-and-swap)."""
        report = report or SyncReport(self.remote)
        with self.repo.lock():
            self.store.fold_locked()  # the journal first: what leaves the machine is in the notes
            for _ in range(self.max_tries):
                attempt = SyncReport(self.remote)
                updates: list[tuple[str, str, str | None]] = []
                for ref in (INTENTS_REF, NOTES_REF):  # intents first: no note without its intent
                    local = self.store.tip(ref)
                    new = self._merge_ref(ref, local, remote[ref], attempt)
                    if new is not None:
                        updates.append((ref, new, local.commit))
                if not updates or self.store.move_refs(updates):
                    report.local.update(attempt.local)
                    report.notes_merged += attempt.notes_merged
                    report.intent_conflicts += attempt.intent_conflicts
                    return report
                self.sleep(0.001)  # a writer outside gitledger's lock moved a ref
        raise ConflictError("could not merge the remote ledger: the local ledger kept changing; try again")

    # -- push --------------------------------------------------------------------------------------

    def push(self, remote: RemoteTips, report: SyncReport | None = None) -> bool:
        """Push the local ledger refs with a lease on ``remote``; False when the remote moved first."""
        with self.repo.lock():
            self.store.fold_locked()  # nothing leaves the machine from the journal alone
        pushes: dict[str, str] = {}
        for ref in LEDGER_REFS:
            local = self.store.tip(ref).commit
            if local is not None and local != remote[ref]:
                pushes[ref] = local
        if not pushes:
            return True
        leases = [f"--force-with-lease={ref}:{remote[ref] or ''}" for ref in pushes]
        specs = [f"{oid}:{ref}" for ref, oid in pushes.items()]
        proc = self.repo.run(
            "push",
            "--atomic",
            "--porcelain",
            "--no-verify",  # our own push must not run pre-push hooks (which may call 'gitledger sync')
            # no --quiet: it drops the porcelain lines of accepted refs, which we need to read
            *leases,
            self.remote,
            *specs,
            check=False,
            timeout=self.timeout,
        )
        flags: dict[str, tuple[str, str]] = {}
        for line in proc.stdout.decode(errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and ":" in parts[1]:
                flags[parts[1].rsplit(":", 1)[1]] = (parts[0][:1], parts[2])
        if proc.returncode == 0 and all(flags.get(ref, ("?", ""))[0] in " +*=" for ref in pushes):
            for ref, oid in pushes.items():  # the remote now holds what we pushed
                self.repo.update_refs([(tracking_ref(self.remote, ref), oid, remote[ref])])
            if report is not None:
                report.pushed = sorted(pushes)
            return True
        rejected = {ref: summary for ref, (flag, summary) in flags.items() if flag == "!"}
        if rejected:
            if all(any(r in summary for r in _RETRYABLE) for summary in rejected.values()):
                return False
            reason = "; ".join(f"{ref} {summary}" for ref, summary in sorted(rejected.items()))
            raise GitError(f"'{self.remote}' refused the ledger push: {reason}")
        raise _unavailable(self.repo, self.remote, "push the ledger to", proc.stderr)

    # -- the loop ----------------------------------------------------------------------------------

    def backoff(self, attempt: int) -> None:
        self.sleep(random.uniform(0.01, 0.05) * 2 ** min(attempt, 5))

    def sync(self, push: bool = True, progress: Callable[[str], None] | None = None) -> SyncReport:
        """Fetch, merge and push until the remote accepts (bounded); return what happened.

        ``progress`` is told each phase as it starts ("fetching", "merging", "pushing")."""
        report = SyncReport(self.remote)
        tell = progress or (lambda phase: None)
        with self.repo.lock(SYNC_LOCK):
            for attempt in range(self.max_tries):
                report.tries += 1
                tell("fetching")
                tips = self.fetch()
                tell("merging")
                self.merge(tips, report)
                if push:
                    tell("pushing")
                if not push or self.push(tips, report):
                    return report
                self.backoff(attempt)
        raise ConflictError(
            f"the push to '{self.remote}' was rejected {self.max_tries} times: others keep writing the "
            f"ledger; the local ledger is merged and correct, run 'gitledger sync {self.remote}' again"
        )

    # -- reading the remote's copy -----------------------------------------------------------------

    def note_lines(self, notes_commit: str | None, intent_oid: str) -> set[bytes]:
        """The event lines of one key in a notes commit (empty when it has none)."""
        if notes_commit is None:
            return set()
        found = self.store.trees.find(self.store.tip(notes_commit).tree, intent_oid)
        blob = self.store.read(found[1]) if found else None
        return _lines(blob[2]) if blob else set()


def _lines(data: bytes) -> set[bytes]:
    return {line for line in data.split(b"\n") if line.strip()}


class RemoteArbiter:
    """The remote as arbiter between clones (:class:`gitledger.core.protocol.Arbiter`).

    ``confirm`` fetches and merges the remote ledger, then:

    - the remote's entry already holds our claim (an earlier push of ours landed) → it stands;
    - the remote's entry holds any line the claimant had not seen when it decided (another clone's
      claim, outcome, withdrawal, ...) → it does not stand; the merge has brought those lines into
      the local ledger, so the runner decides again on them (in_progress, skipped, unconfirmed, ...);
    - otherwise push (with a lease on exactly the remote state just checked): accepted → it stands;
      rejected (someone pushed in between) → fetch and check again.

    The remote unreachable → :class:`RemoteUnavailableError` (the runner withdraws the claim and fails
    closed), or with ``allow_offline`` the claim stands with a warning.
    """

    def __init__(self, store: GitStore, remote: str, *, allow_offline: bool = False, **options: Any) -> None:
        # the remote name is checked when first needed: a done key is skipped without it, exactly as
        # the fast skip path does
        self.sync = LedgerSync(store, remote, validate=False, **options)
        self.store = store
        self.remote = remote
        self.allow_offline = allow_offline
        self._checked = False

    def prepare(self) -> None:
        """Check the remote's name before the runner writes anything (once)."""
        if not self._checked:
            check_remote(self.store.repo, self.remote)
            self._checked = True

    def refresh(self, intent: Intent) -> None:
        """Fetch and merge the remote ledger, so a decision on a gone owner's claim sees its outcome
        if it reached the remote. Unreachable: nothing to add (the caller decides on what it has)."""
        try:
            with self.store.repo.lock(SYNC_LOCK):
                self.sync.merge(self.sync.fetch())
        except RemoteUnavailableError:
            pass

    def confirm(self, intent: Intent, seen: Entry, claim: Event) -> Verdict:
        self.prepare()
        line = encode_event(claim).rstrip(b"\n")
        known = self._version_lines(seen.version) | {line}
        intent_oid = self.store.intent_oid(intent)
        try:
            with self.store.repo.lock(SYNC_LOCK):
                for attempt in range(self.sync.max_tries):
                    tips = self.sync.fetch()
                    remote_lines = self.sync.note_lines(tips[NOTES_REF], intent_oid)
                    self.sync.merge(tips)
                    if line in remote_lines:
                        return Verdict(True)
                    if remote_lines - known:
                        return Verdict(False)
                    if self.sync.push(tips):
                        return Verdict(True)
                    self.sync.backoff(attempt)
        except RemoteUnavailableError as exc:
            if not self.allow_offline:
                raise RemoteUnavailableError(
                    f"{exc.message}; the claim was not confirmed by the remote, nothing was done "
                    "(retry when the remote is reachable, or pass --allow-offline)"
                ) from exc
            return Verdict(True, f"{exc.message}; acting on the local claim only (--allow-offline)")
        raise ConflictError(
            f"could not get a claim for {intent.key} onto '{self.remote}': the push was rejected "
            f"{self.sync.max_tries} times; nothing was done, try again"
        )

    def publish(self) -> str | None:
        try:
            self.sync.sync()
        except GitledgerError as exc:
            return (
                f"the outcome is recorded locally but was not pushed to '{self.remote}' ({exc.message}); "
                f"run 'gitledger sync {self.remote}'"
            )
        return None

    def _version_lines(self, version: str | None) -> set[bytes]:
        body = self.store.version_bytes(version)
        return _lines(body) if body else set()


# -- init --------------------------------------------------------------------------------------------


def _values(repo: GitRepo, key: str) -> list[str]:
    proc = repo.run("config", "--get-all", key, check=False)
    if proc.returncode not in (0, 1):
        raise GitError(f"git config --get-all {key} failed: {git_message(proc.stderr)}")
    return proc.stdout.decode().splitlines()


def init_remote(repo: GitRepo, remote: str, *, undo: bool = False, dry_run: bool = False) -> list[str]:
    """Make ``git fetch <remote>`` follow the ledger and let the pre-push hook sync it (or undo that).

    Adds the ledger fetch refspecs to ``remote.<remote>.fetch`` and sets ``gitledger.remote`` and
    ``gitledger.pushLedger=true``. Never adds ``remote.<remote>.push`` refspecs: any configured push
    refspec replaces git's default of pushing the current branch (see docs/sync.md). Idempotent; with
    ``undo`` removes exactly these values. Returns one line per change (made, or with ``dry_run``
    that would be made).
    """
    check_remote(repo, remote)
    wanted = [(f"remote.{remote}.fetch", spec, True) for spec in fetch_refspecs(remote)]
    wanted += [("gitledger.remote", remote, False), ("gitledger.pushLedger", "true", False)]
    changes: list[str] = []
    for key, value, multi in wanted:
        values = _values(repo, key)
        if undo:
            if value in values:
                changes.append(f"removed {key}={value}")
                if not dry_run:
                    repo.run("config", "--unset-all", "--fixed-value", key, value)
            continue
        if value in values and (multi or len(values) == 1):
            continue
        if multi:
            changes.append(f"added {key}={value}")
            if not dry_run:
                repo.run("config", "--add", key, value)
        else:
            was = f" (was {', '.join(values)})" if values else ""
            changes.append(f"set {key}={value}{was}")
            if not dry_run:
                repo.run("config", "--replace-all", key, value)
    return changes
