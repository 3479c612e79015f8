"""Stable idempotency keys and the names derived from them.

A key is a pure function of (task id, step name, content): the same inputs give the same key in any
process, on any machine, after any restart. It is never random and never time based.

``digest = sha256(canonical encoding of ("gitledger/1", task, step, content kind, content))``

Task and step names are put in Unicode NFC first (:func:`normalize_name`): the NFC and NFD spellings of
a name give one key; ASCII names are unchanged. Content is hashed as given (it is data, not a name).

and the key is ``<task-slug>.<step-slug>.<first 24 hex digits of the digest>``. The slugs only make the
key readable; the digest alone makes it unique (the full task and step text is hashed). Content is one
of: text (``--content``), a file's bytes (``--content-file``; the same bytes as the text give the same
key), or named arguments encoded as canonical JSON (sorted keys, no whitespace), so argument order
never changes the key.

Derived names, all deterministic from the key:

- branch: ``<branch prefix><task-slug>/<step-slug>-<digest[:12]>`` (valid for ``git check-ref-format``)
- label: ``<label prefix><digest[:24]>`` (GitHub allows 50 characters; at least 16 hex digits are kept)
- trailer: ``Gitledger-Key: <key>``
- marker: ``<!-- gitledger:<key> -->`` for PR bodies and comments
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from gitledger.core.errors import UsageError

SCHEME = "gitledger/1"
KEY_DIGEST_LEN = 24
BRANCH_DIGEST_LEN = 12
MIN_LABEL_DIGEST = 16
MAX_LABEL_LEN = 50
MAX_BRANCH_PREFIX = 100
MAX_NAME_LEN = 1024
SLUG_LEN = 32
DEFAULT_BRANCH_PREFIX = "gitledger/"
DEFAULT_LABEL_PREFIX = "gitledger:"
TRAILER_TOKEN = "Gitledger-Key"

KEY_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*\.[a-z0-9][a-z0-9_-]*\.[0-9a-f]{24}$")
_SLUG_DROP = re.compile(r"[^a-z0-9_]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def normalize_name(value: str) -> str:
    """A task or step name in Unicode NFC, the form keys are computed from.

    "é" typed as one code point (NFC, what keyboards send) or as "e" + a combining accent (NFD, what
    macOS file names and some tools produce) is one name and must give one key. ASCII names are
    unchanged. Text that cannot be normalised (lone surrogates from non-UTF-8 bytes) is returned as
    it is, for :func:`validate_name` to refuse.
    """
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value
    return unicodedata.normalize("NFC", value)


def has_control(value: str) -> bool:
    """Whether ``value`` holds a control character (C0, DEL or C1: a newline, a tab, an escape)."""
    return _CONTROL.search(value) is not None


def require_printable(value: str, what: str) -> str:
    """``value``, refused with one usage line when it holds a control character."""
    if has_control(value):
        raise UsageError(f"{what} {value!r} contains a control character; use printable text only")
    return value


def validate_name(value: str, what: str) -> str:
    """Reject empty names and control characters; return the name unchanged otherwise."""
    if not value or not value.strip():
        raise UsageError(f"{what} must not be empty; pass a stable, human-chosen {what} name")
    require_printable(value, what)
    if len(value) > MAX_NAME_LEN:
        raise UsageError(f"{what} is {len(value)} characters long; keep it under {MAX_NAME_LEN}")
    utf8(value, what)
    return value


def utf8(value: str, what: str) -> bytes:
    """``value`` as UTF-8; a clean error for text that has no UTF-8 form (e.g. argv bytes that were not
    UTF-8, which Python hands over as lone surrogates)."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what} {value!r} is not valid UTF-8 text; pass it as UTF-8") from exc


def slug(value: str, fallback: str) -> str:
    """A short lowercase ASCII slug for humans; never used for uniqueness."""
    ascii_text = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode("ascii")
    text = _SLUG_DROP.sub("-", ascii_text.lower()).strip("-_")
    text = text[:SLUG_LEN].strip("-_")
    return text or fallback


