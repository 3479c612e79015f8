"""Duplicate-PR audit: which pull requests of a GitHub repository belong to one intent (one key)?

An agent that crashed after opening a pull request and was restarted without gitledger (or with a lost
ledger) opens a second one for the same intent. The audit finds them afterwards, from the evidence the
pull requests themselves carry, and reads the ledger to report what is stuck or suspicious
(docs/audit.md is the user's guide):

Evidence (each names a key, or part of one)
    ``label``    the key's label, ``<label prefix><digest hex>`` (the shape of :func:`keys.label_for`)
    ``marker``   ``<!-- gitledger:KEY -->`` in the PR body
    ``trailer``  ``Gitledger-Key: KEY`` in one of the PR's commits
    ``branch``   a head ref in the key's convention-branch family: ``<branch prefix><task>/<step>-<12 hex>``,
                 exactly (:func:`keys.branch_for`) or followed by a suffix such as ``-2`` or ``/retry``

Grouping
    Every piece of evidence is an *identity*: a digest prefix (12 to 24 hex digits) and, when it says so,
    the task and step slugs. Two identities are compatible when the shorter digest is a prefix of the
    longer and the slugs agree where both are known; compatible identities are joined (union-find), and
    a group is the set of PRs whose evidence falls in one joined set. A group whose identities are not
    all pairwise compatible (two different keys that share twelve digits, which only a forger arranges)
    is reported ``ambiguous`` and never closed automatically. PRs are not joined *through* a PR: a PR
    that carries evidence of two keys belongs to two groups.

Cost
    PRs come from the pulls list endpoint in all states (``per_page=100``: 10 calls for 1 000 PRs), which
    carries labels, body and head ref. Trailers are read with git, not the API: the PR heads are fetched
    from ``refs/pull/*/head`` (GitHub keeps one per PR) into ``refs/gitledger/audit/pull/*`` and every
    trailer is read by one ``git for-each-ref`` plus one ``git log`` per distinct base commit. Only when
    git cannot fetch are the PRs' commits listed through the API, one call per PR, capped.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitledger.core.errors import GitError, GitledgerError, UsageError, last_line
from gitledger.core.events import ATTEMPTING, DONE, Entry, Event
from gitledger.core.keys import (
    BRANCH_DIGEST_LEN,
    DEFAULT_BRANCH_PREFIX,
    DEFAULT_LABEL_PREFIX,
    KEY_DIGEST_LEN,
    KEY_RE,
    MAX_LABEL_LEN,
    TRAILER_TOKEN,
    Names,
)
from gitledger.git.repo import GitRepo, git_env

if TYPE_CHECKING:
    from gitledger.github.client import GitHubContext

AUDIT_REF_PREFIX = "refs/gitledger/audit/"
PULL_REFS = AUDIT_REF_PREFIX + "pull/"
HEAD_REFS = AUDIT_REF_PREFIX + "heads/"
MAX_PR_COMMITS = 250  # GitHub lists at most 250 commits of a PR; the git walk keeps the same bound
DEFAULT_COMMIT_API_LIMIT = 50
GIT_NETWORK_TIMEOUT = 600.0
TRAILER_SOURCES = ("auto", "git", "api", "none")
EVIDENCE_ORDER = ("marker", "trailer", "label", "branch")

_KEY_BODY = KEY_RE.pattern.removeprefix("^").removesuffix("$")
MARKER_RE = re.compile(r"<!--\s*gitledger:(" + _KEY_BODY + r")\s*-->")
CLOSE_MARKER_RE = re.compile(r"<!--\s*gitledger-audit:duplicate\b([^>]*?)\s*-->")
_TRAILER_LINE = re.compile(r"^\s*" + re.escape(TRAILER_TOKEN) + r"\s*:\s*(\S+)\s*$", re.IGNORECASE)
_SLUG = r"[a-z0-9][a-z0-9_-]*"
_BRANCH_EXACT = re.compile(rf"^(?P<task>{_SLUG})/(?P<step>{_SLUG})-(?P<digest>[0-9a-f]{{12}})$")
_BRANCH_FAMILY = re.compile(rf"^(?P<task>{_SLUG})/(?P<step>{_SLUG}?)-(?P<digest>[0-9a-f]{{12}})[-/._+].*$")


# -- pull requests and evidence ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Pull:
    """One pull request as the audit sees it (all from one list answer)."""

    number: int
    url: str
    state: str  # open, closed (unmerged) or merged
    title: str
    body: str
    head_ref: str
    base_ref: str
    head_sha: str
    base_sha: str
    labels: tuple[str, ...]
    created_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "state": self.state, "url": self.url}


@dataclass(frozen=True)
class Ident:
    """What one piece of evidence says about a key: a digest prefix and, maybe, the slugs and full key."""

    digest: str
    task: str | None = None
    step: str | None = None
    key: str | None = None

    @classmethod
    def of_key(cls, key: str) -> Ident:
        task, step, digest = key.split(".")
        return cls(digest, task, step, key)

    def compatible(self, other: Ident) -> bool:
        short, long = sorted((self.digest, other.digest), key=len)
        if not long.startswith(short):
            return False
        if self.task and other.task and self.task != other.task:
            return False
        return not (self.step and other.step and self.step != other.step)


@dataclass(frozen=True)
class Evidence:
    kind: str  # marker, trailer, label, branch
    value: str  # the key, the label or the branch
    ident: Ident


def _prefixes(configured: str, default: str) -> list[str]:
    return [configured] if configured == default else [configured, default]


def label_ident(name: str, names: Names) -> Ident | None:
    """The identity a label names when it has the shape of :func:`keys.label_for`, else None."""
    lowered = name.lower()
    for prefix in _prefixes(names.label_prefix, DEFAULT_LABEL_PREFIX):
        if not lowered.startswith(prefix.lower()):
            continue
        rest = lowered[len(prefix) :]
        size = min(MAX_LABEL_LEN - len(prefix), KEY_DIGEST_LEN)
        if len(rest) == size and re.fullmatch(r"[0-9a-f]+", rest):
            return Ident(rest)
    return None


def branch_ident(ref: str, names: Names) -> Ident | None:
    """The identity of a head ref in a key's convention-branch family (exact, or with a suffix)."""
    for prefix in _prefixes(names.branch_prefix, DEFAULT_BRANCH_PREFIX):
        if not ref.startswith(prefix):
            continue
        rest = ref[len(prefix) :]
        match = _BRANCH_EXACT.match(rest) or _BRANCH_FAMILY.match(rest)
        if match:
            return Ident(match["digest"], match["task"], match["step"])
    return None


