"""The MCP proxy's guarding logic without the SDK: ProxyGuard on an in-memory ledger, an in-process
upstream that behaves like the GitHub MCP server's tools (wire-form results), and the real profile."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gitledger import config as config_mod
from gitledger.core.errors import ConfigError
from gitledger.core.owner import Owner
from gitledger.core.protocol import Claim
from gitledger.core.store import MemoryStore
from gitledger.features.proxy.guard import ProxyGuard, ToolInfo, UpstreamError
from gitledger.features.proxy.profiles import resolve_profile

PROFILES = Path(__file__).resolve().parent.parent / "gitledger" / "mcp" / "profiles"
PR = {"owner": "Acme", "repo": "widgets", "head": "agent/x", "base": "main"}
TOOLS = [
    ToolInfo("create_pull_request", False, False, ("owner", "repo", "title", "head", "base"), True),
    ToolInfo("list_pull_requests", True),
    ToolInfo("add_issue_comment", False, False, ("owner", "repo", "issue_number", "body"), True),
    ToolInfo("get_issue_comments", True),
    ToolInfo("set_topic", False, True),
    ToolInfo("send_note", False, False, ("text",)),
]


class Upstream:
    """In-process stand-in for the upstream server: keeps pull requests and comments, counts calls."""

    def __init__(self) -> None:
        self.pulls: list[dict[str, Any]] = []
        self.comments: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.fail: str | None = None
        self.lose: str | None = None

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(name)
        if name == self.lose:
            raise UpstreamError(-32000, "Connection closed", unknown=True)
        if name == self.fail:
            return {"content": [{"type": "text", "text": "502 Bad Gateway"}], "isError": True}
        if name == "create_pull_request":
            made = {"number": len(self.pulls) + 1, "url": f"https://gh/pull/{len(self.pulls) + 1}"}
            self.pulls.append(
                {
                    **made,
                    "html_url": made["url"],
                    "head": {"ref": arguments["head"]},
                    "base": {"ref": arguments["base"]},
                    "state": "open",
                    "title": arguments["title"],
                }
            )
            return {"content": [{"type": "text", "text": json.dumps(made)}], "structuredContent": made}
        if name == "list_pull_requests":
            return {"content": [{"type": "text", "text": json.dumps(self.pulls)}]}
        if name == "add_issue_comment":
            made = {"id": len(self.comments) + 1, "url": f"https://gh/c/{len(self.comments) + 1}"}
            self.comments.append({**made, "html_url": made["url"], "body": arguments["body"]})
            return {"content": [{"type": "text", "text": json.dumps(made)}], "structuredContent": made}
        if name == "get_issue_comments":
            return {"content": [{"type": "text", "text": json.dumps(self.comments)}]}
        return {"content": [{"type": "text", "text": "ok"}]}


def make_guard(
    store: MemoryStore | None = None, task: str | None = "T-1", owner: Owner | None = None
) -> ProxyGuard:
    profile = resolve_profile("github", PROFILES, config_mod.Config())
    guard = ProxyGuard(store or MemoryStore(), profile, task=task, owner=owner)
    guard.set_tools(TOOLS)
    return guard


def test_what_is_guarded() -> None:
    guard = make_guard()
    assert guard.rule_for("create_pull_request") is not None  # profile rule
    assert guard.rule_for("update_issue") is None  # profile: guard false
    assert guard.rule_for("list_pull_requests") is None  # readOnlyHint
    assert guard.rule_for("set_topic") is None  # idempotentHint
    assert guard.rule_for("send_note") is not None  # a write with no profile rule
    assert guard.rule_for("never_listed") is not None  # unknown: guarded by default


def test_replay_keeps_structured_content_and_marks_meta() -> None:
    guard, up = make_guard(), Upstream()
    first = guard.handle("create_pull_request", {**PR, "title": "a"}, up)
    again = guard.handle("create_pull_request", {**PR, "owner": "acme ", "title": "b, reworded"}, up)
    assert first.status == "created" and again.status == "replayed"
    assert first.result is not None and again.result is not None
    assert (
        again.result["structuredContent"]
        == first.result["structuredContent"]
        == {"number": 1, "url": "https://gh/pull/1"}
    )
    assert again.result["_meta"]["io.gitledger/replayed"] is True
    assert up.calls == ["list_pull_requests", "create_pull_request"]


def test_claim_of_a_dead_owner_and_the_effect_found_gives_a_built_result() -> None:
    store, up = MemoryStore(), Upstream()
    dead = dataclasses.replace(Owner.current(), pid=2**22 + 12345, start="1", session="gone")
    crashed = make_guard(store, owner=dead)
    claimed = crashed.runner.start(crashed.step_key("create_pull_request", {**PR, "title": "a"}), [])
    assert isinstance(claimed, Claim)  # a Claim: the dead owner "acted" and never recorded
    up.call_tool("create_pull_request", {**PR, "title": "a"})
    reply = make_guard(store).handle("create_pull_request", {**PR, "title": "other words"}, up)
    assert reply.status == "already_existed" and reply.result is not None
    assert reply.result["structuredContent"]["number"] == 1
    assert reply.result["structuredContent"]["url"] == "https://gh/pull/1"
    assert up.calls.count("create_pull_request") == 1


@pytest.mark.parametrize("first, again", [("agent/x", "ACME:agent/x"), ("acme:agent/x", "agent/x")])
def test_a_head_spelled_with_its_repositorys_owner_is_the_same_pull_request(first: str, again: str) -> None:
    """GitHub reads head "acme:agent/x" in a repository of acme as the branch "agent/x": a retry that
    spells it the other way is the same pull request (profile option ``owner_prefix``)."""
    guard, up = make_guard(), Upstream()
    assert guard.handle("create_pull_request", {**PR, "head": first, "title": "a"}, up).status == "created"
    reply = guard.handle("create_pull_request", {**PR, "head": again, "title": "b"}, up)
    assert reply.status == "replayed"
    assert up.calls.count("create_pull_request") == 1


def test_a_head_of_another_owner_is_another_pull_request() -> None:
    guard, up = make_guard(), Upstream()
    assert guard.handle("create_pull_request", {**PR, "title": "a"}, up).status == "created"
    fork = guard.handle("create_pull_request", {**PR, "head": "someone:agent/x", "title": "a"}, up)
    assert fork.status == "created"  # a fork's branch of the same name
    assert up.calls.count("create_pull_request") == 2


def test_an_effect_made_before_a_crash_is_found_for_a_head_spelled_with_its_owner() -> None:
    """The pull request exists upstream (its head.ref is the bare branch) and its claim's owner died:
    the retry's head "acme:agent/x" must find it, not make a second one."""
    store, up = MemoryStore(), Upstream()
    dead = dataclasses.replace(Owner.current(), pid=2**22 + 12346, start="1", session="gone")
    crashed = make_guard(store, owner=dead)
    spelled = {**PR, "head": "acme:agent/x", "title": "a"}
    assert isinstance(crashed.runner.start(crashed.step_key("create_pull_request", spelled), []), Claim)
    up.call_tool("create_pull_request", {**PR, "title": "a"})
    reply = make_guard(store).handle("create_pull_request", {**spelled, "title": "other words"}, up)
    assert reply.status == "already_existed"
    assert up.calls.count("create_pull_request") == 1


