"""``gitledger mcp-proxy`` end to end: a real SDK client drives the proxy as a subprocess over stdio,
the proxy drives a fake GitHub MCP server (tests/mcp_upstream.py, written with the SDK), the ledger
is a real git repository. Effects are counted in the fake's state file."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from testing.repos import ROOT, run_gitledger

UPSTREAM = str(ROOT / "tests" / "mcp_upstream.py")
PR = {"owner": "acme", "repo": "widgets", "head": "agent/issue-42", "base": "main"}


class World:
    """One repository and one fake GitHub, shared by every proxy a test starts."""

    def __init__(self, tmp: Path, repo: Path) -> None:
        self.tmp = tmp
        self.repo = repo
        self.state = tmp / "github.json"
        self.pids = tmp / "upstream.pids"

    def github(self) -> dict[str, Any]:
        return json.loads(self.state.read_text()) if self.state.exists() else {}

    def calls(self, tool: str) -> int:
        return sum(1 for c in self.github().get("calls", []) if c == tool)

    def ledger(self) -> list[dict[str, Any]]:
        proc = run_gitledger("list", "--json", cwd=self.repo)
        assert proc.returncode == 0, proc.stderr
        data: list[dict[str, Any]] = json.loads(proc.stdout)
        return data

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_MCP_", "GITLEDGER_TASK"))}
        env.update({"FAKE_MCP_STATE": str(self.state), "FAKE_MCP_PIDFILE": str(self.pids)})
        env.update(extra)
        return env

    def cleanup(self) -> None:
        if self.pids.exists():
            for line in self.pids.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(line), signal.SIGKILL)

    @asynccontextmanager
    async def proxy(
        self,
        *,
        profile: str | None = "github",
        task: str | None = "ISSUE-42",
        env: Mapping[str, str] | None = None,
        pidfile: Path | None = None,
    ) -> AsyncIterator[ClientSession]:
        options = [*(["--profile", profile] if profile else []), *(["--task", task] if task else [])]
        argv = [sys.executable, "-m", "gitledger", "mcp-proxy", *options, "--", sys.executable, UPSTREAM]
        if pidfile is not None:  # exec keeps the pid, so the test can SIGKILL the proxy itself
            command, args = "sh", ["-c", f'echo $$ > "{pidfile}"; exec "$@"', "sh", *argv]
        else:
            command, args = argv[0], argv[1:]
        params = StdioServerParameters(
            command=command, args=args, env=self.env(**(env or {})), cwd=str(self.repo)
        )
        with open(self.tmp / "proxy.stderr", "a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session

    @asynccontextmanager
    async def direct(self) -> AsyncIterator[ClientSession]:
        params = StdioServerParameters(
            command=sys.executable, args=[UPSTREAM], env=self.env(), cwd=str(self.repo)
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@pytest.fixture
def world(tmp_path: Path, repo: Path) -> Any:
    w = World(tmp_path, repo)
    yield w
    w.cleanup()


def dump(result: Any) -> dict[str, Any]:
    data: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return data


def text(result: Any) -> str:
    return str(dump(result)["content"][0]["text"])


def meta(result: Any) -> dict[str, Any]:
    return dict(dump(result).get("_meta") or {})


def create_pr(title: str, body: str = "") -> dict[str, Any]:
    return {**PR, "title": title, "body": body}


def test_tools_list_resources_prompts_are_the_upstreams(world: World) -> None:
    async def main() -> None:
        async with world.direct() as direct:
            tools = dump(await direct.list_tools())["tools"]
            resources = dump(await direct.list_resources())["resources"]
            prompt = dump(await direct.get_prompt("triage", {"number": "7"}))
            info = direct.server_info
            instructions = direct.instructions
        async with world.proxy() as proxied:
            assert dump(await proxied.list_tools())["tools"] == tools
            assert dump(await proxied.list_resources())["resources"] == resources
            read = dump(await proxied.read_resource("repo://acme/widgets/readme"))
            assert read["contents"][0]["text"] == "# widgets"
            assert dump(await proxied.get_prompt("triage", {"number": "7"})) == prompt
            assert proxied.server_info is not None and info is not None
            assert (proxied.server_info.name, proxied.server_info.version) == (info.name, info.version)
            assert proxied.instructions == instructions

    anyio.run(main)


def test_reworded_creates_give_one_pr_across_calls_and_restarts(world: World) -> None:
    async def main() -> None:
        async with world.proxy() as s:
            first = await s.call_tool("create_pull_request", create_pr("Fix the parser", "Fixes #42."))
            again = await s.call_tool(
                "create_pull_request", create_pr("Parser: handle empty input (fixes #42)", "Closes #42")
            )
        assert not first.is_error and first.structured_content is not None
        assert first.structured_content["number"] == 1
        assert "io.gitledger/replayed" not in meta(first)
        assert again.structured_content == first.structured_content
        assert meta(again)["io.gitledger/replayed"] is True
        async with world.proxy() as s:  # a new proxy process: the ledger remembers
            after = await s.call_tool("create_pull_request", create_pr("fix: parser crash on empty input"))
        assert after.structured_content == first.structured_content
        assert meta(after)["io.gitledger/replayed"] is True

    anyio.run(main)
    assert len(world.github()["pulls"]) == 1
    assert world.calls("create_pull_request") == 1
    [entry] = world.ledger()
    assert entry["state"] == "done" and entry["ref"].endswith("/pull/1")


def test_identical_and_reworded_comments_post_once(world: World) -> None:
    body = "CI is green again after the fix in parser.py; ready for review."
    reworded = "Ready for review: CI is green again after fixing parser.py."
    other = "Benchmarks for tokenizer.py attached."

    async def main() -> None:
        comment = {"owner": "acme", "repo": "widgets", "issue_number": 42}
        async with world.proxy() as s:
            first = await s.call_tool("add_issue_comment", {**comment, "body": body})
            same = await s.call_tool("add_issue_comment", {**comment, "body": body})
            near = await s.call_tool("add_issue_comment", {**comment, "body": reworded})
            different = await s.call_tool("add_issue_comment", {**comment, "body": other})
        assert same.structured_content == first.structured_content
        assert near.structured_content == first.structured_content
        assert meta(near)["io.gitledger/replayed"] is True
        assert different.structured_content != first.structured_content

    anyio.run(main)
    assert [c["body"] for c in world.github()["comments"]] == [body, other]


def test_read_only_tools_pass_straight_through(world: World) -> None:
    async def main() -> None:
        async with world.direct() as direct:
            expected = dump(await direct.call_tool("get_me", {}))
        async with world.proxy() as s:
            assert dump(await s.call_tool("get_me", {})) == expected
            listed = await s.call_tool("list_pull_requests", {"owner": "acme", "repo": "widgets"})
            assert not listed.is_error and "_meta" not in dump(listed)

    anyio.run(main)
    assert world.ledger() == []


def test_sigkill_between_effect_and_record_then_reworded_retry_finds_the_pr(world: World) -> None:
    mark, pidfile = world.tmp / "effect", world.tmp / "proxy.pid"

    async def first_attempt() -> None:
        slow = {"FAKE_MCP_SLOW": "60", "FAKE_MCP_EFFECT_MARK": str(mark)}
        async with world.proxy(env=slow, pidfile=pidfile) as s, anyio.create_task_group() as tg:

            async def call() -> None:
                with pytest.raises(MCPError):  # the proxy dies under the call
                    await s.call_tool("create_pull_request", create_pr("Fix the parser"))

            tg.start_soon(call)
            with anyio.fail_after(60):
                while not mark.exists():  # the upstream acted; the proxy has not recorded it yet
                    await anyio.sleep(0.05)
            os.kill(int(pidfile.read_text()), signal.SIGKILL)

    try:
        anyio.run(first_attempt)
    except BaseException as exc:  # the client's transport may also report the dead proxy on exit
        if not isinstance(exc, MCPError | BaseExceptionGroup | anyio.BrokenResourceError | OSError):
            raise
    world.cleanup()  # the slowed upstream of the dead proxy
    [entry] = world.ledger()
    assert entry["state"] == "attempting"  # claimed, effect made, outcome never recorded
    assert len(world.github()["pulls"]) == 1

    async def retry() -> Any:
        async with world.proxy() as s:
            return await s.call_tool("create_pull_request", create_pr("Parser: do not crash on empty input"))

    result = anyio.run(retry)
    assert not result.is_error
    assert result.structured_content["number"] == 1
    assert result.structured_content["url"].endswith("/pull/1")
    assert meta(result)["io.gitledger/outcome"] == "already_existed"
    assert len(world.github()["pulls"]) == 1 and world.calls("create_pull_request") == 1
    [entry] = world.ledger()
    assert entry["state"] == "done" and entry["outcome"] == "already_existed"


@pytest.mark.parametrize("killed", ["proxy", "upstream"])
def test_a_comment_made_when_its_call_was_cut_off_is_found_for_a_reworded_retry(
    world: World, killed: str
) -> None:
    """The proxy (or the server) died after the comment was posted. The reworded retry has a key of
    its own and looked only for its new text, at the high bar: a second comment."""
    mark, pidfile = world.tmp / "effect", world.tmp / "proxy.pid"
    comment = {"owner": "acme", "repo": "widgets", "issue_number": 42}

    async def first_attempt() -> None:
        slow = {"FAKE_MCP_SLOW": "60", "FAKE_MCP_EFFECT_MARK": str(mark)}
        async with world.proxy(env=slow, pidfile=pidfile) as s, anyio.create_task_group() as tg:

            async def call() -> None:
                with pytest.raises(MCPError):  # the proxy, or its server, dies under the call
                    await s.call_tool(
                        "add_issue_comment", {**comment, "body": "Tests pass on build_7; ready for review."}
                    )

            tg.start_soon(call)
            with anyio.fail_after(60):
                while not mark.exists():
                    await anyio.sleep(0.05)
            if killed == "proxy":
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            else:
                world.cleanup()  # SIGKILLs the upstream

    try:
        anyio.run(first_attempt)
    except BaseException as exc:  # the client's transport may also report the dead proxy on exit
        if not isinstance(exc, MCPError | BaseExceptionGroup | anyio.BrokenResourceError | OSError):
            raise
    world.cleanup()

    async def retry() -> Any:
        async with world.proxy() as s:
            return await s.call_tool(
                "add_issue_comment", {**comment, "body": "build_7 is green, can someone review it?"}
            )

    result = anyio.run(retry)
    assert not result.is_error and meta(result)["io.gitledger/outcome"] == "already_existed"
    assert result.structured_content["url"].endswith("#issuecomment-1000")
    assert len(world.github()["comments"]) == 1 and world.calls("add_issue_comment") == 1
    assert [(e["state"], e.get("outcome")) for e in world.ledger()] == [("done", "already_existed")]


def test_same_key_in_flight_in_another_proxy_is_in_progress(world: World) -> None:
    mark = world.tmp / "effect"

    async def main() -> None:
        slow = {"FAKE_MCP_SLOW": "3", "FAKE_MCP_EFFECT_MARK": str(mark)}
        async with world.proxy(env=slow) as a, world.proxy() as b:
            results: dict[str, Any] = {}
            async with anyio.create_task_group() as tg:

                async def first() -> None:
                    results["a"] = await a.call_tool("create_pull_request", create_pr("Fix the parser"))

                tg.start_soon(first)
                with anyio.fail_after(60):
                    while not mark.exists():
                        await anyio.sleep(0.05)
                results["b"] = await b.call_tool("create_pull_request", create_pr("Parser fix"))
            later = await b.call_tool("create_pull_request", create_pr("Parser fix, again"))
        assert results["b"].is_error and "in_progress" in text(results["b"])
        assert meta(results["b"])["io.gitledger/status"] == "in_progress"
        assert later.structured_content == results["a"].structured_content

    anyio.run(main)
    assert world.calls("create_pull_request") == 1 and len(world.github()["pulls"]) == 1


def test_upstream_error_result_is_returned_and_recorded_failed_then_retried(world: World) -> None:
    async def main() -> None:
        async with world.proxy(env={"FAKE_MCP_FAIL": "create_pull_request"}) as s:
            failed = await s.call_tool("create_pull_request", create_pr("Fix the parser"))
        assert failed.is_error and "502" in text(failed)
        assert [e["state"] for e in world.ledger()] == ["failed"]
        async with world.proxy() as s:
            made = await s.call_tool("create_pull_request", create_pr("Fix the parser"))
        assert not made.is_error and made.structured_content["number"] == 1

    anyio.run(main)
    assert len(world.github()["pulls"]) == 1


def test_upstream_crash_is_a_clear_error_and_nothing_is_done(world: World) -> None:
    async def main() -> None:
        async with world.proxy(env={"FAKE_MCP_CRASH": "create_issue"}) as s:
            with pytest.raises(MCPError) as caught:
                await s.call_tool("create_issue", {"owner": "acme", "repo": "widgets", "title": "Flaky test"})
            assert "upstream MCP server was lost" in str(caught.value.error.message)

    try:
        anyio.run(main)
    except BaseExceptionGroup as group:  # the proxy stops after the upstream is gone
        assert all(isinstance(e, MCPError | anyio.BrokenResourceError | OSError) for e in group.exceptions)
    assert [e["state"] for e in world.ledger()] == ["failed"]
    assert world.github().get("issues", []) == []
    assert "upstream MCP server exited" in (world.tmp / "proxy.stderr").read_text()


def test_malformed_arguments_are_an_invalid_params_error_and_nothing_is_sent(world: World) -> None:
    async def main() -> None:
        async with world.proxy() as s:
            with pytest.raises(MCPError) as missing:
                await s.call_tool("create_pull_request", {"owner": "acme", "repo": "widgets", "title": "x"})
            assert missing.value.error.code == -32602 and "'head'" in missing.value.error.message
            with pytest.raises(MCPError) as wrong:
                await s.call_tool(
                    "add_issue_comment", {"owner": "acme", "repo": "w", "issue_number": 1, "body": 5}
                )
            assert wrong.value.error.code == -32602 and "must be text" in wrong.value.error.message
            # a key field of another type than the tool's schema says: keyed apart, it was sent again
            # ("42" after 42: a second comment, reworded; a list or null head: a pull request)
            comment = {"owner": "acme", "repo": "widgets", "body": "Ready for review: CI is green."}
            first = await s.call_tool("add_issue_comment", {**comment, "issue_number": 42})
            assert not first.is_error
            for number in ("42", True, [42]):
                with pytest.raises(MCPError) as typed:
                    reworded = {**comment, "issue_number": number, "body": "CI green, please review."}
                    await s.call_tool("add_issue_comment", reworded)
                assert typed.value.error.code == -32602 and "must be number" in typed.value.error.message
            for head in (None, ["agent/x"]):
                with pytest.raises(MCPError) as odd:
                    await s.call_tool("create_pull_request", {**PR, "title": "x", "head": head})
                assert odd.value.error.code == -32602 and "'head'" in odd.value.error.message

    anyio.run(main)
    assert [e["step"] for e in world.ledger()] == ["mcp.add_issue_comment"]
    assert world.calls("create_pull_request") == 0 and world.calls("add_issue_comment") == 1


def test_comment_without_a_task_is_refused(world: World) -> None:
    async def main() -> None:
        async with world.proxy(task=None) as s:
            result = await s.call_tool(
                "add_issue_comment", {"owner": "acme", "repo": "widgets", "issue_number": 1, "body": "hi"}
            )
        assert result.is_error and "GITLEDGER_TASK" in text(result)

    anyio.run(main)
    assert world.calls("add_issue_comment") == 0


def test_tool_without_a_profile_is_keyed_on_its_canonical_arguments(world: World) -> None:
    async def main() -> None:
        async with world.proxy(profile=None) as s:
            one = await s.call_tool("send_note", {"text": "deploy started"})
            again = await s.call_tool("send_note", {"text": "deploy started"})
            other = await s.call_tool("send_note", {"text": "deploy finished"})
            assert not one.is_error and meta(again)["io.gitledger/replayed"] is True
            assert "io.gitledger/replayed" not in meta(other)

    anyio.run(main)
    assert world.github()["notes"] == ["deploy started", "deploy finished"]


def test_cli_usage_errors_and_no_sdk_needed(world: World) -> None:
    proc = run_gitledger("mcp-proxy", "--profile", "github", cwd=world.repo)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "after '--'" in proc.stderr
    proc = run_gitledger("mcp-proxy", "--bogus", "--", "x", cwd=world.repo)
    assert proc.returncode == 2 and "unknown option" in proc.stderr
    proc = run_gitledger("mcp-proxy", "--help", cwd=world.repo)
    assert proc.returncode == 0 and "UPSTREAM_CMD" in proc.stdout
    # no arguments at all: stdout is the MCP channel, so one line on stderr, not the help
    proc = run_gitledger("mcp-proxy", cwd=world.repo)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert "after '--'" in proc.stderr
    proc = run_gitledger("mcp-proxy", "--profile", "nosuch", "--", sys.executable, UPSTREAM, cwd=world.repo)
    assert proc.returncode == 2 and "unknown MCP profile 'nosuch'" in proc.stderr
    proc = run_gitledger("mcp-proxy", "--task", "t" * 5000, "--", sys.executable, UPSTREAM, cwd=world.repo)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "keep it under 1024" in proc.stderr
    # the SDK (and pydantic, anyio, typer) cannot even be imported: the proxy runs all the same, and an
    # upstream that cannot start is one line and exit 1
    code = (
        "import sys\n"
        "for name in ('mcp', 'mcp_types', 'pydantic', 'anyio', 'typer', 'github'): sys.modules[name] = None\n"
        "from gitledger.cli import main\n"
        "rc = main(['mcp-proxy', '--', 'no-such-mcp-server-xyz'])\n"
        "sys.exit(rc)"
    )
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=world.repo, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "could not start the upstream MCP server 'no-such-mcp-server-xyz'" in proc.stderr


def test_nothing_in_gitledger_imports_the_sdk() -> None:
    import ast

    offenders = []
    for path in (ROOT / "gitledger").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(
                n in ("mcp", "mcp_types", "pydantic", "anyio") or n.startswith(("mcp.", "mcp_types."))
                for n in names
            ):
                offenders.append(str(path))
    assert offenders == []