def marker_keys(body: str) -> list[str]:
    return sorted(set(MARKER_RE.findall(body or "")))


def message_trailer_keys(message: str) -> set[str]:
    """Keys in ``Gitledger-Key:`` trailers of a commit message (its last paragraph, as git reads them)."""
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", message.strip()) if p.strip()]
    if not paragraphs:
        return set()
    found = set()
    for line in paragraphs[-1].splitlines():
        match = _TRAILER_LINE.match(line)
        if match and KEY_RE.match(match[1]):
            found.add(match[1])
    return found


def pull_evidence(pull: Pull, trailers: Iterable[str], names: Names) -> list[Evidence]:
    """Every piece of gitledger evidence one PR carries."""
    found: list[Evidence] = []
    for key in marker_keys(pull.body):
        found.append(Evidence("marker", key, Ident.of_key(key)))
    for key in sorted(set(trailers)):
        if KEY_RE.match(key):
            found.append(Evidence("trailer", key, Ident.of_key(key)))
    for label in pull.labels:
        ident = label_ident(label, names)
        if ident is not None:
            found.append(Evidence("label", label, ident))
    ident = branch_ident(pull.head_ref, names)
    if ident is not None:
        found.append(Evidence("branch", pull.head_ref, ident))
    return found


# -- groups -----------------------------------------------------------------------------------------------


@dataclass
class Group:
    """The PRs that belong to one intent, with the evidence that says so."""

    idents: list[Ident]
    pulls: list[Pull]
    evidence: dict[tuple[str, str], list[int]]
    ambiguous: bool = False
    ledger_keys: list[str] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        return sorted({i.key for i in self.idents if i.key})

    @property
    def key(self) -> str | None:
        """The group's key: named by a marker or trailer, else the one ledger key that matches."""
        if self.ambiguous:
            return None
        if len(self.keys) == 1:
            return self.keys[0]
        if len(self.ledger_keys) == 1:
            return self.ledger_keys[0]
        return None

    @property
    def digest(self) -> str:
        return max((i.digest for i in self.idents), key=len)

    @property
    def name(self) -> str:
        """How to show the group to a person: its key, else what its evidence says."""
        if self.key:
            return self.key
        if self.ambiguous:
            return "ambiguous: " + ", ".join(self.keys or [i.digest for i in self.idents])
        ident = next((i for i in self.idents if i.task and i.step), None)
        if ident is not None:
            return f"{ident.task}.{ident.step}.{self.digest}…"
        label = next((value for kind, value in self.evidence if kind == "label"), None)
        return f"label {label}" if label else self.digest

    @property
    def keep(self) -> Pull | None:
        """The PR ``--close-duplicates`` keeps: the oldest open one (None when none is open)."""
        return next((p for p in self.pulls if p.state == "open"), None)

    def evidence_json(self) -> list[dict[str, Any]]:
        items = sorted(self.evidence.items(), key=lambda kv: (EVIDENCE_ORDER.index(kv[0][0]), kv[0][1]))
        return [{"kind": kind, "value": value, "prs": sorted(prs)} for (kind, value), prs in items]

    def to_json(self) -> dict[str, Any]:
        keep = self.keep
        return {
            "key": self.key,
            "digest": self.digest,
            "evidence": self.evidence_json(),
            "prs": [p.to_json() for p in self.pulls],
            "keep": keep.number if keep else None,
            "ambiguous": self.ambiguous,
        }