@pytest.mark.parametrize(
    "first, again",
    [
        ({"text": "x"}, {"text": "x", "thread": None}),  # an optional argument sent as null
        ({"text": "x", "thread": 7}, {"text": "x", "thread": 7.0}),  # JSON's 7.0 is 7
    ],
)
def test_a_null_argument_is_one_left_out_and_an_integral_number_is_that_integer(
    first: dict[str, Any], again: dict[str, Any]
) -> None:
    """Keyed on canonical JSON, ``"thread": null`` was another key than no thread (and ``7.0`` than
    ``7``): a retry that spelt its arguments so sent a ledger-only tool's effect a second time."""
    guard, up = make_guard(), Upstream()
    assert guard.handle("send_note", first, up).status == "created"
    assert guard.handle("send_note", again, up).status == "replayed"
    assert up.calls == ["send_note"]


def test_live_claim_elsewhere_is_in_progress_and_nothing_is_sent() -> None:
    store, up = MemoryStore(), Upstream()
    other = make_guard(store)
    step = other.step_key("send_note", {"text": "x"})
    other.runner.start(step, [])
    reply = make_guard(store).handle("send_note", {"text": "x"}, up)
    assert reply.status == "in_progress" and reply.result is not None and reply.result["isError"]
    assert up.calls == []


