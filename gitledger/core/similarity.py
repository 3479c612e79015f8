"""Near-duplicate text: is a reworded comment body or issue title the same intent as one already posted?

An agent that restarts after a crash regenerates its tool calls, and a language model rewords its
prose every time (docs/agents.md, "The LLM-argument problem"). A content hash over the text then
gives a new key and a second comment. The agent guard therefore keys a comment on (task, target) and
an issue on (task, repository), and uses this module to decide whether the text of a new call says
the same thing as a text already recorded or found on GitHub.

The test is deliberately simple, deterministic and explainable (no model, no corpus statistics):

1. :func:`normalise_text`: Unicode NFKC, case-folded, markdown links reduced to their text, a shell
   here-document wrapper (``$(cat <<'EOF' … EOF)``) removed, punctuation dropped, whitespace collapsed.
2. :func:`features` splits the normalised text into *identifiers* — words holding a digit or one of
   ``_ . / # :`` inside (``parser.py``, ``#118``, ``v2.1``, ``snake_case``), or written in camelCase in
   the original — and *content stems*: the other words minus stop words, stemmed by stripping a few
   English suffixes and mapped through a small table of synonyms that rewording swaps
   (``fix/resolve/repair``, ``bug/issue/problem``, ``flaky/intermittent`` …, see :data:`SYNONYMS`).
3. :func:`similarity` is the cosine of the two sets of content stems and identifiers
   (``|A ∩ B| / sqrt(|A|·|B|)``), between 0 and 1.
4. :func:`near_duplicate`: equal normalised texts are duplicates; texts that both name identifiers
   and share none are **not** (a rewording keeps the names of what it is about: another file, number
   or function is another intent); otherwise the similarity must reach the threshold.

Thresholds (:data:`THRESHOLDS`), chosen on the paraphrase corpus in tests/test_agent_similarity.py:

``same_intent`` 0.30
    A new call compared with the text this *same task* recorded for the *same target* (its own
    earlier comment on that PR, its own earlier issue in that repository). Rewording by the same task
    is the expected case here, a second, different comment by the same task on the same target the
    rare one, so the bar is low.
``reality`` 0.70
    A new call compared with texts found on GitHub that the ledger cannot attribute to this task
    (comments by the token's user on the target, issues by that user): a higher bar, so that another
    task's comment on the same PR is not mistaken for this one.
``settle`` 0.90
    A claim left open by a crash names the exact text the killed call sent; finding that effect on
    GitHub only has to allow for the whitespace and line endings GitHub normalises.

Pure standard library: no I/O, no third-party import.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

SAME_INTENT = 0.30
REALITY = 0.70
SETTLE = 0.90
THRESHOLDS = {"same_intent": SAME_INTENT, "reality": REALITY, "settle": SETTLE}

# Common English function words, and the words agents put around every comment ("please", "thanks").
_STOPWORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves also still yet via per etc ie eg
    please thanks thank kindly hi hello hey note noted fyi ok okay just now here
    pr pull request requests comment commit commits change changes this
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())

# Groups of words that rewording swaps for each other; each maps to the group's first word.
_SYNONYM_GROUPS = (
    "fix fixed fixes fixing resolve resolved resolves repair repaired correct corrected address "
    "addressed patch patched solve solved",
    "bug bugs issue issues problem problems defect defects error errors fault faults glitch",
    "crash crashes crashed crashing panic panics segfault abort aborts",
    "add adds added adding introduce introduces introduced implement implements implemented create "
    "creates created support supports",
    "update updates updated updating change modify modifies modified adjust adjusts adjusted tweak "
    "revise revised bump bumps bumped",
    "remove removes removed removing delete deletes deleted drop drops dropped eliminate",
    "test tests tested testing spec specs unittest unittests",
    "fail fails failed failing failure failures break breaks broke broken breaking",
    "flaky flakiness intermittent intermittently sporadic sporadically unstable nondeterministic",
    "doc docs documentation document documents documented readme",
    "slow slowness sluggish latency",
    "improve improves improved improvement enhance enhances enhanced optimize optimise optimized "
    "speed faster",
    "refactor refactors refactored refactoring restructure restructured cleanup tidy",
    "pass passes passed passing green succeed succeeds succeeded",
    "done complete completed finished ready",
    "ci pipeline pipelines build builds workflow workflows",
    "login logins signin authentication auth",
    "review reviewed reviewing feedback",
    "investigate investigated investigating look looked looking check checked checking",
    "timeout timeouts timing hang hangs hung stall stalls",
    "memory leak leaks leaking oom",
    "dependency dependencies deps dependence package packages",
)
SYNONYMS: dict[str, str] = {}
for _group in _SYNONYM_GROUPS:
    _words = _group.split()
    for _word in _words:
        SYNONYMS.setdefault(_word, _words[0])

_SUFFIXES = ("ingly", "ings", "ing", "edly", "ed", "es", "s", "ly")
_HEREDOC = re.compile(r"^\$\(\s*cat\s+<<-?\s*['\"]?(\w+)['\"]?\s*\n(?P<body>.*)\n\s*\1\s*\)\s*$", re.S)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_CAMEL = re.compile(r"\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b")
_WORD = re.compile(r"[\w][\w./#:-]*[\w]|[\w]")
_INNER_MARK = re.compile(r"[\d_./#:]")


def unwrap_heredoc(text: str) -> str:
    """The text of a ``$(cat <<'EOF' … EOF)`` wrapper (how agents pass multi-line bodies to ``gh``)."""
    match = _HEREDOC.match(text.strip())
    return match.group("body") if match else text


def normalise_text(text: str) -> str:
    """The comparable form of a text: see the module documentation, step 1."""
    text = unicodedata.normalize("NFKC", unwrap_heredoc(text)).replace("\r\n", "\n")
    text = _MD_LINK.sub(r"\1", text).casefold()
    words = [w.strip(".:-/#") for w in _WORD.findall(text)]
    return " ".join(w for w in words if w)


def _stem(word: str) -> str:
    if word in SYNONYMS:
        return SYNONYMS[word]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            return SYNONYMS.get(base, base)
    return word


@dataclass(frozen=True)
class Features:
    """What a text is about: identifiers it names and content stems it uses."""

    identifiers: frozenset[str]
    stems: frozenset[str]


def features(text: str) -> Features:
    camel = {w.casefold() for w in _CAMEL.findall(unicodedata.normalize("NFKC", text))}
    identifiers: set[str] = set()
    stems: set[str] = set()
    for word in normalise_text(text).split():
        if word in camel or _INNER_MARK.search(word):
            identifiers.add(word.lstrip("#"))
        elif word not in STOPWORDS and len(word) > 1:
            stems.add(_stem(word))
    return Features(frozenset(identifiers), frozenset(stems - STOPWORDS))


def similarity(a: str, b: str) -> float:
    """Cosine of the two texts' sets of content stems and identifiers (0 when either has none)."""
    fa, fb = features(a), features(b)
    sa, sb = fa.stems | fa.identifiers, fb.stems | fb.identifiers
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / math.sqrt(len(sa) * len(sb))


def near_duplicate(a: str, b: str, threshold: float = REALITY) -> bool:
    """Do ``a`` and ``b`` say the same thing? (module documentation, step 4)."""
    na, nb = normalise_text(a), normalise_text(b)
    if na == nb:
        return True
    fa, fb = features(a), features(b)
    if fa.identifiers and fb.identifiers and not fa.identifiers & fb.identifiers:
        return False
    return similarity(a, b) >= threshold


__all__ = [
    "REALITY",
    "SAME_INTENT",
    "SETTLE",
    "STOPWORDS",
    "SYNONYMS",
    "THRESHOLDS",
    "Features",
    "features",
    "near_duplicate",
    "normalise_text",
    "similarity",
    "unwrap_heredoc",
]
