"""``gitledger mcp-proxy``: parsed here without the CLI framework (the proxy is long-lived and lean).

``main()`` in :mod:`gitledger.cli` hands ``mcp-proxy ...`` to :func:`main` before typer is imported.
The proxy is a raw JSON-RPC relay (:mod:`gitledger.mcp.relay`, standard library only): no MCP SDK,
pydantic, anyio or typer is imported on its path.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from gitledger.core.errors import EXIT_USAGE, GitledgerError, UsageError
from gitledger.core.keys import MAX_NAME_LEN, require_printable

USAGE = "usage: gitledger mcp-proxy [--profile NAME] [--task T] [--repo PATH] -- UPSTREAM_CMD [ARG...]"

HELP = f"""{USAGE}

Serve MCP on stdin/stdout in front of the MCP server UPSTREAM_CMD (started as a child), forwarding
everything and guarding its write tools with the repository's gitledger ledger: a repeated intent
(a retry, a reworded call, a call after a crash or restart) gets the first result back instead of a
second effect. Tools marked readOnlyHint pass straight through; the profile names each write tool's
natural key and how to find its effect with the server's own read tools.

Options:
  --profile NAME  key profile: a built-in one (github) or mcp.profiles.NAME in .gitledger.yml;
                  without it, tools are guarded by their annotations and keyed on all arguments
  --task T        the task the calls belong to (default: GITLEDGER_TASK, git config
                  gitledger.task, or the branch under agent.task_branch in .gitledger.yml)
  --repo PATH     the repository whose ledger records the calls (default: the current directory)
  -h, --help      show this message

Example (Claude Code .mcp.json / any MCP client):
  "command": "gitledger", "args": ["mcp-proxy", "--profile", "github", "--",
                                   "github-mcp-server", "stdio"]

Needs no MCP SDK: the proxy relays the server's JSON-RPC lines as they are. See docs/mcp.md."""

_OPTIONS = {"--profile": "profile", "--task": "task", "--repo": "repo"}


def parse(argv: Sequence[str]) -> dict[str, object]:
    """The options and the upstream command; raises ValueError (UsageError for a control character)
    with a one-line reason."""
    args = list(argv)
    if "--" not in args:
        raise ValueError("give the upstream MCP server after '--', e.g. -- github-mcp-server stdio")
    split = args.index("--")
    options, command = args[:split], args[split + 1 :]
    if not command or not command[0]:
        raise ValueError("the upstream command after '--' is empty; e.g. -- github-mcp-server stdio")
    values: dict[str, object] = {"command": tuple(command)}
    i = 0
    while i < len(options):
        word = options[i]
        name, eq, inline = word.partition("=")
        field = _OPTIONS.get(name)
        if field is None:
            raise ValueError(f"unknown option {word!r} (see 'gitledger mcp-proxy --help')")
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(options):
            value, i = options[i + 1], i + 2
        else:
            raise ValueError(f"{name} needs a value")
        if field in values:
            raise ValueError(f"{name} is given twice; give it once")
        if not value.strip():
            raise ValueError(f"{name} must not be empty")
        if field != "repo":  # (a path may hold anything but NUL)
            require_printable(value, name)
        if field == "task" and len(value) > MAX_NAME_LEN:  # else every guarded call fails on it
            raise ValueError(f"{name} is {len(value)} characters long; keep it under {MAX_NAME_LEN}")
        values[field] = value
    return values


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    options = args[: args.index("--")] if "--" in args else args
    if any(a in ("-h", "--help") for a in options):
        print(HELP)
        return 0
    # no arguments is a usage error too, on stderr: an agent starts the proxy with stdout as its
    # MCP channel, where a help text would only be an unreadable message
    try:
        values = parse(args)
    except (ValueError, UsageError) as exc:
        print(f"gitledger: mcp-proxy: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from gitledger.features.proxy.setup import ProxyRequest
    from gitledger.git.repo import lock_timeout
    from gitledger.mcp.relay import run

    request = ProxyRequest(
        command=values["command"],  # type: ignore[arg-type]
        profile=values.get("profile"),  # type: ignore[arg-type]
        task=values.get("task"),  # type: ignore[arg-type]
        repo=values.get("repo"),  # type: ignore[arg-type]
    )
    try:
        lock_timeout(None)  # a bad GITLEDGER_LOCK_TIMEOUT is refused now, not at a call mid-relay
        return run(request)
    except GitledgerError as exc:
        from gitledger.cli.render import printable

        print(f"gitledger: {printable(exc.message)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