def _canonical_value(value: Any, path: str) -> Any:
    """Check that ``value`` has one canonical JSON encoding and return it unchanged."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UsageError(f"argument {path} is {value!r}; NaN and infinity have no stable hash")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise UsageError(
                    f"argument {path} has a non-string key {k!r}; use string keys for stable hashing"
                )
            out[k] = _canonical_value(v, f"{path}.{k}")
        return out
    if isinstance(value, list | tuple):
        return [_canonical_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise UsageError(
        f"argument {path} of type {type(value).__name__} cannot be hashed canonically; "
        "pass JSON-like values (str, int, float, bool, None, list, dict) or exclude the argument"
    )


def canonical_json(value: Any, name: str = "args") -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8, finite numbers only.

    ``name`` is how errors refer to ``value`` (e.g. the function argument it came from).
    """
    checked = _canonical_value(value, name)
    text = json.dumps(checked, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return utf8(text, name)


@dataclass(frozen=True)
class Content:
    """What a step is about: raw bytes (text or a file) or canonical JSON arguments."""

    kind: str  # "bytes", "args" or "key"
    data: bytes

    @classmethod
    def text(cls, text: str) -> Content:
        """Text as UTF-8. Command-line bytes that are not UTF-8 arrive as lone surrogates
        (surrogateescape) and are hashed as those original bytes, like ``--content-file`` would."""
        try:
            return cls("bytes", text.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError as exc:
            raise UsageError("content is not valid text (it holds lone surrogates); pass UTF-8") from exc

    @classmethod
    def raw(cls, data: bytes) -> Content:
        return cls("bytes", data)

    @classmethod
    def args(cls, args: Mapping[str, Any]) -> Content:
        return cls("args", canonical_json(dict(args)))

    @classmethod
    def explicit_key(cls, key: str) -> Content:
        """A caller-chosen idempotency key; the payload is then compared by fingerprint instead."""
        return cls("key", utf8(key, "key"))

    @classmethod
    def empty(cls) -> Content:
        return cls("bytes", b"")


def _frame(part: bytes) -> bytes:
    return str(len(part)).encode("ascii") + b":" + part


def compute_digest(task: str, step: str, content: Content) -> str:
    h = hashlib.sha256()
    for part in (SCHEME.encode(), task.encode(), step.encode(), content.kind.encode()):
        h.update(_frame(part))
    h.update(_frame(hashlib.sha256(content.data).digest()))
    return h.hexdigest()


def branch_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid branch name (the rules of ``git check-ref-format --branch``), or None."""
    if not name or name == "@":
        return "empty or '@'"
    if name.startswith("-"):
        return "starts with '-'"
    if name.startswith("/") or name.endswith("/") or "//" in name:
        return "a leading, trailing or doubled '/'"
    if ".." in name or "@{" in name or name.endswith("."):
        return "'..', '@{' or a trailing '.'"
    if re.search(r"[\x00-\x20\x7f~^:?*\[\\]", name):
        return "a space, control character or one of ~ ^ : ? * [ \\"
    for part in name.split("/"):
        if part.startswith(".") or part.endswith(".lock"):
            return f"component {part!r} starts with '.' or ends with '.lock'"
    return None


@dataclass(frozen=True)
class Names:
    """Prefixes for derived names; from ``.gitledger.yml`` or the defaults."""

    branch_prefix: str = DEFAULT_BRANCH_PREFIX
    label_prefix: str = DEFAULT_LABEL_PREFIX

    def __post_init__(self) -> None:
        require_printable(self.label_prefix, "label prefix")  # a tab or newline in a GitHub label
        if len(self.label_prefix) > MAX_LABEL_LEN - MIN_LABEL_DIGEST:
            raise UsageError(
                f"label prefix {self.label_prefix!r} is too long; GitHub labels hold 50 characters "
                f"and the key needs {MIN_LABEL_DIGEST}: use at most "
                f"{MAX_LABEL_LEN - MIN_LABEL_DIGEST} characters"
            )
        if self.branch_prefix and not re.fullmatch(r"[A-Za-z0-9._/-]*", self.branch_prefix):
            raise UsageError(f"branch prefix {self.branch_prefix!r} may only use letters, digits and . _ / -")
        if len(self.branch_prefix) > MAX_BRANCH_PREFIX:
            raise UsageError(
                f"branch prefix {self.branch_prefix!r} is too long; use at most {MAX_BRANCH_PREFIX} "
                "characters"
            )
        # Slugs and digests are [a-z0-9_-] and start with a letter or digit, so a branch is a valid
        # branch name exactly when this sample is.
        problem = branch_name_problem(f"{self.branch_prefix}task/step-{'0' * BRANCH_DIGEST_LEN}")
        if problem:
            raise UsageError(
                f"branch prefix {self.branch_prefix!r} makes invalid branch names ({problem}); "
                "use e.g. 'gitledger/' or 'agent/'"
            )


class DerivedNames:
    """The names derived from ``self.key`` with ``self.names`` (shared by StepKey and KeyRef)."""

    if TYPE_CHECKING:

        @property
        def key(self) -> str: ...

        names: Names

    @property
    def branch(self) -> str:
        return branch_for(self.key, self.names)

    @property
    def label(self) -> str:
        return label_for(self.key, self.names)

    @property
    def trailer(self) -> str:
        return trailer_for(self.key)

    @property
    def marker(self) -> str:
        return marker_for(self.key)


@dataclass(frozen=True)
class StepKey(DerivedNames):
    """A step's identity: the inputs and everything derived from them."""

    task: str
    step: str
    digest: str
    names: Names = Names()

    @classmethod
    def derive(
        cls, task: str, step: str, content: Content | None = None, names: Names | None = None
    ) -> StepKey:
        task, step = normalize_name(task), normalize_name(step)
        validate_name(task, "task")
        validate_name(step, "step")
        digest = compute_digest(task, step, content or Content.empty())
        return cls(task, step, digest, names or Names())

    @cached_property  # read several times per step; the slugs cost a Unicode normalisation each
    def key(self) -> str:
        return f"{slug(self.task, 'task')}.{slug(self.step, 'step')}.{self.digest[:KEY_DIGEST_LEN]}"

    @property
    def short_digest(self) -> str:
        return self.digest[:KEY_DIGEST_LEN]

    def as_dict(self) -> dict[str, str]:
        return {
            "key": self.key,
            "task": self.task,
            "step": self.step,
            "digest": self.digest,
            "branch": self.branch,
            "label": self.label,
            "trailer": self.trailer,
            "marker": self.marker,
        }


@dataclass(frozen=True)
class KeyRef(DerivedNames):
    """A key known only by its text (from a trailer or a label), with the names derived from it."""

    key: str
    names: Names = Names()


def _key_parts(key: str) -> tuple[str, str, str]:
    task_slug, step_slug, digest = key.split(".")
    return task_slug, step_slug, digest


def branch_for(key: str, names: Names | None = None) -> str:
    """The convention branch of a key (derived from the key alone, so hooks can compute it)."""
    task_slug, step_slug, digest = _key_parts(key)
    prefix = (names or Names()).branch_prefix
    return f"{prefix}{task_slug}/{step_slug}-{digest[:BRANCH_DIGEST_LEN]}"


def label_for(key: str, names: Names | None = None) -> str:
    """The GitHub label of a key: the prefix plus as many digest digits as fit (at least 16)."""
    prefix = (names or Names()).label_prefix
    digest = _key_parts(key)[2]
    return prefix + digest[: min(MAX_LABEL_LEN - len(prefix), KEY_DIGEST_LEN)]


def trailer_for(key: str) -> str:
    return f"{TRAILER_TOKEN}: {key}"


def marker_for(key: str) -> str:
    return f"<!-- gitledger:{key} -->"


def parse_key(text: str) -> str:
    """Validate a key given by a user (``show KEY``) and return it."""
    key = text.strip()
    if not KEY_RE.match(key):
        raise UsageError(
            f"{text!r} is not a gitledger key; keys look like 'task.step.<24 hex digits>' "
            "(see 'gitledger list')"
        )
    return key


def key_digest(key: str) -> str:
    """The digest prefix embedded in a key."""
    return key.rsplit(".", 1)[1]
