"""Closing duplicate pull requests, one explanatory comment each, idempotently."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gitledger.core.errors import GitledgerError
from gitledger.core.keys import (
    KEY_RE,
)
from gitledger.features.audit.evidence import Group, Pull

if TYPE_CHECKING:
    from gitledger.github.port import GitHubClient


_KEY_BODY = KEY_RE.pattern.removeprefix("^").removesuffix("$")
CLOSE_MARKER_RE = re.compile(r"<!--\s*gitledger-audit:duplicate\b([^>]*?)\s*-->")


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


def close_duplicates(client: GitHubClient, groups: Sequence[Group]) -> list[dict[str, Any]]:
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
                outcome = _close_one(client, group, pull, keep)
            except GitledgerError as exc:
                results.append({**result, "result": "error", "reason": client.redact(exc.message)})
                continue
            results.append({**result, **outcome})
            if outcome["result"] == "closed":  # the report shows the state after this run
                group.pulls[group.pulls.index(pull)] = dataclasses.replace(pull, state="closed")
    return results


def _close_one(client: GitHubClient, group: Group, pull: Pull, keep: Pull) -> dict[str, Any]:
    ours = None
    for comment in client.comments(pull.number):
        match = CLOSE_MARKER_RE.search(comment.body)
        if match:
            ours = (comment, "closed" in match[1].split())
            break
    if ours is not None and ours[1]:
        return {"result": "kept", "reason": "reopened after the audit closed it"}
    posted = "existing"
    if ours is None:
        ours, posted = (client.create_comment(pull.number, close_comment(group, pull, keep)), False), "posted"
    client.close_pull(pull.number)
    client.edit_comment(
        ours[0].id, CLOSE_MARKER_RE.sub(close_marker(group, keep, closed=True), ours[0].body, count=1)
    )
    return {"result": "closed", "comment": posted}
