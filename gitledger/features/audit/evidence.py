"""Pull requests and the evidence that ties them to keys (marker, trailer, label, branch), and groups."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gitledger.core.keys import (
    BRANCH_DIGEST_LEN,
    DEFAULT_BRANCH_PREFIX,
    DEFAULT_LABEL_PREFIX,
    KEY_DIGEST_LEN,
    KEY_RE,
    MAX_LABEL_LEN,
    Names,
)

if TYPE_CHECKING:
    pass

EVIDENCE_ORDER = ("marker", "trailer", "label", "branch")

_KEY_BODY = KEY_RE.pattern.removeprefix("^").removesuffix("$")
MARKER_RE = re.compile(r"<!--\s*gitledger:(" + _KEY_BODY + r")\s*-->")
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