def group_pulls(pulls: Sequence[Pull], evidence: Mapping[int, Sequence[Evidence]]) -> list[Group]:
    """Join compatible identities and collect the PRs of each joined set (see the module doc)."""
    idents: list[Ident] = sorted({e.ident for items in evidence.values() for e in items}, key=repr)
    parent = list(range(len(idents)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    buckets: dict[str, list[int]] = defaultdict(list)
    for index, ident in enumerate(idents):
        buckets[ident.digest[:BRANCH_DIGEST_LEN]].append(index)
    for members in buckets.values():
        for pos, a in enumerate(members):
            for b in members[pos + 1 :]:
                if idents[a].compatible(idents[b]):
                    parent[root(a)] = root(b)
    index_of = {ident: i for i, ident in enumerate(idents)}
    by_number = {p.number: p for p in pulls}
    components: dict[int, Group] = {}
    for number in sorted(evidence):
        for item in evidence[number]:
            r = root(index_of[item.ident])
            group = components.setdefault(r, Group([], [], {}))
            if item.ident not in group.idents:
                group.idents.append(item.ident)
            prs = group.evidence.setdefault((item.kind, item.value), [])
            if number not in prs:
                prs.append(number)
            if all(p.number != number for p in group.pulls):
                group.pulls.append(by_number[number])
    groups = list(components.values())
    for group in groups:
        group.pulls.sort(key=lambda p: (p.created_at or "", p.number))
        group.ambiguous = any(
            not a.compatible(b) for i, a in enumerate(group.idents) for b in group.idents[i + 1 :]
        )
    groups.sort(key=lambda g: g.pulls[0].number)
    return groups


def match_ledger(groups: Iterable[Group], ledger_keys: Iterable[str]) -> None:
    """Attach to each group the ledger keys compatible with all of its evidence."""
    by_prefix: dict[str, list[Ident]] = defaultdict(list)
    for key in ledger_keys:
        ident = Ident.of_key(key)
        by_prefix[ident.digest[:BRANCH_DIGEST_LEN]].append(ident)
    for group in groups:
        candidates = by_prefix.get(group.digest[:BRANCH_DIGEST_LEN], [])
        group.ledger_keys = sorted(
            c.key for c in candidates if c.key and all(c.compatible(i) for i in group.idents)
        )


# -- trailers: git first, the API only as a capped fallback -------------------------------------------------


@dataclass
class TrailerScan:
    """Trailer keys per PR number, and how they were read."""

    via: str  # git, api or none
    keys: dict[int, set[str]] = field(default_factory=dict)
    scanned: int = 0
    skipped: int = 0
    git_processes: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "via": self.via,
            "scanned": self.scanned,
            "skipped": self.skipped,
            "git_processes": self.git_processes,
        }


class FetchError(GitledgerError):
    """git could not fetch the pull request heads."""


def auth_env(url: str, token: str, web_url: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Environment that gives git the token for ``url`` as an HTTP header, never on the command line.

    Only for an https URL on the repository's own web host (github.com or the Enterprise host), in the
    form actions/checkout uses (``AUTHORIZATION: basic base64(x-access-token:TOKEN)``).
    """
    parsed = urllib.parse.urlsplit(url)
    web = urllib.parse.urlsplit(web_url)
    if parsed.scheme != "https" or parsed.hostname is None or parsed.hostname != web.hostname:
        return {}
    credentials = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    count = environ.get("GIT_CONFIG_COUNT", "").strip()
    index = int(count) if count.isdigit() else 0
    return {
        "GIT_CONFIG_COUNT": str(index + 1),
        f"GIT_CONFIG_KEY_{index}": f"http.https://{parsed.netloc}/.extraheader",
        f"GIT_CONFIG_VALUE_{index}": f"AUTHORIZATION: basic {credentials}",
    }


@dataclass
class ScanRepo:
    """Where the PR heads are fetched: the user's repository, or a throw-away partial clone."""

    repo: GitRepo
    source: str  # a URL, or the name of a remote configured in ``repo``
    env: dict[str, str]
    temporary: Path | None = None  # the folder of a throw-away clone (deleted by close)
    processes: int = 0

    def git(
        self, *args: str, input: bytes | None = None, timeout: float | None = None
    ) -> tuple[int, bytes, bytes]:
        self.processes += 1
        proc = self.repo.run(*args, input=input, check=False, timeout=timeout, env=self.env)
        return proc.returncode, proc.stdout, proc.stderr

    def close(self) -> None:
        if self.temporary is not None:
            self.repo.close()
            shutil.rmtree(self.temporary, ignore_errors=True)


def can_take_refs(repo: GitRepo) -> bool:
    """Can the PR heads be fetched into the user's repository? Not into a shallow one."""
    return repo.out("rev-parse", "--is-shallow-repository", check=False) == "false"


def temporary_scan_repo(url: str, extra_env: dict[str, str]) -> ScanRepo:
    """A throw-away bare partial clone that fetches commits only (``--filter=tree:0``).

    Only commits are needed to read trailers, so this costs little even for a large repository. The
    token header (``extra_env``) is used only here: the user's own repository has its credentials, and
    a second Authorization header would make GitHub refuse the fetch.
    """
    folder = Path(tempfile.mkdtemp(prefix="gitledger-audit-"))
    try:
        bare = folder / "scan.git"
        proc = subprocess.run(["git", "init", "-q", "--bare", str(bare)], capture_output=True, env=git_env())
        if proc.returncode != 0:
            raise GitError(f"git init failed: {last_line(proc.stderr)}")
        repo = GitRepo.discover(bare)
        for setting in (
            ("core.repositoryformatversion", "1"),
            ("remote.gitledger-audit.url", url),
            ("remote.gitledger-audit.promisor", "true"),
            ("remote.gitledger-audit.partialclonefilter", "tree:0"),
            ("extensions.partialClone", "gitledger-audit"),
            ("gc.auto", "0"),
        ):
            repo.run("config", *setting)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return ScanRepo(repo, "gitledger-audit", extra_env, temporary=folder)


def fetch_and_read(scan: ScanRepo, pulls: Sequence[Pull], redact: Callable[[str], str]) -> TrailerScan:
    fetch_heads(scan, pulls, redact)
    keys, scanned = read_trailers_git(scan, pulls)
    return TrailerScan(
        "git", keys, scanned=scanned, skipped=len(pulls) - scanned, git_processes=scan.processes
    )


def fetch_heads(scan: ScanRepo, pulls: Sequence[Pull], redact: Callable[[str], str]) -> None:
    """Fetch every PR head and branch tip, then any base commit still missing (best effort)."""
    refspecs = [f"+refs/pull/*/head:{PULL_REFS}*", f"+refs/heads/*:{HEAD_REFS}*"]
    filt = ["--filter=tree:0"] if scan.temporary is not None else []
    code, _, err = scan.git(
        "fetch", "--quiet", "--no-tags", "--prune", *filt, scan.source, *refspecs, timeout=GIT_NETWORK_TIMEOUT
    )
    if code != 0:
        raise FetchError(redact(f"git fetch of the pull request heads failed: {last_line(err)}"))
    bases = sorted({p.base_sha for p in pulls if p.base_sha})
    missing = [sha for sha, present in _present(scan, bases).items() if not present]
    if missing:
        wants = "".join(f"{sha}\n" for sha in missing).encode()
        fetch = ("fetch", "--quiet", "--no-tags", *filt, "--stdin", scan.source)
        scan.git(*fetch, input=wants, timeout=GIT_NETWORK_TIMEOUT)  # unreachable ones just stay missing


def _present(scan: ScanRepo, oids: Sequence[str]) -> dict[str, bool]:
    if not oids:
        return {}
    _, out, _ = scan.git(
        "cat-file", "--batch-check=%(objectname) %(objecttype)", input="\n".join(oids).encode() + b"\n"
    )
    result = dict.fromkeys(oids, False)
    for line in out.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == "commit":
            result[parts[0]] = True
    return result


_TRAILER_FORMAT = f"%(trailers:key={TRAILER_TOKEN},valueonly,unfold,separator=%x01)"


def _keys_of(values: str) -> set[str]:
    return {v.strip() for v in values.split("\x01") if KEY_RE.match(v.strip())}


def read_trailers_git(scan: ScanRepo, pulls: Sequence[Pull]) -> tuple[dict[int, set[str]], int]:
    """Trailer keys of every PR's commits (``base..head``, at most 250 each), from the fetched refs,
    and the number of PRs whose head was there to read.

    One ``git for-each-ref`` reads each head commit; one ``git log`` per distinct base reads the rest.
    Commits reachable from the PR's base are not the PR's (they are on the branch it targets). When the
    base commit is unknown, the current tip of the base branch stands in for it.
    """
    code, out, err = scan.git(
        "for-each-ref", f"--format=%(refname)%00%(objectname)%00{_TRAILER_FORMAT}", PULL_REFS
    )
    if code != 0:
        raise FetchError(f"git for-each-ref failed: {last_line(err)}")
    heads: dict[int, str] = {}
    keys: dict[int, set[str]] = defaultdict(set)
    for line in out.decode(errors="replace").splitlines():
        name, _, rest = line.partition("\0")
        oid, _, values = rest.partition("\0")
        number = name.removeprefix(PULL_REFS).removesuffix("/head")
        if number.isdigit():
            heads[int(number)] = oid
            keys[int(number)] |= _keys_of(values)
    wanted = [p for p in pulls if p.number in heads]
    present = _present(scan, sorted({p.base_sha for p in wanted if p.base_sha}))
    tips_out = scan.git("for-each-ref", "--format=%(refname)%00%(objectname)", HEAD_REFS)[1]
    tips = {
        name.removeprefix(HEAD_REFS): oid
        for name, _, oid in (line.partition("\0") for line in tips_out.decode(errors="replace").splitlines())
    }
    by_base: dict[str, list[Pull]] = defaultdict(list)
    for pull in wanted:
        base = pull.base_sha if present.get(pull.base_sha) else tips.get(pull.base_ref)
        if base:
            by_base[base].append(pull)
    for base, members in sorted(by_base.items()):
        revs = "".join(f"{heads[p.number]}\n" for p in members) + f"^{base}\n"
        code, out, err = scan.git(
            "log",
            "--stdin",
            "--no-show-signature",
            f"--format=%x1e%H%x1f%P%x1f{_TRAILER_FORMAT}",
            input=revs.encode(),
        )
        if code != 0:
            raise FetchError(f"git log failed: {last_line(err)}")
        commits: dict[str, tuple[list[str], set[str]]] = {}
        for record in out.decode(errors="replace").split("\x1e"):
            parts = record.strip("\n").split("\x1f")
            if len(parts) == 3:
                commits[parts[0]] = (parts[1].split(), _keys_of(parts[2]))
        for pull in members:
            keys[pull.number] |= _walk(heads[pull.number], commits)
    return dict(keys), len(wanted)


def _walk(head: str, commits: Mapping[str, tuple[list[str], set[str]]]) -> set[str]:
    """Trailer keys of the commits reachable from ``head`` inside ``commits`` (at most 250 commits)."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = [head]
    while todo and len(seen) < MAX_PR_COMMITS:
        oid = todo.pop()
        if oid in seen or oid not in commits:
            continue
        seen.add(oid)
        parents, keys = commits[oid]
        found |= keys
        todo.extend(parents)
    return found


def read_trailers_api(ctx: GitHubContext, pulls: Sequence[Pull], limit: int) -> TrailerScan:
    """The fallback: list the commits of at most ``limit`` PRs through the API (open ones first)."""
    order = sorted(pulls, key=lambda p: (p.state != "open", -p.number))
    scan = TrailerScan("api")
    for pull in order[:limit]:
        messages = ctx.pull_commit_messages(pull.number)
        keys = set().union(*(message_trailer_keys(m) for m in messages)) if messages else set()
        if keys:
            scan.keys[pull.number] = keys
        scan.scanned += 1
    scan.skipped = max(0, len(order) - limit)
    if scan.skipped:
        scan.warnings.append(
            f"git could not fetch the pull requests, so commit trailers of only {scan.scanned} of "
            f"{len(order)} pull requests were read through the API (--commit-api-limit {limit}); run "
            "the audit where git can fetch the repository to read them all"
        )
    return scan


# -- the ledger ---------------------------------------------------------------------------------------


@dataclass
class LedgerView:
    entries: list[Entry]

    @property
    def keys(self) -> list[str]:
        return [e.key for e in self.entries]


def read_ledger(repo: GitRepo) -> LedgerView | None:
    """The ledger of ``repo``, or None when it has none."""
    from gitledger.git.store import LEDGER_REFS, GitStore

    if not any(repo.resolve(ref) for ref in LEDGER_REFS):
        return None
    return LedgerView(list(GitStore(repo).entries()))


def stuck_entries(ledger: LedgerView, held: Callable[[Event], bool]) -> list[dict[str, Any]]:
    """Entries left ``attempting`` by an owner that is gone or whose lease ran out."""
    stuck = []
    for entry in ledger.entries:
        folded = entry.folded
        if folded.corrupt or folded.state != ATTEMPTING or folded.claim is None:
            continue
        claim = folded.claim
        if held(claim):
            continue
        owner = claim.get("owner") or {}
        here = os.uname().nodename
        stuck.append(
            {
                "key": entry.key,
                "task": entry.field("task"),
                "step": entry.field("step"),
                "claimed_at": claim.get("at"),
                "lease_until": claim.get("lease_until"),
                "owner": {"host": owner.get("host"), "pid": owner.get("pid")},
                "reason": "owner is dead" if owner.get("host") == here else "lease expired",
            }
        )
    return stuck


def pull_number_of(ref: str, web_url: str, api_url: str, full_name: str) -> int | None:
    """The PR number when ``ref`` is a pull request URL of this repository (web or API form)."""
    text = ref.strip()
    forms = (f"{web_url}/pull/", f"{api_url}/repos/{full_name}/pulls/")
    for form in forms:
        if text.lower().startswith(form.lower()):
            match = re.match(r"^(\d+)(?:[/?#].*)?$", text[len(form) :])
            if match:
                return int(match[1])
    return None


def missing_refs(
    ledger: LedgerView, numbers: set[int], web_url: str, api_url: str, repo: str
) -> list[dict[str, Any]]:
    """``done`` entries whose ref is a PR of this repository that does not exist (a forged ``done``)."""
    missing = []
    for entry in ledger.entries:
        folded = entry.folded
        ref = folded.ref
        if folded.state != DONE or not isinstance(ref, str):
            continue
        number = pull_number_of(ref, web_url, api_url, repo)
        if number is not None and number not in numbers:
            missing.append(
                {
                    "key": entry.key,
                    "ref": ref,
                    "number": number,
                    "outcome": folded.done.get("outcome") if folded.done else None,
                    "reason": f"{repo} has no pull request #{number}",
                }
            )
    return missing


# -- closing duplicates -----------------------------------------------------------------------------------


def close_marker(group: Group, keep: Pull, closed: bool = False) -> str:
    who = group.key or group.digest
    return f"<!-- gitledger-audit:duplicate key={who} of=#{keep.number}{' closed' if closed else ''} -->"


def close_comment(group: Group, pull: Pull, keep: Pull) -> str:
    evidence = "; ".join(
        f"{item['kind']} `{item['value']}`" for item in group.evidence_json() if pull.number in item["prs"]
    )
    return (
        f"gitledger audit: this pull request duplicates #{keep.number}: both carry the same gitledger "
        f"key ({group.name}; evidence here: {evidence}). Closing it in favour of the oldest open pull "
        f"request of that key, #{keep.number}.\n\n"
        "If they are not duplicates, reopen this pull request: the audit will not close it again.\n\n"
        f"{close_marker(group, keep)}\n"
    )


def close_duplicates(ctx: GitHubContext, groups: Sequence[Group]) -> list[dict[str, Any]]:
    """Close every open PR of a group but the oldest open one, with one explanatory comment each.

    Idempotent: a PR already closed is not touched; the comment carries a marker and is never posted
    twice (a crash between comment and close is finished by the next run). After the close the marker
    is edited to say so, and a PR that carries a *closed* marker but is open again was reopened by a
    person: it is left open.
    """
    results = []
    for group in groups:
        keep = group.keep
        if len(group.pulls) < 2 or keep is None:
            continue
        for pull in list(group.pulls):
            if pull.state != "open" or pull.number == keep.number:
                continue
            result: dict[str, Any] = {"number": pull.number, "url": pull.url, "duplicate_of": keep.number}
            if group.ambiguous:
                results.append({**result, "result": "skipped", "reason": "ambiguous evidence"})
                continue
            try:
                outcome = _close_one(ctx, group, pull, keep)
            except GitledgerError as exc:
                results.append({**result, "result": "error", "reason": ctx.redact(exc.message)})
                continue
            results.append({**result, **outcome})
            if outcome["result"] == "closed":  # the report shows the state after this run
                group.pulls[group.pulls.index(pull)] = dataclasses.replace(pull, state="closed")
    return results


def _close_one(ctx: GitHubContext, group: Group, pull: Pull, keep: Pull) -> dict[str, Any]:
    from gitledger.github.client import describe

    try:
        issue = ctx.repo.get_issue(pull.number)
        ours = None
        for comment in issue.get_comments():
            match = CLOSE_MARKER_RE.search(comment.body or "")
            if match:
                ours = (comment, "closed" in match[1].split())
                break
        if ours is not None and ours[1]:
            return {"result": "kept", "reason": "reopened after the audit closed it"}
        posted = "existing"
        if ours is None:
            comment = issue.create_comment(close_comment(group, pull, keep))
            ours, posted = (comment, False), "posted"
        ctx.repo.get_pull(pull.number).edit(state="closed")
        body = ours[0].body or ""
        ours[0].edit(CLOSE_MARKER_RE.sub(close_marker(group, keep, closed=True), body, count=1))
    except Exception as exc:
        if not _github_failure(exc):
            raise
        raise GitledgerError(ctx.redact(f"cannot close #{pull.number}: {describe(exc)}")) from exc
    return {"result": "closed", "comment": posted}


def _github_failure(exc: BaseException) -> bool:
    import github
    from urllib3.exceptions import MaxRetryError

    return isinstance(exc, github.GithubException | OSError | MaxRetryError)


# -- the whole audit --------------------------------------------------------------------------------------


@dataclass
class AuditOptions:
    github_repo: str | None = None
    repo_path: Path | None = None
    close: bool = False
    trailers: str = "auto"
    commit_api_limit: int = DEFAULT_COMMIT_API_LIMIT
    env: Mapping[str, str] | None = None


@dataclass
class AuditReport:
    repository: str
    pulls: list[Pull]
    groups: list[Group]
    trailer_scan: TrailerScan
    api_calls: dict[str, Any]
    seconds: float
    ledger: LedgerView | None = None
    stuck: list[dict[str, Any]] | None = None
    unclaimed: list[Group] | None = None
    missing_refs: list[dict[str, Any]] | None = None
    closed: list[dict[str, Any]] | None = None
    warnings: list[str] = field(default_factory=list)
    redact: Callable[[str], str] = field(default=lambda text: text, repr=False)

    @property
    def duplicates(self) -> list[Group]:
        return [g for g in self.groups if len(g.pulls) > 1]

    @property
    def close_errors(self) -> list[dict[str, Any]]:
        return [r for r in self.closed or [] if r.get("result") == "error"]

    def to_json(self) -> dict[str, Any]:
        ledger_duplicates = None
        if self.ledger is not None:
            ledger_duplicates = [
                {"key": e.key, "created": e.folded.created} for e in self.ledger.entries if e.folded.duplicate
            ]
        return {
            "repository": self.repository,
            "pulls": len(self.pulls),
            "keyed_pulls": len({p.number for g in self.groups for p in g.pulls}),
            "groups": len(self.groups),
            "duplicates": [g.to_json() for g in self.duplicates],
            "stuck": self.stuck,
            "unclaimed": (
                None
                if self.unclaimed is None
                else [
                    {**{k: v for k, v in g.to_json().items() if k != "keep" and k != "ambiguous"}}
                    for g in self.unclaimed
                ]
            ),
            "missing_refs": self.missing_refs,
            "ledger_duplicates": ledger_duplicates,
            "closed": self.closed,
            "trailers": self.trailer_scan.to_json(),
            "api_calls": self.api_calls["total"],
            "api_calls_detail": self.api_calls,
            "seconds": round(self.seconds, 3),
            "warnings": self.warnings,
        }


def _origin_names(repo: GitRepo | None, full_name: str) -> str | None:
    """A remote URL of ``repo`` that names ``full_name`` (so its credentials and config apply)."""
    from gitledger.github.settings import parse_remote_url

    if repo is None:
        return None
    listed = repo.out("config", "--get-regexp", r"^remote\..*\.url$", check=False)
    for line in listed.splitlines():
        _, _, url = line.partition(" ")
        parsed = parse_remote_url(url)
        if parsed and parsed.lower() == full_name.lower():
            return url.strip()
    return None


def _clone_url(ctx: GitHubContext) -> str:
    from gitledger.github.settings import GitHubError

    try:
        _, data = ctx.repo.requester.requestJsonAndCheck("GET", ctx.repo.url)
    except Exception as exc:
        if _github_failure(exc):
            raise ctx.error(exc, "read the repository's clone URL") from exc
        raise
    url = data.get("clone_url") if isinstance(data, dict) else None
    if not isinstance(url, str) or not url:
        raise GitHubError(f"GitHub did not give a clone URL for {ctx.full_name}")
    return url


def list_pulls(ctx: GitHubContext) -> list[Pull]:
    """Every PR of the repository in all states, oldest first (1 call per 100 PRs)."""
    from gitledger.github.client import PullInfo

    pulls = []
    try:
        for pr in ctx.repo.get_pulls(state="all", sort="created", direction="asc"):
            info = PullInfo.of(pr)
            pulls.append(
                Pull(
                    number=info.number,
                    url=info.html_url,
                    state=info.status,
                    title=info.title,
                    body=info.body,
                    head_ref=info.head_ref,
                    base_ref=info.base_ref,
                    head_sha=pr.head.sha or "",
                    base_sha=pr.base.sha or "",
                    labels=info.labels,
                    created_at=info.created_at,
                )
            )
    except Exception as exc:
        if _github_failure(exc):
            raise ctx.error(exc, "list pull requests") from exc
        raise
    return pulls


def scan_trailers(
    ctx: GitHubContext, pulls: Sequence[Pull], ledger_repo: GitRepo | None, options: AuditOptions
) -> TrailerScan:
    if options.trailers == "none" or not pulls:
        return TrailerScan("none")
    problems: list[str] = []
    if options.trailers in ("auto", "git"):
        environ = os.environ if options.env is None else options.env
        try:
            url = _origin_names(ledger_repo, ctx.full_name) or _clone_url(ctx)
            extra = auth_env(url, ctx.settings.token, ctx.web_url(), environ)
            # The user's repository first (its credentials, and later audits fetch only what is new),
            # then a throw-away clone with the token (when there is a token to offer, or no choice).
            places: list[Callable[[], ScanRepo]] = []
            if ledger_repo is not None and can_take_refs(ledger_repo):
                places.append(lambda: ScanRepo(ledger_repo, url, {}))
            if not places or extra:
                places.append(lambda: temporary_scan_repo(url, extra))
        except (GitledgerError, OSError) as exc:
            problems.append(ctx.redact(str(exc)))
            places = []
        for place in places:
            scan_repo = None
            try:
                scan_repo = place()
                return fetch_and_read(scan_repo, pulls, ctx.redact)
            except (GitledgerError, OSError) as exc:
                problems.append(ctx.redact(str(exc)))
            finally:
                if scan_repo is not None:
                    scan_repo.close()
        if options.trailers == "git":
            raise GitledgerError(f"cannot read commit trailers with git: {'; '.join(problems)}")
    result = read_trailers_api(ctx, pulls, options.commit_api_limit)
    if problems:
        result.warnings.insert(0, f"reading trailers with git failed ({'; '.join(problems)}); used the API")
    return result


def run_audit(options: AuditOptions) -> AuditReport:
    """Scan the repository's PRs, group them by key, read the ledger, and close duplicates if asked."""
    from gitledger.session import Session

    if options.trailers not in TRAILER_SOURCES:
        raise UsageError(f"--trailers must be one of {', '.join(TRAILER_SOURCES)}, not {options.trailers!r}")
    if options.commit_api_limit < 0:
        raise UsageError("--commit-api-limit must be 0 or more")
    started = time.monotonic()
    environ = os.environ if options.env is None else options.env
    session = Session.discover(options.repo_path, options.github_repo, environ)
    try:
        git_repo = session.repo
        if (
            session.github_repo is None
            and session.config.github_repo is None
            and _origin_repo(git_repo) is None
        ):
            session.github_repo = environ.get("GITHUB_REPOSITORY") or None  # the GitHub Actions convention
        ctx = session.github()
        report = _audit(ctx, git_repo, session.config.names, options)
        report.api_calls = ctx.calls.as_dict()
        report.redact = ctx.redact
    finally:
        session.close()
    report.seconds = time.monotonic() - started
    return report


def _origin_repo(repo: GitRepo | None) -> str | None:
    from gitledger.github.settings import parse_remote_url

    if repo is None:
        return None
    proc = repo.run("remote", "get-url", "origin", check=False)
    return parse_remote_url(proc.stdout.decode(errors="replace")) if proc.returncode == 0 else None


def _audit(ctx: GitHubContext, git_repo: GitRepo | None, names: Names, options: AuditOptions) -> AuditReport:
    pulls = list_pulls(ctx)
    warnings: list[str] = []
    ledger = None
    if git_repo is not None:
        try:
            ledger = read_ledger(git_repo)
        except GitledgerError as exc:
            warnings.append(
                f"the ledger could not be read ({exc.message}); stuck, unclaimed and missing refs are "
                "not reported"
            )
    trailer_scan = scan_trailers(ctx, pulls, git_repo, options)
    warnings.extend(trailer_scan.warnings)
    evidence = {}
    for pull in pulls:
        found = pull_evidence(pull, trailer_scan.keys.get(pull.number, ()), names)
        if found:
            evidence[pull.number] = found
    groups = group_pulls(pulls, evidence)
    report = AuditReport(
        ctx.full_name, pulls, groups, trailer_scan, {}, 0.0, ledger=ledger, warnings=warnings
    )
    if ledger is not None and git_repo is not None:
        from gitledger.core.protocol import StepRunner
        from gitledger.git.store import GitStore

        report.stuck = stuck_entries(ledger, StepRunner(GitStore(git_repo)).held)
        match_ledger(groups, ledger.keys)
        report.unclaimed = [g for g in groups if not g.ledger_keys]
        report.missing_refs = missing_refs(
            ledger, {p.number for p in pulls}, ctx.web_url(), ctx.settings.api_url, ctx.full_name
        )
    if options.close:
        report.closed = close_duplicates(ctx, report.duplicates)
    return report


# -- output -----------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_summary(report: AuditReport) -> str:
    """The job summary (``$GITHUB_STEP_SUMMARY``): what was found, what was done, what it cost."""
    lines = [f"## gitledger audit: {report.repository}", ""]
    dups = report.duplicates
    lines.append(
        f"Scanned **{len(report.pulls)}** pull requests with **{report.api_calls.get('total', 0)}** API "
        f"calls (commit trailers via {report.trailer_scan.via}): **{len(dups)}** duplicate group(s)."
    )
    lines.append("")
    if dups:
        lines += ["### Duplicate pull requests", "", "| key | pull requests | evidence |", "|---|---|---|"]
        for group in dups:
            keep = group.keep
            prs = ", ".join(
                f"[#{p.number}]({p.url}) {p.state}" + (" (kept)" if keep and p.number == keep.number else "")
                for p in group.pulls
            )
            evidence = "; ".join(
                f"{e['kind']} `{e['value']}`: #{', #'.join(map(str, e['prs']))}"
                for e in group.evidence_json()
            )
            lines.append(f"| `{_cell(group.name)}` | {_cell(prs)} | {_cell(evidence)} |")
        lines.append("")
    if report.closed:
        lines += ["### Closed by this run", ""]
        for item in report.closed:
            what = {"closed": "closed", "kept": "left open", "skipped": "not closed", "error": "FAILED"}.get(
                item["result"], item["result"]
            )
            reason = f" ({item['reason']})" if item.get("reason") else ""
            lines.append(f"- #{item['number']}: {what}, duplicate of #{item['duplicate_of']}{reason}")
        lines.append("")
    for title, rows in (
        ("Stuck steps", report.stuck),
        ("Ledger refs to missing pull requests", report.missing_refs),
    ):
        if rows:
            lines += [f"### {title}", ""]
            for row in rows:
                detail = row.get("reason", "")
                lines.append(f"- `{row['key']}`: {detail}")
            lines.append("")
    if report.unclaimed:
        lines += ["### Pull requests with a key the ledger never recorded", ""]
        for group in report.unclaimed:
            lines.append(f"- `{group.name}`: " + ", ".join(f"[#{p.number}]({p.url})" for p in group.pulls))
        lines.append("")
    for warning in report.warnings:
        lines.append(f"> **Warning:** {warning}")
    return report.redact("\n".join(lines).rstrip() + "\n\n")


def write_step_summary(report: AuditReport, environ: Mapping[str, str]) -> Path | None:
    """Append the Markdown summary to ``$GITHUB_STEP_SUMMARY`` when it is set (as GitHub does)."""
    target = environ.get("GITHUB_STEP_SUMMARY", "").strip()
    if not target:
        return None
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(markdown_summary(report))
    except OSError as exc:
        raise GitledgerError(f"cannot write GITHUB_STEP_SUMMARY {path}: {exc.strerror}") from exc
    return path


__all__ = [
    "AuditOptions",
    "AuditReport",
    "Evidence",
    "Group",
    "Ident",
    "Pull",
    "TrailerScan",
    "branch_ident",
    "close_duplicates",
    "group_pulls",
    "label_ident",
    "markdown_summary",
    "match_ledger",
    "message_trailer_keys",
    "pull_evidence",
    "run_audit",
    "write_step_summary",
]
