"""A fake upstream MCP server for the proxy tests, written with the real ``mcp`` SDK (stdio).

Shaped like the GitHub MCP server's tools (github/github-mcp-server): ``create_pull_request``,
``list_pull_requests``, ``add_issue_comment``, ``get_issue_comments``, ``create_issue``,
``list_issues``, ``create_branch``, ``list_branches`` and ``get_me``, with the same annotations
(reads ``readOnlyHint: true``; writes ``readOnlyHint: false, idempotentHint: false``). Unlike the
real server, the writes declare an ``outputSchema`` and return ``structuredContent``, which is what
makes a proxy that replays only text fail (the structured-result trap).

Its "GitHub" is a JSON file (``FAKE_MCP_STATE``) shared by every process started on it, so effects
survive restarts of the proxy and of this server, and tests count them. Like GitHub, a second open
pull request for the same head and base is refused (an error result mentioning 422).

Behaviour switches (environment, for the tests only):

- ``FAKE_MCP_SLOW=SECONDS``: sleep that long *after* a write took effect and before answering (the
  window in which a test SIGKILLs the proxy); ``FAKE_MCP_EFFECT_MARK=PATH``: touch PATH at that moment.
- ``FAKE_MCP_CRASH=TOOL``: exit the process when TOOL is called, before any effect.
- ``FAKE_MCP_FAIL=TOOL``: answer TOOL with an error result (``isError``), no effect.
- ``FAKE_MCP_WIRE=PATH``: append every line that arrives on stdin to PATH, as received (what a proxy
  in front of this server forwarded, byte for byte).

Tools that reach back to the client (for the relay's pass-through tests): ``ask_client`` sends a
sampling, elicitation or roots request to the client and returns its answer; ``count_slowly`` sends
progress notifications and records a cancellation in the state (``calls``: ``count_slowly:cancelled``);
``make_notes_read_only`` re-annotates ``send_note`` as read-only and notifies
``notifications/tools/list_changed``.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

API = "https://github.example.invalid"
READ = types.ToolAnnotations(read_only_hint=True)
WRITE = types.ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False)


def _schema(props: dict[str, str], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in props.items()},
        "required": required,
    }


PR_OUT = _schema(
    {"number": "integer", "url": "string", "state": "string", "title": "string"}, ["number", "url"]
)
COMMENT_OUT = _schema({"id": "integer", "url": "string"}, ["id", "url"])
ISSUE_OUT = _schema({"number": "integer", "url": "string"}, ["number", "url"])
BRANCH_OUT = _schema({"ref": "string", "sha": "string"}, ["ref"])

TOOLS = [
    types.Tool(
        name="create_pull_request",
        description="Create a new pull request in a GitHub repository.",
        input_schema=_schema(
            {
                "owner": "string",
                "repo": "string",
                "title": "string",
                "head": "string",
                "base": "string",
                "body": "string",
                "draft": "boolean",
            },
            ["owner", "repo", "title", "head", "base"],
        ),
        output_schema=PR_OUT,
        annotations=WRITE,
    ),
    types.Tool(
        name="list_pull_requests",
        description="List pull requests in a GitHub repository.",
        input_schema=_schema(
            {"owner": "string", "repo": "string", "head": "string", "base": "string", "state": "string"},
            ["owner", "repo"],
        ),
        annotations=READ,
    ),
    types.Tool(
        name="add_issue_comment",
        description="Add a comment to an issue or pull request.",
        input_schema=_schema(
            {"owner": "string", "repo": "string", "issue_number": "number", "body": "string"},
            ["owner", "repo", "issue_number", "body"],
        ),
        output_schema=COMMENT_OUT,
        annotations=WRITE,
    ),
    types.Tool(
        name="get_issue_comments",
        description="Get comments for an issue.",
        input_schema=_schema(
            {"owner": "string", "repo": "string", "issue_number": "number"}, ["owner", "repo", "issue_number"]
        ),
        annotations=READ,
    ),
    types.Tool(
        name="create_issue",
        description="Create a new issue in a GitHub repository.",
        input_schema=_schema(
            {"owner": "string", "repo": "string", "title": "string", "body": "string"},
            ["owner", "repo", "title"],
        ),
        output_schema=ISSUE_OUT,
        annotations=WRITE,
    ),
    types.Tool(
        name="list_issues",
        description="List issues in a GitHub repository.",
        input_schema=_schema({"owner": "string", "repo": "string", "state": "string"}, ["owner", "repo"]),
        annotations=READ,
    ),
    types.Tool(
        name="create_branch",
        description="Create a new branch in a GitHub repository.",
        input_schema=_schema(
            {"owner": "string", "repo": "string", "branch": "string", "from_branch": "string"},
            ["owner", "repo", "branch"],
        ),
        output_schema=BRANCH_OUT,
        annotations=WRITE,
    ),
    types.Tool(
        name="list_branches",
        description="List branches in a GitHub repository.",
        input_schema=_schema({"owner": "string", "repo": "string"}, ["owner", "repo"]),
        annotations=READ,
    ),
    types.Tool(
        name="get_me",
        description="Get details of the authenticated GitHub user.",
        input_schema=_schema({}, []),
        annotations=READ,
    ),
    types.Tool(
        name="send_note",
        description="A write tool no profile knows (keyed on its canonical arguments).",
        input_schema=_schema({"text": "string"}, ["text"]),
        annotations=types.ToolAnnotations(read_only_hint=False),
    ),
    types.Tool(
        name="ask_client",
        description="Ask the client (what: sampling, elicitation or roots) and return its answer.",
        input_schema=_schema({"what": "string"}, ["what"]),
        annotations=READ,
    ),
    types.Tool(
        name="count_slowly",
        description="Count to 'to', one progress notification per step, 'delay' seconds apart.",
        input_schema=_schema({"to": "integer", "delay": "number"}, ["to"]),
        annotations=READ,
    ),
    types.Tool(
        name="make_notes_read_only",
        description="From now on send_note is listed as read-only (notifies tools/list_changed).",
        input_schema=_schema({}, []),
        annotations=types.ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    ),
]
INTERACTIVE = ("ask_client", "count_slowly", "make_notes_read_only")


@contextmanager
def state() -> Iterator[dict[str, Any]]:
    """The shared fake GitHub, locked for the duration of one call."""
    path = Path(os.environ["FAKE_MCP_STATE"])
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        for name in ("pulls", "comments", "issues", "branches", "notes", "calls"):
            data.setdefault(name, [])
        yield data
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)


def _text_json(value: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(value))])


def _made(value: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(value))], structured_content=value)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _after_effect() -> None:
    mark = os.environ.get("FAKE_MCP_EFFECT_MARK")
    if mark:
        Path(mark).write_text("effect")
    time.sleep(float(os.environ.get("FAKE_MCP_SLOW", "0")))


def _write(name: str, a: dict[str, Any]) -> types.CallToolResult:
    with state() as s:
        s["calls"].append(name)
        if name == "create_pull_request":
            for pr in s["pulls"]:
                same = pr["head"]["ref"] == a["head"] and pr["base"]["ref"] == a["base"]
                if same and pr["state"] == "open":
                    return _error(
                        f"failed to create pull request: POST {API}/repos/{a['owner']}/{a['repo']}/pulls: "
                        f"422 Validation Failed [A pull request already exists for {a['owner']}:{a['head']}.]"
                    )
            number = len(s["pulls"]) + len(s["issues"]) + 1
            url = f"{API}/{a['owner']}/{a['repo']}/pull/{number}"
            s["pulls"].append(
                {
                    "number": number,
                    "html_url": url,
                    "title": a["title"],
                    "body": a.get("body", ""),
                    "state": "open",
                    "head": {"ref": a["head"], "label": f"{a['owner']}:{a['head']}"},
                    "base": {"ref": a["base"]},
                }
            )
            made: dict[str, Any] = {"number": number, "url": url, "state": "open", "title": a["title"]}
        elif name == "add_issue_comment":
            ident = 1000 + len(s["comments"])
            url = f"{API}/{a['owner']}/{a['repo']}/issues/{a['issue_number']}#issuecomment-{ident}"
            s["comments"].append(
                {"id": ident, "issue_number": a["issue_number"], "body": a["body"], "html_url": url}
            )
            made = {"id": ident, "url": url}
        elif name == "create_issue":
            number = len(s["pulls"]) + len(s["issues"]) + 1
            url = f"{API}/{a['owner']}/{a['repo']}/issues/{number}"
            s["issues"].append(
                {
                    "number": number,
                    "title": a["title"],
                    "body": a.get("body", ""),
                    "html_url": url,
                    "state": "open",
                }
            )
            made = {"number": number, "url": url}
        elif name == "create_branch":
            if any(b["name"] == a["branch"] for b in s["branches"]):
                return _error(f"failed to create branch: 422 Reference already exists ({a['branch']})")
            s["branches"].append({"name": a["branch"], "commit": {"sha": "0" * 40}})
            made = {"ref": f"refs/heads/{a['branch']}", "sha": "0" * 40}
        else:  # send_note
            s["notes"].append(a["text"])
            made = {"ok": True}
    _after_effect()
    return _made(made)


def _read(name: str, a: dict[str, Any]) -> types.CallToolResult:
    with state() as s:
        s["calls"].append(name)
        if name == "list_pull_requests":
            pulls = s["pulls"]
            if a.get("head"):
                owner_head = a["head"]
                pulls = [
                    p for p in pulls if p["head"]["label"] == owner_head or p["head"]["ref"] == owner_head
                ]
            if a.get("base"):
                pulls = [p for p in pulls if p["base"]["ref"] == a["base"]]
            if a.get("state", "open") != "all":
                pulls = [p for p in pulls if p["state"] == a.get("state", "open")]
            return _text_json(pulls)
        if name == "get_issue_comments":
            return _text_json([c for c in s["comments"] if c["issue_number"] == a["issue_number"]])
        if name == "list_issues":
            return _text_json(s["issues"])
        if name == "list_branches":
            return _text_json(s["branches"])
        return _text_json({"login": "fake-agent"})


def _notes_read_only() -> bool:
    path = Path(os.environ["FAKE_MCP_STATE"])
    return path.exists() and bool(json.loads(path.read_text()).get("notes_read_only"))


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    if _notes_read_only():
        return types.ListToolsResult(
            tools=[t.model_copy(update={"annotations": READ}) if t.name == "send_note" else t for t in TOOLS]
        )
    return types.ListToolsResult(tools=TOOLS)


async def _interactive(ctx: Any, name: str, a: dict[str, Any]) -> types.CallToolResult:
    if name == "ask_client":
        if a["what"] == "sampling":
            message = types.SamplingMessage(role="user", content=types.TextContent(text="What is 2 + 2?"))
            sampled = await ctx.session.create_message(
                [message], max_tokens=10, related_request_id=ctx.request_id
            )
            return _text_json({"sampled": sampled.content.text, "model": sampled.model})
        if a["what"] == "elicitation":
            schema = {"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]}
            elicited = await ctx.session.elicit_form(
                "Which branch?", schema, related_request_id=ctx.request_id
            )
            return _text_json({"action": elicited.action, "content": elicited.content})
        roots = await ctx.session.list_roots()
        return _text_json({"roots": [str(r.uri) for r in roots.roots]})
    if name == "count_slowly":
        token = (ctx.meta or {}).get("progress_token")
        try:
            for step in range(1, int(a["to"]) + 1):
                if token is not None:
                    await ctx.session.send_progress_notification(
                        token, step, a["to"], related_request_id=str(ctx.request_id)
                    )
                await anyio.sleep(float(a.get("delay", 0)))
        except anyio.get_cancelled_exc_class():
            with state() as s:
                s["calls"].append("count_slowly:cancelled")
            raise
        return _text_json({"counted": a["to"]})
    with state() as s:  # make_notes_read_only
        s["notes_read_only"] = True
    await ctx.session.send_tool_list_changed()
    return _text_json({"ok": True})


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name, args = params.name, dict(params.arguments or {})
    if os.environ.get("FAKE_MCP_CRASH") == name:
        os._exit(3)
    if os.environ.get("FAKE_MCP_FAIL") == name:
        return _error(f"{name} failed: 502 Bad Gateway from the fake GitHub")
    tool = next((t for t in TOOLS if t.name == name), None)
    if tool is None:
        return _error(f"unknown tool {name}")
    missing = [f for f in tool.input_schema.get("required", []) if f not in args]
    if missing:
        return _error(f"missing required parameter: {missing[0]}")
    if name in INTERACTIVE:
        return await _interactive(ctx, name, args)
    if tool.annotations is READ:
        return _read(name, args)
    return _write(name, args)


async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri="repo://acme/widgets/readme", name="readme", mime_type="text/plain")]
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=str(params.uri), text="# widgets", mime_type="text/plain")]
    )


async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="triage", description="Triage an issue")])


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    text = f"Triage issue {(params.arguments or {}).get('number', '?')}"
    return types.GetPromptResult(
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))]
    )


server = Server(
    "fake-github-mcp",
    version="9.9.9",
    instructions="A fake GitHub MCP server for gitledger's tests.",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
)


async def main() -> None:
    pidfile = os.environ.get("FAKE_MCP_PIDFILE")
    if pidfile:
        with open(pidfile, "a") as f:
            f.write(f"{os.getpid()}\n")
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _tap_stdin(wire: str) -> None:
    """Put a pipe in place of stdin, fed by a thread that also appends each line to ``wire``."""
    import threading

    read_end, write_end = os.pipe()
    source = os.dup(0)
    os.dup2(read_end, 0)
    os.close(read_end)

    def copy() -> None:
        with open(source, "rb") as incoming, open(wire, "ab", buffering=0) as log:
            for line in incoming:
                log.write(line)
                os.write(write_end, line)
        os.close(write_end)

    threading.Thread(target=copy, daemon=True).start()


if __name__ == "__main__":
    if os.environ.get("FAKE_MCP_WIRE"):
        _tap_stdin(os.environ["FAKE_MCP_WIRE"])
    sys.exit(anyio.run(main))
