"""The near-duplicate rules of the agent guard, shown on a paraphrase corpus (gitledger.core.similarity).

Each row is a pair an agent could produce: a reworded retry of the same intent (must match at the
threshold named) or a different intent (must not). The thresholds are documented in the module.
"""

from __future__ import annotations

import pytest

from gitledger.core.similarity import (
    REALITY,
    SAME_INTENT,
    SETTLE,
    features,
    near_duplicate,
    normalise_text,
    similarity,
)

# (first call, reworded retry) — an LLM restarted after a crash writing the same comment/issue again.
PARAPHRASES = [
    ("Fix login crash when password is empty", "Resolve the crash on login with an empty password"),
    ("Flaky test in scheduler", "Scheduler tests fail intermittently"),
    ("Tests pass on the branch; ready for review.", "All tests are green now, this is ready to be reviewed."),
    ("I pushed a fix for the timeout in fetch_all().", "Pushed a change that fixes the fetch_all() timeout."),
    ("Crash in parser.py on empty input", "parser.py crashes when given empty input"),
    ("Memory leak in the cache layer", "The cache layer leaks memory"),
    ("Add retry logic to the uploader", "Implement retries in the uploader"),
    ("Update the README with install steps", "Documentation: install steps added to the readme"),
    ("CI fails on Python 3.13", "The build is broken on python 3.13"),
    ("Remove the deprecated config loader", "Delete deprecated loader for config"),
    (
        "I investigated the failure: the fixture leaks a temp dir. Fixed in abc1234.",
        "Looked into the failing test: a temp dir leaked from the fixture; fix is commit abc1234.",
    ),
    (
        "Closes #42. Adds pagination to the users endpoint and tests for it.",
        "This adds pagination to the users endpoint (with tests) and closes #42.",
    ),
    ("LGTM, merging after CI passes", "Looks good to me - will merge once CI is green"),
    (
        "$(cat <<'EOF'\nThe timeout is raised to 30 s in client.py.\nEOF\n)",
        "Raised the timeout in client.py to 30 s.",
    ),
]

# Pairs that are different intents, even from the same agent on the same target.
DIFFERENT = [
    ("Crash in parser.py on empty input", "Crash in lexer.py on empty input"),
    ("Fixes #41", "Fixes #42"),
    ("CI is green, merging tomorrow", "Deployment docs need an update"),
    ("Add retry logic to the uploader", "Remove the deprecated config loader"),
    ("Flaky test in scheduler", "Flaky test in parser"),
    ("Bump requests to 2.32", "Bump urllib3 to 2.2"),
    ("Ready for review", "Found a regression in the export job, investigating"),
]


@pytest.mark.parametrize(("first", "retry"), PARAPHRASES)
def test_a_reworded_retry_by_the_same_task_is_the_same_intent(first: str, retry: str) -> None:
    assert near_duplicate(first, retry, SAME_INTENT), (
        similarity(first, retry),
        features(first),
        features(retry),
    )


@pytest.mark.parametrize(("first", "other"), DIFFERENT)
def test_a_different_intent_is_not_a_duplicate_against_github(first: str, other: str) -> None:
    assert not near_duplicate(first, other, REALITY), similarity(first, other)


@pytest.mark.parametrize(
    ("first", "other"),
    [d for d in DIFFERENT if d[0] != "Flaky test in scheduler"],
)
def test_a_different_intent_is_not_a_duplicate_even_within_the_task(first: str, other: str) -> None:
    assert not near_duplicate(first, other, SAME_INTENT), similarity(first, other)


def test_the_thresholds_are_ordered() -> None:
    assert 0 < SAME_INTENT < REALITY < SETTLE <= 1


def test_within_a_task_a_one_word_difference_is_a_rewording_but_not_against_github() -> None:
    # the documented trade-off: same task + same target is lenient, unattributed text is strict
    assert near_duplicate("Flaky test in scheduler", "Flaky test in parser", SAME_INTENT)
    assert not near_duplicate("Flaky test in scheduler", "Flaky test in parser", REALITY)


def test_the_exact_text_a_crashed_call_sent_is_found_despite_github_whitespace() -> None:
    sent = "Tests pass.\r\nReady for review.  "
    assert near_duplicate(sent, "Tests pass.\nReady for review.", SETTLE)
    assert not near_duplicate(sent, "Tests fail. Not ready.", SETTLE)


def test_normalisation() -> None:
    assert normalise_text("  **Fixed** the [parser](http://x/y)!\n\n") == "fixed the parser"
    assert normalise_text("$(cat <<'EOF'\nHello World\nEOF\n)") == "hello world"
    assert features("Call fetchAll in utils.py #12").identifiers == {"fetchall", "utils.py", "12"}


def test_empty_texts() -> None:
    assert near_duplicate("", "")
    assert not near_duplicate("", "something", SAME_INTENT)
    assert similarity("the a of", "and or") == 0.0
