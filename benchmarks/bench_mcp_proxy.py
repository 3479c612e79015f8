"""Latency ``gitledger mcp-proxy`` adds in front of an MCP server, against a direct connection.

    python benchmarks/bench_mcp_proxy.py [--calls 40] [--baseline REV] [--json OUT]

Modes: the fake GitHub MCP server of the tests (tests/mcp_upstream.py) ``direct``, through this
checkout's ``gitledger mcp-proxy --profile github`` (``proxy``) and, with ``--baseline REV``, through
the proxy of another revision (``baseline``: its ``gitledger/`` exported with ``git archive`` as
benchmarks/ab.py does; nothing in the repository changes). Every measurement interleaves the modes,
round by round with the order rotating, so a load change on the machine hits every mode alike.

1. A raw JSON-lines client per mode (no SDK on either side of the proxy; its own fake GitHub state)
   times ``raw_ping`` and ``raw_read`` (``get_me``): without the SDK client's own jitter, the hop the
   proxy adds is what remains. The SDK-based proxy of older revisions answers ``ping`` itself (the
   relay forwards it), so compare ``raw_read`` across revisions.
2. An SDK client per mode, all connected at once, per round:

   - ``ping``: the upstream's ``ping``;
   - ``read``: ``get_me`` (readOnlyHint: passed straight through by the proxy);
   - ``guarded_new``: ``create_pull_request`` for a new head (a new key: the proxy claims, asks the
     upstream's ``list_pull_requests``, calls the upstream, records ``done`` with the whole result);
   - ``list``: the upstream's ``list_pull_requests`` itself, directly (the one read a new guarded
     call adds by design);
   - ``replayed``: the same intent again through the proxy (answered from the ledger).

3. Per mode, 5 x ``--calls`` pings and as many reads in a row, and the CPU time (user + system, all
   threads, from ``/proc/PID/stat``) the proxy process spent per call (``cpu_ping``, ``cpu_read``; for
   ``direct``, the upstream's own): what a pass-through call costs the proxy, which the load of a
   shared machine does not inflate the way it inflates wall time.

Also the in-process fresh step (``StepRunner.run`` on a new key, the ledger work of one step) on the
same repository, so that ``guarded_new(proxy) - guarded_new(direct) - list(direct)`` can be compared
with it. Prints medians (ms) and ratios; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import PY, bench_env, init_repo, summarize, use_isolated_git  # noqa: E402

UPSTREAM = str(ROOT / "tests" / "mcp_upstream.py")
WARMUP = 2  # rounds per mode not counted (first calls: imports, the proxy's first tools listing)
CPU_CALLS = 5  # x --calls pass-through calls per CPU measurement (the clock ticks 100 times a second)


def _cpu_s(pidfile: Path) -> float:
    """CPU time (user + system, s) of the process whose pid is in ``pidfile``, its ended threads
    included (``/proc/PID/stat``; clock ticks, hence the many calls per measurement)."""
    pid = pidfile.read_text().split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _connect(stack: AsyncExitStack, mode: str, repo: Path, state: Path, baseline: Path | None) -> Any:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = bench_env({"FAKE_MCP_STATE": str(state), "GITLEDGER_TASK": "bench"})
    env["FAKE_MCP_PIDFILE"] = str(state.parent / f"{mode}.upstream.pid")
    if mode == "baseline":
        assert baseline is not None
        env["PYTHONPATH"] = os.pathsep.join([str(baseline), env["PYTHONPATH"]])
    if mode == "direct":
        args = [UPSTREAM]
    else:
        args = ["-m", "gitledger", "mcp-proxy", "--profile", "github", "--", PY, UPSTREAM]
    # exec keeps the pid: the proxy's (or the direct upstream's) CPU time is read from /proc
    command = ["sh", "-c", 'echo $$ > "$0"; exec "$@"', str(state.parent / f"{mode}.pid"), PY, *args]
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(repo))
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    await session.list_tools()
    return session


async def _round(session: Any, mode: str, i: int, out: dict[str, list[float]] | None) -> None:
    samples: dict[str, list[float]] = out if out is not None else {}
    t = time.perf_counter()
    await session.send_ping()
    samples.setdefault("ping", []).append(time.perf_counter() - t)
    t = time.perf_counter()
    await session.call_tool("get_me", {})
    samples.setdefault("read", []).append(time.perf_counter() - t)
    head = f"{mode}-{i}"
    pr = {"owner": "acme", "repo": "w", "head": head, "base": "main", "title": f"t{i}"}
    t = time.perf_counter()
    made = await session.call_tool("create_pull_request", pr)
    samples.setdefault("guarded_new", []).append(time.perf_counter() - t)
    assert not made.is_error, made
    if mode == "direct":
        t = time.perf_counter()
        await session.call_tool("list_pull_requests", {"owner": "acme", "repo": "w", "head": f"acme:{head}"})
        samples.setdefault("list", []).append(time.perf_counter() - t)
    else:
        t = time.perf_counter()
        again = await session.call_tool("create_pull_request", {**pr, "title": "reworded"})
        samples.setdefault("replayed", []).append(time.perf_counter() - t)
        assert again.structured_content == made.structured_content


async def _measure(
    repo: Path, state: Path, calls: int, modes: list[str], baseline: Path | None
) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {mode: {} for mode in modes}
    async with AsyncExitStack() as stack:
        sessions = {mode: await _connect(stack, mode, repo, state, baseline) for mode in modes}
        for i in range(-WARMUP, calls):
            for k in range(len(modes)):
                mode = modes[(i + k) % len(modes)]
                await _round(sessions[mode], mode, i, out[mode] if i >= 0 else None)
        # CPU time per pass-through call, in the proxy process itself (load on the machine delays a
        # call but does not add CPU time to it): CPU_CALLS x calls pings, then as many reads
        for mode in modes:
            pidfile = state.parent / f"{mode}.pid"
            session = sessions[mode]
            for name, send in (
                ("ping", session.send_ping),
                ("read", lambda s=session: s.call_tool("get_me", {})),
            ):
                before = _cpu_s(pidfile)
                for _ in range(CPU_CALLS * calls):
                    await send()
                out[mode][f"cpu_{name}"] = [(_cpu_s(pidfile) - before) / (CPU_CALLS * calls)]
    return out


def _raw_rounds(
    repo: Path, state: Path, calls: int, modes: list[str], baseline: Path | None
) -> dict[str, dict[str, list[float]]]:
    """Ping and read round trips from a raw JSON-lines client (no SDK on the client side either), the
    modes interleaved call by call: the cleanest view of the hop the proxy adds."""
    import subprocess

    env = bench_env({"FAKE_MCP_STATE": str(state), "GITLEDGER_TASK": "bench"})
    procs = {}
    for mode in modes:
        menv = dict(env)
        if mode == "baseline":
            assert baseline is not None
            menv["PYTHONPATH"] = os.pathsep.join([str(baseline), env["PYTHONPATH"]])
        args = [UPSTREAM] if mode == "direct" else ["-m", "gitledger", "mcp-proxy", "--", PY, UPSTREAM]
        proc = subprocess.Popen(
            [PY, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=menv, cwd=repo
        )
        procs[mode] = proc
        _raw_call(proc, "initialize", INIT, "init")
        _raw_send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    out: dict[str, dict[str, list[float]]] = {mode: {"raw_ping": [], "raw_read": []} for mode in modes}
    try:
        for i in range(-WARMUP, calls):
            for k in range(len(modes)):
                mode = modes[(i + k) % len(modes)]
                for name, method, params in (
                    ("raw_ping", "ping", None),
                    ("raw_read", "tools/call", {"name": "get_me", "arguments": {}}),
                ):
                    t = time.perf_counter()
                    _raw_call(procs[mode], method, params, f"{name}-{i}")
                    if i >= 0:
                        out[mode][name].append(time.perf_counter() - t)
    finally:
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)
    return out


INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "bench-raw-client", "version": "1"},
}


def _raw_send(proc: Any, message: dict[str, Any]) -> None:
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _raw_call(proc: Any, method: str, params: dict[str, Any] | None, ident: str) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        message["params"] = params
    _raw_send(proc, message)
    for _ in range(100):
        answer: dict[str, Any] = json.loads(proc.stdout.readline())
        if answer.get("id") == ident:
            assert "result" in answer, answer
            return answer
    raise AssertionError(f"no answer to {method}")


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
    parser.add_argument("--baseline", default=None, help="a revision whose proxy is measured too")
    parser.add_argument("--json", type=Path, default=None)
    opts = parser.parse_args(argv)
    import anyio

    use_isolated_git()
    modes = ["direct", "proxy", *(["baseline"] if opts.baseline else [])]
    with tempfile.TemporaryDirectory(prefix="gitledger-bench-mcp-") as tmp:
        baseline = None
        if opts.baseline:
            from benchmarks.ab import export

            baseline = export(opts.baseline, Path(tmp) / "baseline")
        repo = init_repo(Path(tmp) / "repo")
        state = Path(tmp) / "github.json"
        raw = _raw_rounds(repo, Path(tmp) / "raw.json", opts.calls, modes, baseline)
        measured = anyio.run(_measure, repo, state, opts.calls, modes, baseline)
        for mode, samples in raw.items():
            measured[mode].update(samples)
        fresh = _fresh_steps(repo, opts.calls)
    med = {mode: {name: summarize(v)["median"] for name, v in m.items()} for mode, m in measured.items()}
    direct = med["direct"]
    fresh_ms = summarize(fresh)["median"]
    report: dict[str, Any] = {"calls": opts.calls, "baseline": opts.baseline, "median_ms": med}
    report["in_process_fresh_step_ms"] = fresh_ms
    for mode in modes[1:]:
        pmed = med[mode]
        added_new = pmed["guarded_new"] - direct["guarded_new"]
        report[f"{mode}_cpu_ms_per_ping"] = pmed["cpu_ping"]
        report[f"{mode}_cpu_ms_per_read"] = pmed["cpu_read"]
        report[f"{mode}_added_raw_ping_ms"] = pmed["raw_ping"] - direct["raw_ping"]
        report[f"{mode}_added_raw_read_ms"] = pmed["raw_read"] - direct["raw_read"]
        report[f"{mode}_added_ping_ms"] = pmed["ping"] - direct["ping"]
        report[f"{mode}_added_read_ms"] = pmed["read"] - direct["read"]
        report[f"{mode}_added_guarded_new_ms"] = added_new
        report[f"{mode}_ledger_work_ms"] = added_new - direct["list"]
        report[f"{mode}_ratio_read_over_direct"] = pmed["read"] / direct["read"]
        report[f"{mode}_ratio_guarded_new_over_direct"] = pmed["guarded_new"] / direct["guarded_new"]
        report[f"{mode}_ratio_ledger_work_over_fresh_step"] = (added_new - direct["list"]) / fresh_ms
        report[f"{mode}_ratio_replayed_over_direct_create"] = pmed["replayed"] / direct["guarded_new"]
    for name, value in report.items():
        if isinstance(value, dict):
            for mode, cells in value.items():
                print(f"{name + ' ' + mode:40} " + " ".join(f"{k}={v:.3f}" for k, v in cells.items()))
        elif isinstance(value, float):
            print(f"{name:40} {value:.3f}")
        else:
            print(f"{name:40} {value}")
    if opts.json is not None:
        opts.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
