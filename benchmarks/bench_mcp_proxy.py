"""Latency ``gitledger mcp-proxy`` adds in front of an MCP server, against a direct connection.

    python benchmarks/bench_mcp_proxy.py [--calls 40] [--json OUT]

One SDK client per mode talks over stdio to the fake GitHub MCP server of the tests
(tests/mcp_upstream.py), directly or through ``gitledger mcp-proxy --profile github``. Per call, in
alternating rounds:

- ``read``: ``get_me`` (readOnlyHint: passed straight through by the proxy);
- ``guarded_new``: ``create_pull_request`` for a new head (a new key: the proxy claims, asks the
  upstream's ``list_pull_requests``, calls the upstream, records ``done`` with the whole result);
- ``list``: the upstream's ``list_pull_requests`` itself, directly (the one read a new guarded call
  adds by design);
- ``replayed``: the same intent again through the proxy (answered from the ledger).

Also the in-process fresh step (``StepRunner.run`` on a new key, the ledger work of one step) on the
same repository, so that ``guarded_new(proxy) - guarded_new(direct) - list(direct)`` can be compared
with it. Prints medians (ms) and ratios; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import PY, bench_env, init_repo, summarize, use_isolated_git  # noqa: E402

UPSTREAM = str(ROOT / "tests" / "mcp_upstream.py")


async def _measure(repo: Path, state: Path, calls: int, proxied: bool) -> dict[str, list[float]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = bench_env({"FAKE_MCP_STATE": str(state), "GITLEDGER_TASK": "bench"})
    if proxied:
        args = ["-m", "gitledger", "mcp-proxy", "--profile", "github", "--", PY, UPSTREAM]
    else:
        args = [UPSTREAM]
    params = StdioServerParameters(command=PY, args=args, env=env, cwd=str(repo))
    tag = "p" if proxied else "d"
    out: dict[str, list[float]] = {"read": [], "guarded_new": [], "list": [], "replayed": []}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        for i in range(calls):
            t = time.perf_counter()
            await session.call_tool("get_me", {})
            out["read"].append(time.perf_counter() - t)
            pr = {"owner": "acme", "repo": "w", "head": f"{tag}-{i}", "base": "main", "title": f"t{i}"}
            t = time.perf_counter()
            made = await session.call_tool("create_pull_request", pr)
            out["guarded_new"].append(time.perf_counter() - t)
            assert not made.is_error, made
            if proxied:
                t = time.perf_counter()
                again = await session.call_tool("create_pull_request", {**pr, "title": "reworded"})
                out["replayed"].append(time.perf_counter() - t)
                assert again.structured_content == made.structured_content
            else:
                t = time.perf_counter()
                await session.call_tool(
                    "list_pull_requests", {"owner": "acme", "repo": "w", "head": f"acme:{tag}-{i}"}
                )
                out["list"].append(time.perf_counter() - t)
    return out


def _fresh_steps(repo: Path, calls: int) -> list[float]:
    from gitledger.core.checks import LedgerCheck
    from gitledger.core.keys import StepKey
    from gitledger.core.protocol import ActionResult, StepRunner
    from gitledger.git.repo import GitRepo
    from gitledger.git.store import GitStore

    samples = []
    with GitRepo.discover(repo) as git_repo:
        runner = StepRunner(GitStore(git_repo))
        for i in range(calls):
            t = time.perf_counter()
            runner.run(StepKey.derive("bench-fresh", f"s{i}"), [LedgerCheck()], lambda: ActionResult(ok=True))
            samples.append(time.perf_counter() - t)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--json", type=Path, default=None)
    opts = parser.parse_args(argv)
    import anyio

    use_isolated_git()
    with tempfile.TemporaryDirectory(prefix="gitledger-bench-mcp-") as tmp:
        repo = init_repo(Path(tmp) / "repo")
        state = Path(tmp) / "github.json"
        direct = anyio.run(_measure, repo, state, opts.calls, False)
        proxy = anyio.run(_measure, repo, state, opts.calls, True)
        fresh = _fresh_steps(repo, opts.calls)
    med = {name: summarize(v)["median"] for name, v in direct.items() if v}
    pmed = {name: summarize(v)["median"] for name, v in proxy.items() if v}
    fresh_ms = summarize(fresh)["median"]
    added_read = pmed["read"] - med["read"]
    added_new = pmed["guarded_new"] - med["guarded_new"]
    report: dict[str, Any] = {
        "calls": opts.calls,
        "direct_ms": med,
        "proxy_ms": pmed,
        "in_process_fresh_step_ms": fresh_ms,
        "added_read_ms": added_read,
        "added_guarded_new_ms": added_new,
        "ledger_work_ms": added_new - med["list"],
        "ratio_read_proxy_over_direct": pmed["read"] / med["read"],
        "ratio_guarded_new_proxy_over_direct": pmed["guarded_new"] / med["guarded_new"],
        "ratio_ledger_work_over_fresh_step": (added_new - med["list"]) / fresh_ms,
        "ratio_replayed_over_direct_create": pmed["replayed"] / med["guarded_new"],
    }
    for name, value in report.items():
        print(f"{name:40} {json.dumps(value) if isinstance(value, dict) else round(float(value), 3)}")
    if opts.json is not None:
        opts.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
