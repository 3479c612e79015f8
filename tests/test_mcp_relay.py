"""``gitledger mcp-proxy`` as a relay: what passes through unchanged (initialize byte for byte, requests
the server sends to the client, progress and cancellation), what the relay answers itself (parse
errors, batches) and what happens when either side goes away. Raw JSON lines over pipes where bytes
matter, a real SDK client where a client's callbacks answer; the upstream is tests/mcp_upstream.py."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

from testing.repos import ROOT, run_gitledger

UPSTREAM = str(ROOT / "tests" / "mcp_upstream.py")
PROXY = [sys.executable, "-m", "gitledger", "mcp-proxy", "--profile", "github", "--task", "T-1", "--"]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {"listChanged": True}},
        "clientInfo": {"name": "raw-test-client", "version": "1.0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
WAIT = 60.0  # seconds any single expected line may take on a loaded machine


class Raw:
    """A process driven with raw JSON lines over pipes; its stdout lines are collected by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path) -> None:
        with open(stderr, "ab") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd
            )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message: Any) -> bytes:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        return data

    def line(self) -> bytes:
        got = self.lines.get(timeout=WAIT)
        assert got is not None, "the process closed its output"
        return got

    def read(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.line())
        return message

    def until(self, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Every message up to and including the first one ``done`` accepts."""
        seen = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            seen.append(self.read())
            if done(seen[-1]):
                return seen
        raise AssertionError(f"no such message within {WAIT}s: {seen}")

    def initialize(self) -> bytes:
        self.send(INIT)
        answer = self.line()
        self.send(INITIALIZED)
        return answer

    def close(self) -> int:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        return self.proc.wait(timeout=WAIT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class World:
    def __init__(self, tmp: Path, repo: Path) -> None:
        self.tmp, self.repo = tmp, repo
        self.state = tmp / "github.json"
        self.pids = tmp / "upstream.pids"
        self.stderr = tmp / "proxy.stderr"
        self.wire = tmp / "wire"  # what the (proxied) upstream received, line by line
        self.procs: list[Raw] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_MCP_", "GITLEDGER_TASK"))}
        env.update({"FAKE_MCP_STATE": str(self.state), "FAKE_MCP_PIDFILE": str(self.pids), **extra})
        return env

    def sent(self) -> list[bytes]:
        """The lines the upstream received so far (FAKE_MCP_WIRE)."""
        return self.wire.read_bytes().splitlines(keepends=True) if self.wire.exists() else []

    def github(self) -> dict[str, Any]:
        return json.loads(self.state.read_text()) if self.state.exists() else {}

    def ledger(self) -> list[dict[str, Any]]:
        proc = run_gitledger("list", "--json", cwd=self.repo)
        assert proc.returncode == 0, proc.stderr
        data: list[dict[str, Any]] = json.loads(proc.stdout)
        return data

    def raw(self, *, proxied: bool = True, upstream: list[str] | None = None, **env: str) -> Raw:
        argv = [*(PROXY if proxied else []), *(upstream or [sys.executable, UPSTREAM])]
        if proxied:
            env = {"FAKE_MCP_WIRE": str(self.wire), **env}
        raw = Raw(argv, self.env(**env), self.repo, self.stderr)
        self.procs.append(raw)
        return raw

    @asynccontextmanager
    async def client(self, **callbacks: Any) -> AsyncIterator[ClientSession]:
        params = StdioServerParameters(
            command=PROXY[0], args=[*PROXY[1:], sys.executable, UPSTREAM], env=self.env(), cwd=str(self.repo)
        )
        with open(self.stderr, "a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, **callbacks) as session,
            ):
                await session.initialize()
                yield session

    def cleanup(self) -> None:
        for raw in self.procs:
            raw.kill()
        if self.pids.exists():
            for line in self.pids.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(line), signal.SIGKILL)


@pytest.fixture
def world(tmp_path: Path, repo: Path) -> Iterator[World]:
    w = World(tmp_path, repo)
    yield w
    w.cleanup()


def call(ident: Any, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def answer_to(ident: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("id") == ident and "method" not in m


def test_initialize_and_tools_list_are_the_upstreams_byte_for_byte(world: World) -> None:
    direct = world.raw(proxied=False)
    proxied = world.raw()
    assert proxied.initialize() == direct.initialize()
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    direct.send(listing)
    sent = proxied.send(listing)
    relayed = proxied.line()
    assert relayed == direct.line()
    assert [t["name"] for t in json.loads(relayed)["result"]["tools"]][:2] == [
        "create_pull_request",
        "list_pull_requests",
    ]
    assert world.sent() == [json.dumps(INIT).encode() + b"\n", json.dumps(INITIALIZED).encode() + b"\n", sent]
    assert direct.close() == 0 and proxied.close() == 0


def test_requests_to_the_client_pass_through_and_get_the_clients_answer(world: World) -> None:
    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked = params.messages[0].content
        assert isinstance(asked, types.TextContent) and asked.text == "What is 2 + 2?"
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="4"), model="test-model"
        )

    async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert params.message == "Which branch?"
        return types.ElicitResult(action="accept", content={"branch": "agent/issue-42"})

    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/widgets", name="widgets")])

    async def main() -> dict[str, Any]:
        answers = {}
        callbacks = {"sampling_callback": sampling, "elicitation_callback": elicitation}
        async with world.client(**callbacks, list_roots_callback=roots) as s:
            for what in ("sampling", "elicitation", "roots"):
                result = await s.call_tool("ask_client", {"what": what})
                assert not result.is_error, result
                block = result.content[0]
                assert isinstance(block, types.TextContent)
                answers[what] = json.loads(block.text)
        return answers

    answers = anyio.run(main)
    assert answers == {
        "sampling": {"sampled": "4", "model": "test-model"},
        "elicitation": {"action": "accept", "content": {"branch": "agent/issue-42"}},
        "roots": {"roots": ["file:///work/widgets"]},
    }
    assert world.ledger() == []  # read-only: nothing guarded


def test_progress_notifications_reach_the_agent_and_its_cancellation_reaches_the_upstream(
    world: World,
) -> None:
    raw = world.raw()
    raw.initialize()
    raw.send(call(7, "count_slowly", {"to": 400, "delay": 0.1}, progressToken="tok-7"))
    progress = raw.until(
        lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] >= 2
    )
    assert all(m["params"]["progressToken"] == "tok-7" for m in progress)
    assert [m["params"]["progress"] for m in progress] == [1, 2]
    cancel = raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
    deadline = time.monotonic() + WAIT
    while "count_slowly:cancelled" not in world.github().get("calls", []):
        assert time.monotonic() < deadline, "the upstream never saw the cancellation"
        time.sleep(0.05)
    raw.send({"jsonrpc": "2.0", "id": 8, "method": "ping"})
    after = raw.until(answer_to(8))
    assert after[-1]["result"] == {}
    assert not any(m.get("id") == 7 for m in after)  # the cancelled call is not answered
    assert cancel in world.sent()  # as the agent wrote it
    assert raw.close() == 0


def test_parse_errors_and_batches(world: World) -> None:
    raw = world.raw()
    raw.initialize()
    raw.send(b'{"jsonrpc": "2.0", "id": 3, "method": "ping"\n')  # truncated
    raw.send(b"\xff\xfe not utf-8\n")
    raw.send(b"\n")  # blank lines are ignored
    ping = raw.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
    seen = raw.until(answer_to(4))
    errors = [m for m in seen if "error" in m]
    assert [(m["id"], m["error"]["code"]) for m in errors] == [(None, -32700), (None, -32700)]
    assert seen[-1] == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert world.sent()[2:] == [ping]  # nothing of the bad lines reached the upstream
    raw.send([{"jsonrpc": "2.0", "id": 5, "method": "ping"}, call(6, "get_me", {}), 17])
    by_id: dict[Any, dict[str, Any]] = {}
    while len(by_id) < 3:  # three answers, in any order
        got = raw.until(lambda m: "method" not in m)[-1]
        by_id[got.get("id")] = got
    assert by_id[5]["result"] == {}
    assert json.loads(by_id[6]["result"]["content"][0]["text"]) == {"login": "fake-agent"}
    assert by_id[None]["error"]["code"] == -32600
    raw.send([])
    assert raw.read()["error"]["code"] == -32600
    assert raw.close() == 0


def test_what_no_server_answers_is_answered_here(world: World) -> None:
    """Requests an MCP server drops (not JSON-RPC 2.0, an id that is null or an object, params that
    are not an object) and a line nested deeper than the parser's stack: the relay sent them on, or
    said "internal error" on stderr, and the client waited for the answer forever."""
    raw = world.raw()
    raw.initialize()
    raw.send({"jsonrpc": "1.0", "id": 7, "method": "ping"})
    raw.send({"id": 8, "method": "ping"})
    raw.send({"jsonrpc": "2.0", "id": None, "method": "ping"})
    raw.send({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"})
    raw.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": [1]})
    raw.send(b"[" * 200_000 + b"]" * 200_000 + b"\n")
    ping = raw.send({"jsonrpc": "2.0", "id": 10, "method": "ping"})
    seen = raw.until(answer_to(10))
    errors = [(m["id"], m["error"]["code"]) for m in seen if "error" in m]
    assert errors == [(7, -32600), (8, -32600), (None, -32600), (None, -32600), (9, -32600), (None, -32700)]
    assert world.sent()[2:] == [ping]  # none of them reached the upstream
    assert raw.close() == 0


def test_odd_ids_and_an_id_less_tools_call_never_reach_the_upstream(world: World) -> None:
    """A fractional id (a Python-SDK server drops the request: the client waited forever), an id in the
    relay's own namespace (its answer would have been taken for the relay's), and a tools/call sent as
    a notification (no id: it went to the upstream unguarded)."""
    raw = world.raw()
    raw.initialize()
    raw.send({"jsonrpc": "2.0", "id": 1.5, "method": "ping"})
    raw.send(b'{"jsonrpc": "2.0", "id": 3.0, "method": "ping"}\n')
    raw.send({"jsonrpc": "2.0", "id": "gitledger-proxy-1", "method": "ping"})
    pr = {"owner": "acme", "repo": "widgets", "head": "agent/x", "base": "main", "title": "Fix"}
    raw.send(
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "create_pull_request", "arguments": pr}}
    )
    ping = raw.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    seen = raw.until(lambda m: m.get("id") == 2)
    errors = [(m["id"], m["error"]["code"], m["error"]["message"]) for m in seen if "error" in m]
    assert errors == [
        (1.5, -32600, "Invalid Request: an id must be a string or an integer"),
        (3.0, -32600, "Invalid Request: an id must be a string or an integer"),
        (
            "gitledger-proxy-1",
            -32600,
            "Invalid Request: ids starting with 'gitledger-proxy-' are the proxy's own",
        ),
    ]
    assert seen[-1]["result"] == {} and world.sent()[2:] == [ping]
    assert raw.close() == 0
    assert "dropped a tools/call without an id" in world.stderr.read_text()
    assert not world.github().get("pulls")


def test_arguments_nested_too_deep_for_a_key_are_invalid_params(world: World) -> None:
    """Without a profile a call is keyed on its canonical arguments; arguments nested deeper than
    that encoding can go were an "internal error" (-32603)."""
    argv = [sys.executable, "-m", "gitledger", "mcp-proxy", "--task", "T-2", "--", sys.executable, UPSTREAM]
    raw = Raw(argv, world.env(FAKE_MCP_WIRE=str(world.wire)), world.repo, world.stderr)
    world.procs.append(raw)
    raw.initialize()
    arguments = (
        b'{"owner": "o", "repo": "r", "title": "t", "labels": ' + b"[" * 900 + b'"x"' + b"]" * 900 + b"}"
    )
    raw.send(
        b'{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "create_issue", '
        b'"arguments": ' + arguments + b"}}\n"
    )  # (this process's json could not encode it)
    got = raw.until(answer_to(11))[-1]
    assert got["error"]["code"] == -32602 and "nested too deeply" in got["error"]["message"], got
    assert raw.close() == 0


def test_upstream_exit_answers_every_request_in_flight_then_the_proxy_exits_1(world: World) -> None:
    raw = world.raw(FAKE_MCP_CRASH="get_me")
    raw.initialize()
    raw.send(call(10, "count_slowly", {"to": 400, "delay": 0.1}, progressToken="p"))
    raw.until(lambda m: m.get("method") == "notifications/progress")  # 10 is in flight upstream
    raw.send(call(11, "get_me", {}))  # the upstream exits while handling it
    answers: dict[int, dict[str, Any]] = {}
    while len(answers) < 2:
        got = raw.until(lambda m: m.get("id") in (10, 11) and "method" not in m)[-1]
        answers[got["id"]] = got
    for ident in (10, 11):
        assert answers[ident]["error"]["code"] == -32000
        assert "upstream MCP server is gone" in answers[ident]["error"]["message"]
    assert raw.proc.wait(timeout=WAIT) == 1
    assert raw.lines.get(timeout=WAIT) is None  # nothing else was written
    err = world.stderr.read_text()
    assert err.count("\n") == 1 and "upstream MCP server exited (exit code 3)" in err
    assert world.ledger() == []


def test_an_upstream_that_exits_at_once_fails_initialize_and_the_proxy_exits_1(world: World) -> None:
    raw = world.raw(upstream=[sys.executable, "-c", "import sys; sys.exit(5)"])
    raw.send(INIT)
    answer = raw.read()
    assert answer["id"] == 1 and "upstream MCP server is gone" in answer["error"]["message"]
    assert raw.proc.wait(timeout=WAIT) == 1
    assert "exit code 5" in world.stderr.read_text()


def test_agent_closing_stdin_stops_the_upstream_and_exits_0(world: World) -> None:
    raw = world.raw()
    raw.initialize()
    raw.send(call(2, "get_me", {}))
    assert "result" in raw.until(answer_to(2))[-1]
    [pid] = [int(p) for p in world.pids.read_text().split()]
    assert raw.close() == 0
    deadline = time.monotonic() + WAIT
    while _alive(pid):
        assert time.monotonic() < deadline, "the upstream outlived the proxy"
        time.sleep(0.05)
    assert world.stderr.read_text() == ""


@pytest.mark.parametrize("code", [4, -signal.SIGKILL])
def test_an_upstream_that_fails_as_the_agent_closes_stdin_makes_the_proxy_exit_1(
    world: World, code: int
) -> None:
    """The agent's end of the session and the upstream's failure at the same moment: the proxy saw the
    agent's end first and exited 0, as if all were well. The upstream's exit status decides."""
    die = f"sys.exit({code})" if code > 0 else f"os.kill(os.getpid(), {-code})"
    raw = world.raw(upstream=[sys.executable, "-c", f"import os, sys; sys.stdin.read(); {die}"])
    assert raw.close() == 1
    err = world.stderr.read_text()
    what = f"exit code {code}" if code > 0 else f"killed by signal {-code}"
    assert err.count("\n") == 1 and f"upstream MCP server exited ({what})" in err, err


def test_tool_list_change_refreshes_what_is_guarded(world: World) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def main() -> None:
        async with world.client(message_handler=on_message) as s:
            first = await s.call_tool("send_note", {"text": "deploy started"})
            assert "io.gitledger/key" in (first.meta or {})  # guarded: a write tool
            await s.call_tool("make_notes_read_only", {})
            with anyio.fail_after(WAIT):
                await changed.wait()  # passed through to the agent
            for _ in range(2):  # read-only now: straight through, each time
                again = await s.call_tool("send_note", {"text": "deploy finished"})
                assert not again.is_error and not again.meta

    anyio.run(main)
    assert world.github()["notes"] == ["deploy started", "deploy finished", "deploy finished"]
    assert [e["state"] for e in world.ledger()] == ["done"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as stat:  # a zombie is not alive
        return stat.read().split()[2] != "Z"
    return True


def test_the_proxy_runs_with_no_sdk_pydantic_anyio_typer_or_pygithub_importable(world: World) -> None:
    blocked = ("mcp", "mcp_types", "pydantic", "anyio", "typer", "click", "github")
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "from gitledger.cli import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    raw = Raw(
        [sys.executable, "-c", code, *PROXY[3:], sys.executable, UPSTREAM],
        world.env(),
        world.repo,
        world.stderr,
    )
    world.procs.append(raw)
    assert json.loads(raw.initialize())["result"]["serverInfo"]["name"] == "fake-github-mcp"
    raw.send(call(2, "get_me", {}))
    assert "result" in raw.until(answer_to(2))[-1]
    pr = {"owner": "acme", "repo": "widgets", "head": "agent/x", "base": "main", "title": "Fix"}
    raw.send(call(3, "create_pull_request", pr))
    made = raw.until(answer_to(3))[-1]["result"]
    raw.send(call(4, "create_pull_request", {**pr, "title": "Fix, reworded"}))
    again = raw.until(answer_to(4))[-1]["result"]
    assert (
        made["structuredContent"]["number"] == 1 and again["structuredContent"] == made["structuredContent"]
    )
    assert again["_meta"]["io.gitledger/replayed"] is True
    assert raw.close() == 0, world.stderr.read_text()
    assert len(world.github()["pulls"]) == 1


def test_a_cancelled_guarded_call_is_not_passed_on_and_still_finishes_and_is_recorded(world: World) -> None:
    raw = world.raw(FAKE_MCP_SLOW="1")
    raw.initialize()
    pr = {"owner": "acme", "repo": "widgets", "head": "agent/y", "base": "main", "title": "Fix"}
    raw.send(call(5, "create_pull_request", pr))
    cancel = raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})
    late = raw.until(answer_to(5))[-1]  # the late answer (a client ignores it)
    assert late["result"]["structuredContent"]["number"] == 1
    assert cancel not in world.sent()  # the upstream never saw request 5 under that id
    assert raw.close() == 0
    assert [e["state"] for e in world.ledger()] == ["done"]
