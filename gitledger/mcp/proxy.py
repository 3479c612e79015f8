"""``gitledger mcp-proxy``: a stdio MCP server in front of another one, guarding its write tools.

The proxy starts the upstream server as a child (stdio), initializes it, and then serves the agent
with the upstream's identity, capabilities and instructions. Requests are forwarded as they are
(``tools/list``, resources, prompts, completion, ping) and the upstream's notifications are passed to
the agent. ``tools/call`` of a read-only tool is forwarded at once; a guarded call is decided by
:class:`gitledger.features.proxy.guard.ProxyGuard` in a worker thread (ledger I/O is blocking),
which reaches the upstream back through this event loop.

This is the only module of gitledger that imports the ``mcp`` SDK.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from gitledger.features.proxy.guard import ProxyGuard, ToolInfo, UpstreamError
from gitledger.features.proxy.setup import ProxyRequest, open_guard
from gitledger.mcp import PROFILES_DIR

CONNECTION_CLOSED = types.CONNECTION_CLOSED
_UNKNOWN_CODES = {types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT}


def tool_info(tool: types.Tool) -> ToolInfo:
    hints = tool.annotations
    required = tool.input_schema.get("required") if isinstance(tool.input_schema, dict) else None
    return ToolInfo(
        tool.name,
        read_only=hints.read_only_hint if hints is not None else None,
        idempotent=hints.idempotent_hint if hints is not None else None,
        required=tuple(r for r in required or () if isinstance(r, str)),
        output_schema=tool.output_schema is not None,
    )


@dataclass
class _Proxy:
    upstream: ClientSession
    guard: ProxyGuard
    agent: ServerSession | None = None
    lost: anyio.Event = field(default_factory=anyio.Event)

    # -- upstream -> agent ------------------------------------------------------------------------

    async def on_upstream_message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, Exception):
            return
        if isinstance(message, types.ToolListChangedNotification):
            with anyio.CancelScope(shield=True):
                await self._refresh_tools()
        if self.agent is not None:
            await self.agent.send_notification(message)

    async def _refresh_tools(self) -> None:
        try:
            listed = await self._all_tools()
        except MCPError:
            return
        self.guard.set_tools(tool_info(t) for t in listed)

    async def _all_tools(self) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(1000):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self.upstream.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    # -- agent -> upstream ------------------------------------------------------------------------

    def _seen(self, ctx: Any) -> None:
        if self.agent is None:
            self.agent = ctx.session

    async def _send(self, request: Any, result_type: Any) -> Any:
        try:
            return await self.upstream.send_request(request, result_type)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self.lost.set()
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            self.lost.set()
            raise MCPError(CONNECTION_CLOSED, "gitledger: the upstream MCP server is gone") from exc

    def forward(self, request_cls: Any, result_cls: Any) -> Callable[[Any, Any], Awaitable[Any]]:
        async def handler(ctx: Any, params: Any) -> Any:
            self._seen(ctx)
            return await self._send(request_cls(params=params), result_cls)

        return handler

    async def list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._seen(ctx)
        result: types.ListToolsResult = await self._send(
            types.ListToolsRequest(params=params), types.ListToolsResult
        )
        if params is None or not params.cursor:
            known = dict(self.guard.tools)
            known.update({t.name: tool_info(t) for t in result.tools})
            self.guard.set_tools(known.values())
        return result

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        self._seen(ctx)
        if self.guard.rule_for(params.name) is None:  # read-only: straight through
            result: types.CallToolResult = await self._send(
                types.CallToolRequest(params=params), types.CallToolResult
            )
            return result
        reply = await anyio.to_thread.run_sync(
            self.guard.handle, params.name, params.arguments, _ThreadUpstream(self)
        )
        if reply.error is not None:
            raise MCPError(reply.error.code, reply.error.message)
        assert reply.result is not None
        return types.CallToolResult.model_validate(reply.result)

    async def upstream_call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
        try:
            result = await self._send(request, types.CallToolResult)
        except MCPError as exc:
            raise UpstreamError(exc.code, exc.message, unknown=exc.code in _UNKNOWN_CODES) from exc
        except ValidationError as exc:
            raise UpstreamError(
                types.INTERNAL_ERROR,
                f"the upstream answered with an invalid result ({exc})"[:500],
                unknown=True,
            ) from exc
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped


class _ThreadUpstream:
    """The upstream as the guard sees it from its worker thread (blocking calls)."""

    def __init__(self, proxy: _Proxy) -> None:
        self.proxy = proxy

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return anyio.from_thread.run(self.proxy.upstream_call, name, arguments)


def _server(proxy: _Proxy, init: types.InitializeResult) -> Server[Any]:
    caps = init.capabilities
    handlers: dict[str, Any] = {"on_list_tools": proxy.list_tools, "on_call_tool": proxy.call_tool}
    if caps.resources is not None:
        handlers["on_list_resources"] = proxy.forward(types.ListResourcesRequest, types.ListResourcesResult)
        handlers["on_list_resource_templates"] = proxy.forward(
            types.ListResourceTemplatesRequest, types.ListResourceTemplatesResult
        )
        handlers["on_read_resource"] = proxy.forward(types.ReadResourceRequest, types.ReadResourceResult)
        if caps.resources.subscribe:
            handlers["on_subscribe_resource"] = proxy.forward(types.SubscribeRequest, types.EmptyResult)
            handlers["on_unsubscribe_resource"] = proxy.forward(types.UnsubscribeRequest, types.EmptyResult)
    if caps.prompts is not None:
        handlers["on_list_prompts"] = proxy.forward(types.ListPromptsRequest, types.ListPromptsResult)
        handlers["on_get_prompt"] = proxy.forward(types.GetPromptRequest, types.GetPromptResult)
    if caps.completions is not None:
        handlers["on_completion"] = proxy.forward(types.CompleteRequest, types.CompleteResult)
    info = init.server_info
    return Server(
        info.name,
        version=info.version,
        title=info.title,
        description=info.description,
        instructions=init.instructions,
        website_url=info.website_url,
        icons=info.icons,
        **handlers,
    )


async def serve(request: ProxyRequest, guard: ProxyGuard, status: dict[str, bool]) -> None:
    """Serve the agent until it closes stdin; ``status["lost"]`` tells whether the upstream went away
    (the proxy then stops: the agent's client may start it again)."""
    params = StdioServerParameters(
        command=request.command[0],
        args=list(request.command[1:]),
        env=dict(os.environ),  # the upstream needs its token; the SDK default passes only a few variables
        cwd=os.getcwd(),
    )
    async with stdio_client(params) as (read, write):
        holder: list[_Proxy] = []

        async def on_message(message: types.ServerNotification | Exception) -> None:
            if holder:
                await holder[0].on_upstream_message(message)

        async with ClientSession(read, write, message_handler=on_message) as upstream:
            init = await upstream.initialize()
            proxy = _Proxy(upstream, guard)
            holder.append(proxy)
            status["lost"] = False
            if init.capabilities.tools is not None:
                guard.set_tools(tool_info(t) for t in await proxy._all_tools())
            server = _server(proxy, init)
            server.middleware = []  # no per-message tracing span: the pass-through stays lean
            options = InitializationOptions(
                server_name=init.server_info.name,
                server_version=init.server_info.version,
                title=init.server_info.title,
                description=init.server_info.description,
                capabilities=init.capabilities,
                instructions=init.instructions,
                website_url=init.server_info.website_url,
                icons=init.server_info.icons,
            )
            async with stdio_server() as (agent_read, agent_write), anyio.create_task_group() as tg:

                async def watch() -> None:
                    await proxy.lost.wait()
                    status["lost"] = True
                    await anyio.sleep(0.2)  # let the error reply reach the agent first
                    tg.cancel_scope.cancel()

                async def run() -> None:
                    await server.run(agent_read, agent_write, options)
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                tg.start_soon(run)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def run(request: ProxyRequest) -> int:
    """Serve until the agent closes stdin (0), or the upstream is lost or cannot start (1)."""
    status: dict[str, bool] = {}
    with open_guard(request, PROFILES_DIR) as guard:
        try:
            anyio.run(serve, request, guard, status)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            if not status.get("lost"):
                cause = _leaf(exc)
                what = "start" if "lost" not in status else "keep serving"
                print(
                    f"gitledger: mcp-proxy could not {what} the upstream MCP server {request.command[0]!r}: "
                    f"{type(cause).__name__}: {cause}".replace("\n", " ")[:1000],
                    file=sys.stderr,
                )
                return 1
        if status.get("lost"):
            print("gitledger: the upstream MCP server exited; the proxy stops", file=sys.stderr)
            return 1
    return 0
