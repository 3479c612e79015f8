"""``gitledger mcp-proxy``: a raw JSON-RPC relay in front of an MCP server, guarding its write tools.

Standard library only. The upstream server runs as a child with stdin/stdout pipes (its stderr is the
proxy's). MCP's stdio framing is one JSON message per line, and the relay passes lines through as
they are: ``initialize`` (so the agent sees the server's own identity, capabilities and
instructions), ``tools/list``, resources, prompts, completion, ping, notifications in both
directions (progress, cancellation, list changes, logging) and the requests the server sends to the
client (sampling, elicitation, roots) together with the client's answers.

Two threads read: one the agent's lines (stdin), one the upstream's (its stdout). Each line is parsed
once, to see its method and id; the bytes written on are the bytes read. The relay steps in only for

- ``tools/call`` of a tool :class:`~gitledger.features.proxy.guard.ProxyGuard` guards: decided in a
  worker thread (ledger I/O blocks), which reaches the upstream with requests of its own (ids
  ``gitledger-proxy-N``, answered to the waiting thread, never shown to the agent), and answered by
  the relay;
- responses to the agent's ``tools/list`` requests, which also teach the guard the tools'
  annotations; ``notifications/tools/list_changed`` makes the relay list the tools again itself, and
  so does a ``tools/call`` of a tool it has not seen listed yet (before the decision);
- the upstream going away: every request still waiting gets an error, then the proxy exits 1.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from gitledger.features.proxy.guard import ProxyGuard, Reply, ToolInfo, UpstreamError
from gitledger.features.proxy.setup import ProxyRequest, open_guard
from gitledger.mcp import PROFILES_DIR

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
CONNECTION_CLOSED = -32000  # the MCP SDKs' codes for a lost connection and a timed-out request:
REQUEST_TIMEOUT = -32001  # an upstream error with one of them leaves the outcome unknown
GONE = "gitledger: the upstream MCP server is gone"  # the error of requests it leaves unanswered
LOST = "the upstream MCP server exited or closed its output"
OWN_ID = "gitledger-proxy-"
MAX_PAGES = 1000  # tools/list pages the relay follows when it lists the tools itself
WORKER_GRACE = 30.0  # seconds guarded calls in flight get to finish (and be recorded) at the end
CHILD_GRACE = 5.0  # seconds the upstream gets to exit once its stdin is closed
CHUNK = 1 << 16


# -- wire ------------------------------------------------------------------------------------------


def _lines(fd: int) -> Iterator[bytes]:
    """The lines read from ``fd``, each with its newline; a last unterminated line gets one.

    ``os.read`` rather than a buffered file: a thread blocked here holds no Python-level lock, so
    the process can exit while the peer keeps its end open.
    """
    pending: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            rest = b"".join(pending)
            if rest.strip():
                yield rest + b"\n"
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if pending:
                pending.append(chunk[start : end + 1])
                yield b"".join(pending)
                pending.clear()
            else:
                yield chunk[start : end + 1]
            start = end + 1
        if start < len(chunk):
            pending.append(chunk[start:])


class _Pipe:
    """A file descriptor written by several threads, one whole line at a time."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.broken = False

    def write(self, data: bytes) -> bool:
        """False when the reader is gone (the line is dropped)."""
        with self.lock:
            if self.broken:
                return False
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self.fd, view) :]
            except OSError:
                self.broken = True
                return False
        return True


