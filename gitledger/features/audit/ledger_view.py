"""What the ledger says next to GitHub: stuck entries and refs to pull requests that do not exist."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitledger.core.events import ATTEMPTING, DONE, Entry, Event
from gitledger.git.repo import GitRepo

if TYPE_CHECKING:
    pass


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