def test_error_result_is_failed_and_retried() -> None:
    guard, up = make_guard(), Upstream()
    up.fail = "create_pull_request"
    assert guard.handle("create_pull_request", {**PR, "title": "a"}, up).status == "failed"
    up.fail = None
    assert guard.handle("create_pull_request", {**PR, "title": "a"}, up).status == "created"
    assert len(up.pulls) == 1


def test_lost_upstream_on_a_ledger_only_tool_leaves_the_claim_open() -> None:
    store, up = MemoryStore(), Upstream()
    guard = make_guard(store)
    up.lose = "send_note"
    reply = guard.handle("send_note", {"text": "x"}, up)
    assert reply.error is not None and "unknown" in reply.error.message
    [entry] = list(store.entries())
    assert entry.folded.state == "attempting"  # unconfirmed once this proxy is gone


def test_reworded_comment_is_found_upstream_after_a_crash() -> None:
    store, up = MemoryStore(), Upstream()
    up.call_tool(
        "add_issue_comment", {"body": "CI is green again after the fix in parser.py; ready for review."}
    )
    reply = make_guard(store).handle(
        "add_issue_comment",
        {
            "owner": "acme",
            "repo": "w",
            "issue_number": 1,
            "body": "CI is green again after the fix in parser.py, ready for review!",
        },
        up,
    )
    assert reply.status == "already_existed" and reply.result is not None
    assert reply.result["structuredContent"] == {"id": 1, "url": "https://gh/c/1"}
    assert len(up.comments) == 1


def test_profiles_extend_from_gitledger_yml_and_bad_ones_name_the_line(tmp_path: Path) -> None:
    text = (
        "mcp:\n  profiles:\n    github:\n      tools:\n"
        "        create_pull_request: {key: [owner, repo, head]}\n"
    )
    cfg = config_mod.parse(text, tmp_path / ".gitledger.yml")
    profile = resolve_profile("github", PROFILES, cfg)
    assert profile.tools["create_pull_request"].key == ("owner", "repo", "head")
    assert profile.tools["add_issue_comment"].similar == "body"  # the rest of the built-in profile stays
    bad = "mcp:\n  profiles:\n    github:\n      tools:\n        x: {task: sometimes}\n"
    with pytest.raises(ConfigError, match="line 5"):
        config_mod.parse(bad, tmp_path / ".gitledger.yml")
    refused = (("[head]", "owner_prefix must be a mapping"), ("{head: 7}", "owner_prefix.head must be"))
    for value, error in refused:
        bad = f"mcp:\n  profiles:\n    github:\n      tools:\n        x: {{owner_prefix: {value}}}\n"
        with pytest.raises(ConfigError, match=error):
            config_mod.parse(bad, tmp_path / ".gitledger.yml")
    good = "mcp:\n  profiles:\n    github:\n      tools:\n        x: {owner_prefix: {head: org}}\n"
    rule = resolve_profile("github", PROFILES, config_mod.parse(good, tmp_path / ".gitledger.yml")).tools["x"]
    assert rule.owner_prefix == {"head": "org"}