def _encode(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _error(ident: Any, code: int, message: str) -> bytes:
    return _encode({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})


def _reply(ident: Any, reply: Reply) -> bytes:
    if reply.error is not None:
        return _error(ident, reply.error.code, reply.error.message)
    return _encode({"jsonrpc": "2.0", "id": ident, "result": reply.result})


def _trackable(ident: Any) -> bool:
    """A request id the relay can remember (JSON-RPC ids are strings or numbers)."""
    return isinstance(ident, str | int | float) and not isinstance(ident, bool)


def tool_info(tool: Any) -> ToolInfo | None:
    """What the guard needs of one ``tools/list`` entry (wire form), or None if it names no tool."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return None
    hints = tool.get("annotations")
    hints = hints if isinstance(hints, dict) else {}
    schema = tool.get("inputSchema")
    required = schema.get("required") if isinstance(schema, dict) else None
    read_only, idempotent = hints.get("readOnlyHint"), hints.get("idempotentHint")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    types: dict[str, tuple[str, ...]] = {}
    for name, spec in (properties or {}).items() if isinstance(properties, dict) else ():
        kind = spec.get("type") if isinstance(spec, dict) else None
        kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
        if kinds and all(isinstance(k, str) for k in kinds):
            types[name] = tuple(kinds)
    return ToolInfo(
        tool["name"],
        read_only=read_only if isinstance(read_only, bool) else None,
        idempotent=idempotent if isinstance(idempotent, bool) else None,
        required=tuple(r for r in required if isinstance(r, str)) if isinstance(required, list) else (),
        output_schema=tool.get("outputSchema") is not None,
        types=types,
    )


def _infos(result: Any) -> list[ToolInfo] | None:
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return None
    return [info for info in map(tool_info, tools) if info is not None]


def tool_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """A ``CallToolResult`` as the guard keeps it (wire form, no null fields); raises UpstreamError."""
    content = result.get("content")
    why = None
    if not isinstance(content, list) or not all(isinstance(c, dict) and "type" in c for c in content):
        why = "content is not a list of content blocks"
    elif result.get("isError") is not None and not isinstance(result.get("isError"), bool):
        why = "isError is not a boolean"
    if why is not None:
        raise UpstreamError(
            INTERNAL_ERROR, f"the upstream answered with an invalid result ({why})", unknown=True
        )
    return {name: value for name, value in result.items() if value is not None}


class _Waiter:
    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: dict[str, Any] | None = None  # None: the upstream went away


# -- the relay -------------------------------------------------------------------------------------


class Relay:
    """One agent (``agent_in``/``agent_out``), one upstream child, one guard."""

    def __init__(self, guard: ProxyGuard, command: tuple[str, ...], agent_in: int = 0, agent_out: int = 1):
        self.guard = guard
        self.command = command
        self.agent_in = agent_in
        self.agent = _Pipe(agent_out)
        self.upstream = _Pipe(-1)
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()  # the tables below, gone, reason
        self.forwarded: dict[Any, str] = {}  # agent request id -> method, until the upstream answers
        self.listings: dict[Any, bool] = {}  # agent tools/list request id -> it asked for a later page
        self.handling: set[Any] = set()  # agent request ids the relay answers itself
        self.own: dict[str, _Waiter] = {}  # the relay's own requests to the upstream
        self.ids = itertools.count(1)
        self.workers: set[threading.Thread] = set()
        self.gone = False
        self.closing = False
        self.reason = ""  # "eof": the agent closed stdin; "lost": the upstream went away
        self.finished = threading.Event()
        self.tools_lock = threading.Lock()  # updates of guard.tools
        self.listing_lock = threading.Lock()  # one listing of the relay's own at a time
        self.tools_complete = False  # the guard has seen a whole tools/list (since the last change)
        self.tools_stale = False  # the upstream said its tools changed; calls wait for the new list

    # -- lifecycle ---------------------------------------------------------------------------------

    def serve(self) -> int:
        """Relay until the agent closes stdin (0, or 1 when the upstream then exits with a failure) or
        the upstream goes away or cannot start (1)."""
        try:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
            )
        except (OSError, ValueError) as exc:
            _say(f"gitledger: mcp-proxy could not start the upstream MCP server {self.command[0]!r}: {exc}")
            return 1
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.upstream = _Pipe(self.proc.stdin.fileno())
        upstream_fd = self.proc.stdout.fileno()
        reader = _thread(self._from_upstream, upstream_fd)
        _thread(self._from_agent)
        try:
            self.finished.wait()
            self._join_workers(WORKER_GRACE)  # guarded calls in flight finish and are recorded
            if self.reason == "eof":
                failed = self._close_child()
                reader.join(timeout=2.0)  # the upstream's last lines reach the agent
                if not failed:
                    return 0
            _say(f"gitledger: the upstream MCP server exited ({self._exit_status()}); the proxy stops")
            return 1
        finally:
            self._reap()

    def _from_agent(self) -> None:
        try:
            for line in _lines(self.agent_in):
                _guarded_step(self._agent_line, line)
        finally:
            self._finish("eof")

    def _from_upstream(self, fd: int) -> None:
        try:
            for line in _lines(fd):
                _guarded_step(self._upstream_line, line)
        finally:
            self._lost()

    def _finish(self, reason: str) -> None:
        with self.lock:
            self.reason = self.reason or reason
        self.finished.set()

    def _lost(self) -> None:
        """The upstream went away: every request still waiting is answered with an error."""
        with self.lock:
            if self.gone:
                return
            self.gone = True
            waiters, forwarded = list(self.own.values()), list(self.forwarded)
            self.own.clear()
            self.forwarded.clear()
            self.listings.clear()
        for waiter in waiters:
            waiter.done.set()  # the guarded calls see UpstreamError(unknown) and answer themselves
        if not self.closing:
            for ident in forwarded:
                self.agent.write(_error(ident, CONNECTION_CLOSED, GONE))
        self._finish("lost")

    def _join_workers(self, seconds: float) -> None:
        with self.lock:
            workers = list(self.workers)
        for worker in workers:
            worker.join(timeout=seconds / max(len(workers), 1))

    def _close_child(self) -> bool:
        """Close the upstream's stdin and let it exit; whether it failed (an exit status other than 0:
        it may have died on its own as the agent closed stdin, and the agent is told by the exit
        status). One that does not exit in :data:`CHILD_GRACE` is terminated, which is no failure."""
        self.closing = True
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        with self.upstream.lock:
            self.upstream.broken = True
            proc.stdin.close()
        try:
            return proc.wait(timeout=CHILD_GRACE) != 0
        except subprocess.TimeoutExpired:
            proc.terminate()
            return False

    def _exit_status(self) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return "it closed its output"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def _reap(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # -- agent -> upstream -------------------------------------------------------------------------

    def _agent_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:  # bytes that are not UTF-8; nesting past the stack
            self.agent.write(_error(None, PARSE_ERROR, f"Parse error: {exc}"[:300]))
            return
        if isinstance(message, list):  # a batch: its messages one by one
            if not message:
                self.agent.write(_error(None, INVALID_REQUEST, "Invalid Request: an empty batch"))
            for item in message:
                self._agent_message(item, None)
            return
        self._agent_message(message, line)

    def _agent_message(self, message: Any, raw: bytes | None) -> None:
        if not isinstance(message, dict):
            self.agent.write(_error(None, INVALID_REQUEST, "Invalid Request: a message must be an object"))
            return
        method = message.get("method")
        line = raw if raw is not None else _encode(message)
        if method is not None and "id" in message and not self._valid_request(message):
            return
        if method is None or "id" not in message:  # a notification, or the answer to an upstream request
            if method == "notifications/cancelled" and not self._cancelled(message.get("params")):
                return
            if method == "tools/call":  # a request without an id: unguarded, unanswerable
                _say("gitledger: mcp-proxy: dropped a tools/call without an id (a request needs one)")
                return
            if not self.upstream.write(line):
                self._lost()
            return
        ident = message["id"]
        params = message.get("params")
        if method == "tools/call" and _trackable(ident) and isinstance(params, dict):
            name = params.get("name")
            if isinstance(name, str):
                if not self.tools_complete and (self.tools_stale or name not in self.guard.tools):
                    self._spawn(ident, self._decide_later, ident, name, params, line)
                    return
                if self.guard.rule_for(name) is not None:
                    self._spawn(ident, self._guarded, ident, name, params)
                    return
        elif method == "tools/list" and _trackable(ident):
            with self.lock:
                self.listings[ident] = isinstance(params, dict) and bool(params.get("cursor"))
        self._forward(ident, method, line)

    def _valid_request(self, message: dict[str, Any]) -> bool:
        """Whether a request is one an MCP server answers; else it is answered here (a server drops
        what is not JSON-RPC 2.0, and the client would wait for that answer forever)."""
        ident = message["id"]
        problem = None
        if message.get("jsonrpc") != "2.0":
            problem = 'Invalid Request: "jsonrpc" must be "2.0"'
        elif not _trackable(ident) or isinstance(ident, float):  # 1.5, 2.0: SDK servers drop them
            problem = "Invalid Request: an id must be a string or an integer"
        elif isinstance(ident, str) and ident.startswith(OWN_ID):  # the relay's own requests' ids
            problem = f"Invalid Request: ids starting with {OWN_ID!r} are the proxy's own"
        elif "params" in message and not isinstance(message["params"], dict):
            problem = "Invalid Request: params must be an object"
        if problem is None:
            return True
        self.agent.write(_error(ident if _trackable(ident) else None, INVALID_REQUEST, problem))
        return False

    def _cancelled(self, params: Any) -> bool:
        """Whether to pass a cancellation on: not for calls the relay handles (they finish and are
        recorded; the agent ignores the late answer). A forwarded request is no longer waited for."""
        ident = params.get("requestId") if isinstance(params, dict) else None
        if not _trackable(ident):
            return True
        with self.lock:
            if ident in self.handling:
                return False
            self.forwarded.pop(ident, None)
        return True

    def _forward(self, ident: Any, method: str, line: bytes) -> None:
        with self.lock:
            gone = self.gone
            if not gone and _trackable(ident):
                self.forwarded[ident] = method
        if gone:
            self.agent.write(_error(ident, CONNECTION_CLOSED, GONE))
        elif not self.upstream.write(line):
            self._lost()

    def _spawn(self, ident: Any, target: Any, *args: Any) -> None:
        """Run ``target`` in a worker the end of the relay waits for; once the upstream is gone, answer
        at once instead (nothing would be sent, and a late worker could be cut off mid-record)."""

        def work() -> None:
            try:
                target(*args)
            finally:
                with self.lock:
                    self.handling.discard(ident)
                    self.workers.discard(worker)

        worker = threading.Thread(target=work, daemon=True)
        with self.lock:
            gone = self.gone
            if not gone:
                self.handling.add(ident)
                self.workers.add(worker)
        if gone:
            self.agent.write(_error(ident, CONNECTION_CLOSED, GONE))
        else:
            worker.start()

    def _decide_later(self, ident: Any, name: str, params: dict[str, Any], line: bytes) -> None:
        """A call of a tool the guard has not seen listed: list the tools first, then decide."""
        self._ensure_tools()
        if self.gone:
            self.agent.write(_error(ident, CONNECTION_CLOSED, GONE))
            return
        if self.guard.rule_for(name) is not None:
            self._guarded(ident, name, params)
            return
        with self.lock:
            self.handling.discard(ident)
        self._forward(ident, "tools/call", line)

    def _guarded(self, ident: Any, name: str, params: dict[str, Any]) -> None:
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            self.agent.write(
                _error(ident, INVALID_PARAMS, "gitledger: tools/call arguments must be an object")
            )
            return
        try:
            reply = self.guard.handle(name, arguments, self)
            line = _reply(ident, reply)
        except RecursionError:  # arguments nested deeper than the key's canonical form can be made
            line = _error(ident, INVALID_PARAMS, "gitledger: the tools/call arguments are nested too deeply")
        except Exception as exc:
            message = f"gitledger: mcp-proxy internal error in {name}: {type(exc).__name__}: {exc}"
            line = _error(ident, INTERNAL_ERROR, message[:1000])
        self.agent.write(line)

    # -- upstream -> agent -------------------------------------------------------------------------

    def _upstream_line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            self.agent.write(line)  # not ours to judge: the agent's client sees what the server wrote
            return
        if isinstance(message, list):
            for item in message:
                if not self._upstream_message(item):
                    self.agent.write(_encode(item))
            return
        if not self._upstream_message(message):
            self.agent.write(line)

    def _upstream_message(self, message: Any) -> bool:
        """Look at one message from the upstream; True when it was the relay's and is not passed on."""
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method is None:  # a response
            ident = message.get("id")
            if not _trackable(ident):
                return False
            later_page: bool | None = None
            with self.lock:
                waiter = self.own.pop(ident, None) if isinstance(ident, str) else None
                if waiter is None:
                    self.forwarded.pop(ident, None)
                    later_page = self.listings.pop(ident, None)
            if waiter is not None:
                waiter.response = message
                waiter.done.set()
                return True
            if later_page is not None:
                self._learn(_infos(message.get("result")), whole=not later_page and not _next(message))
            return False
        if method == "notifications/tools/list_changed":
            # calls from now on wait for the relay's own new listing (set before the agent hears of it)
            self.tools_stale, self.tools_complete = True, False
            _thread(self._refresh)
        return False

    # -- the tools the guard knows -----------------------------------------------------------------

    def _learn(self, infos: list[ToolInfo] | None, *, whole: bool) -> None:
        if infos is None:
            return
        with self.tools_lock:
            if whole:
                self.guard.set_tools(infos)
                self.tools_complete, self.tools_stale = True, False
            else:
                known = dict(self.guard.tools)
                known.update((info.name, info) for info in infos)
                self.guard.set_tools(known.values())

    def _ensure_tools(self) -> None:
        if self.tools_complete:
            return
        with self.listing_lock:
            if not self.tools_complete:
                self._list_tools()

    def _refresh(self) -> None:
        with self.listing_lock:
            self._list_tools()

    def _list_tools(self) -> None:
        infos: list[ToolInfo] = []
        cursor: str | None = None
        try:
            for _ in range(MAX_PAGES):
                result = self.request("tools/list", {"cursor": cursor} if cursor else None)
                infos.extend(_infos(result) or ())
                cursor = result.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    break
        except UpstreamError as exc:
            if not exc.unknown:  # the server refuses to list: decide with what is known
                self.tools_complete, self.tools_stale = True, False
            return
        self._learn(infos, whole=True)

    # -- the upstream as the guard sees it (blocking, from a worker thread) --------------------------

    def request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Send a request of the relay's own and wait for its result; raises :class:`UpstreamError`."""
        waiter = _Waiter()
        with self.lock:
            if self.gone:  # nothing is sent: the outcome is known
                raise UpstreamError(CONNECTION_CLOSED, f"{LOST}; nothing was sent", unknown=False)
            ident = f"{OWN_ID}{next(self.ids)}"
            self.own[ident] = waiter
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        if not self.upstream.write(_encode(message)):
            self._lost()
        waiter.done.wait()
        response = waiter.response
        if response is None:
            raise UpstreamError(CONNECTION_CLOSED, LOST, unknown=True)
        if "error" in response:
            code, text = _error_fields(response["error"])
            raise UpstreamError(code, text, unknown=code in (CONNECTION_CLOSED, REQUEST_TIMEOUT))
        result = response.get("result")
        if not isinstance(result, dict):  # it answered, but not with a result: whether it acted is unknown
            raise UpstreamError(
                INTERNAL_ERROR, "the upstream answered with an invalid result (not an object)", unknown=True
            )
        return result

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return tool_result(self.request("tools/call", {"name": name, "arguments": arguments}))


def _next(response: dict[str, Any]) -> bool:
    result = response.get("result")
    return isinstance(result, dict) and bool(result.get("nextCursor"))


def _error_fields(error: Any) -> tuple[int, str]:
    if not isinstance(error, dict):
        return INTERNAL_ERROR, f"the upstream answered with an invalid error ({json.dumps(error)[:200]})"
    code = error.get("code")
    message = error.get("message")
    return (
        code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
        message if isinstance(message, str) else json.dumps(error)[:500],
    )


def _thread(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def _guarded_step(step: Any, line: bytes) -> None:
    """One line through ``step``; a bug is one line on stderr, and the relay goes on with the next."""
    try:
        step(line)
    except Exception as exc:
        if os.environ.get("GITLEDGER_DEBUG"):
            import traceback

            traceback.print_exc()
        _say(f"gitledger: mcp-proxy internal error on a message: {type(exc).__name__}: {exc}")


def _say(line: str) -> None:
    print(line.replace("\n", " ")[:1000], file=sys.stderr, flush=True)


def run(request: ProxyRequest) -> int:
    """Serve the agent on stdin/stdout until it closes stdin (0), or the upstream is lost or cannot
    start (1)."""
    with open_guard(request, PROFILES_DIR) as guard:
        return Relay(guard, request.command).serve()
