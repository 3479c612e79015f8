"""Turn the results of one run into ``report.md`` (tables, targets, the plot) and ``report.json``."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

from benchmarks.common import ratio
from benchmarks.peers import PEERS  # the peers, when they were installed: stores of 100 entries only


def _f(value: Any, digits: int = 2) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of issues 2 and 8 with the measured figure and whether it is met."""
    rows: list[dict[str, Any]] = []
    overhead = results.get("overhead")
    if overhead:
        cells = overhead["results"]

        def med(size: int, kind: str, path: str) -> float | None:
            cell = cells.get(str(size), {}).get(kind)
            return None if cell is None else float(cell[path]["median"])

        for path in ("skip", "fresh"):
            base = med(100, "gitledger", path)
            for size in (10_000, 100_000):
                value = med(size, "gitledger", path)
                if base is not None and value is not None:
                    r = ratio(value, base)
                    rows.append(
                        {
                            "target": f"gitledger {path}: {size:,} entries vs 100 within 1.5x",
                            "measured": f"{r:.2f}x ({value:.3f} vs {base:.3f} ms)",
                            "met": r <= 1.5,
                        }
                    )
            git_10k, sql_10k = med(10_000, "gitledger", path), med(10_000, "sqlite", path)
            if git_10k is not None and sql_10k is not None:
                r = ratio(git_10k, sql_10k)
                rows.append(
                    {
                        "target": f"gitledger {path} within 3x of SQLite at 10,000 entries",
                        "measured": f"{r:.1f}x ({git_10k:.3f} vs {sql_10k:.3f} ms)",
                        "met": r <= 3.0,
                    }
                )
    process = results.get("process")
    if process:
        stats = process["results"]
        skip, floor = stats["skip"]["median"], stats["floor"]["median"]
        rows.append(
            {
                "target": "run-step skip path median < 150 ms (issue 2)",
                "measured": f"{skip:.1f} ms (p90 {stats['skip']['p90']:.1f})",
                "met": skip < 150,
            }
        )
        rows.append(
            {
                "target": "run-step skip path ≤ 5x floor (issue 8)",
                "measured": f"{ratio(skip, floor):.2f}x ({skip:.1f} vs floor {floor:.1f} ms)",
                "met": ratio(skip, floor) <= 5.0,
            }
        )
    if process and process.get("ratios"):
        ratios = process["ratios"]
        rows.append(
            {
                "target": "whole process: fresh run-step ≤ 1.3x the done-key fast path (issue 14)",
                "measured": f"{ratios['fresh_over_skip']:.2f}x (CPU {ratios['cpu_fresh_over_skip']:.2f}x)",
                "met": ratios["fresh_over_skip"] <= 1.3,
            }
        )
        rows.append(
            {
                "target": "whole process: done-key fast path ≤ 4x `python -c pass` (issue 14)",
                "measured": f"{ratios['skip_over_python']:.2f}x (CPU {ratios['cpu_skip_over_python']:.2f}x)",
                "met": ratios["skip_over_python"] <= 4.0,
            }
        )
    store = results.get("store")
    if store:
        rows += store_targets(store)
    return rows


# the engines of bench_store's in-process part, in the order of its rows (the previous engine runs only
# with a baseline)
STORE_ENGINES = (
    "gitledger-fsync",
    "gitledger-full",
    "gitledger-none",
    "sqlite-full",
    "sqlite-normal",
    "previous",
)


def store_targets(store: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 14's targets of the storage engine (``bench_store.run``)."""
    rows: list[dict[str, Any]] = []

    def row(target: str, value: float, limit: float, detail: str) -> None:
        rows.append(
            {"target": f"{target} (issue 14)", "measured": f"{value:.2f}x ({detail})", "met": value <= limit}
        )

    inp = store.get("in_process")
    if inp:
        large = store["sizes"][-1]

        def med(engine: str, size: int, path: str) -> float:
            return float(inp[f"{engine}@{size}"][path])

        def spread(a: tuple[str, int], b: tuple[str, int], path: str) -> str:
            ours = inp[f"{a[0]}@{a[1]}"].get("rounds", {}).get(path, [])
            return _round_range(ours, inp[f"{b[0]}@{b[1]}"].get("rounds", {}).get(path, []))

        for engine, peer, path, limit, name in (
            ("gitledger-fsync", "sqlite-full", "fresh", 1.0, "fresh, durable ≤ 1.0x SQLite WAL FULL"),
            (
                "gitledger-none",
                "sqlite-normal",
                "fresh",
                3.0,
                "fresh, `durability: none` ≤ 3x SQLite WAL NORMAL",
            ),
            ("gitledger-fsync", "sqlite-normal", "done", 4.0, "done ≤ 4x bare SQLite"),
        ):
            a, b = med(engine, large, path), med(peer, large, path)
            detail = f"{a:.3f} vs {b:.3f} ms" + spread((engine, large), (peer, large), path)
            row(f"{name}, {large:,} entries", ratio(a, b), limit, detail)
        if f"gitledger-full@{large}" in inp:  # like for like: every event synced, as SQLite FULL commits
            a, b = med("gitledger-full", large, "fresh"), med("sqlite-full", large, "fresh")
            detail = f"{a:.3f} vs {b:.3f} ms" + spread(
                ("gitledger-full", large), ("sqlite-full", large), "fresh"
            )
            rows.append(
                {
                    "target": f"for comparison, no target: fresh, `durability: full` (every event synced, "
                    f"two syncs a step as SQLite FULL's two commits) vs SQLite WAL FULL, {large:,} entries",
                    "measured": f"{ratio(a, b):.2f}x ({detail})",
                    "met": None,
                }
            )
        for path in ("fresh", "done"):
            a, b = med("gitledger-fsync", large, path), med("gitledger-fsync", 100, path)
            fsync = "gitledger-fsync"
            detail = f"{a:.3f} vs {b:.3f} ms" + spread((fsync, large), (fsync, 100), path)
            row(f"{path}: {large:,} vs 100 entries ≤ 1.3x", ratio(a, b), 1.3, detail)
    rows += _sustained_rows(store)
    writers = store.get("writers")
    if writers:
        for durability in ("fsync", "full", "none"):
            cells = sorted(
                (int(name.split("@")[1]), cell)
                for name, cell in writers.items()
                if name.startswith(f"gitledger-{durability}@")
            )
            if not cells:
                continue
            rates = [cell["steps_per_s"] for _, cell in cells]
            lost = sum(cell["lost"] for _, cell in cells)
            top_n, top = cells[-1][0], rates[-1]
            rising = all(b >= a for a, b in itertools.pairwise(rates))
            if durability == "full":  # not the default: shown beside the targets, never one
                target = f"for comparison, no target: {top_n} writers, `full`, steps/s and entries lost"
                met = None
            else:
                target = f"{top_n} writers, `{durability}`: ≥ 2,000 steps/s, rising with writers, 0 lost"
                target += " (issue 14)"
                met = top >= 2000 and rising and lost == 0
            measured = " → ".join(f"{r:,.0f}" for r in rates) + f" steps/s; {lost} lost"
            rows.append({"target": target, "measured": measured, "met": met})
        rows += _last_step_rows(writers)
    for growth in (store.get("growth"), store.get("growth_large")):
        if not growth:
            continue
        where = _grown_into(growth)
        for field, limit, name in (
            ("bytes_per_entry_written", 2048, "≤ 2 KB per entry as written"),
            ("bytes_per_entry_after_gc", 700, "≤ 700 B per entry after `git gc`"),
            ("loose_objects_per_step", 1, "≤ 1 loose object file per step"),
        ):
            value = float(growth[field])
            rows.append(
                {
                    "target": f"repository growth {name}, into {where} (issue 14)",
                    "measured": f"{value:.2f}" if field.startswith("loose") else f"{value:.0f} B",
                    "met": value <= limit,
                }
            )
    return rows


def _round_range(ours: list[float], theirs: list[float]) -> str:
    """The range of the ratio ours/theirs round by round (both ran in every round), or ''."""
    if len(ours) < 2 or len(ours) != len(theirs):
        return ""
    ratios = sorted(ratio(x, y) for x, y in zip(ours, theirs, strict=True))
    return f"; round by round {ratios[0]:.2f} to {ratios[-1]:.2f}x"


def _writer_counts(writers: dict[str, Any]) -> list[int]:
    """The writer counts measured, in order (cells are named ``engine@count``)."""
    return sorted({int(name.split("@")[1]) for name in writers})


def _last_step_rows(writers: dict[str, Any]) -> list[dict[str, Any]]:
    """The last step up in writers (4 to 8 in a full run), round by round, for the default engine, the
    ceiling (nothing shared) and bare SQLite: whether the machine lets anything rise there."""
    counts = _writer_counts(writers)
    if len(counts) < 2:
        return []
    low, high = counts[-2], counts[-1]
    shown = []
    for engine, label in (
        ("gitledger-fsync", "gitledger `fsync`"),
        ("gitledger-fsync-apart", "the ceiling (a ledger per writer, nothing shared)"),
        ("sqlite-full", "SQLite FULL"),
        ("sqlite-normal", "SQLite NORMAL"),
    ):
        a, b = writers.get(f"{engine}@{low}"), writers.get(f"{engine}@{high}")
        if a and b and len(a["runs"]) == len(b["runs"]):
            steps = [f"{y / x:.2f}" for x, y in zip(a["runs"], b["runs"], strict=True)]
            shown.append(f"{label} {', '.join(steps)}")
    if not shown:
        return []
    target = f"for comparison, no target: {low} → {high} writers, steps/s at {high} over steps/s at {low}, "
    target += "round by round"
    return [{"target": target, "measured": "; ".join(shown), "met": None}]


def _sustained_rows(store: dict[str, Any]) -> list[dict[str, Any]]:
    """The sustained fresh steps beside the medians' targets: never a target themselves (the issue's
    figures are medians), shown so that what the medians leave out, the folds, is in the report."""
    sustained = store.get("sustained")
    if not sustained:
        return []
    rows = []
    large, steps = store["sizes"][-1], store.get("sustained_steps", "?")
    for ours, theirs in (
        ("gitledger-fsync", "sqlite-full"),
        ("gitledger-full", "sqlite-full"),
        ("gitledger-none", "sqlite-normal"),
    ):
        a, b = sustained[ours], sustained[theirs]
        spread = _round_range(a["mean"], b["mean"])
        rows.append(
            {
                "target": f"for comparison, no target: fresh, `{ours.split('-')[1]}`, sustained (the mean of "
                f"{steps} steps in one process, folds included) vs SQLite WAL {theirs.split('-')[1].upper()} "
                f"(checkpoints included), {large:,} entries",
                "measured": f"{ratio(a['mean_ms'], b['mean_ms']):.2f}x ({a['mean_ms']:.3f} vs "
                f"{b['mean_ms']:.3f} ms{spread})",
                "met": None,
            }
        )
    return rows


def _grown_into(growth: dict[str, Any]) -> str:
    """What a growth measurement's steps were written into."""
    base = growth.get("ledger_before", 0)
    return f"a ledger of {base:,} entries" if base else "an empty repository"


def render_store(store: dict[str, Any]) -> list[str]:
    """Section 6: the storage engine against bare SQLite (and the previous engine, when it ran)."""
    out: list[str] = ["## 6. Storage engine (`bench_store.py`, issue 14)\n"]
    add = out.append
    large = store["sizes"][-1]
    baseline = store.get("baseline") or ""
    add(
        "`StepRunner.run` with a `ledger` check and a no-op action, each engine in a child process of its "
        f"own, {store['rounds']} interleaved rounds of {store['reps']} steps: *fresh* = a new key (claim, "
        "action, done); *done* = a done key (one load; each draw a key the process has not looked up "
        "yet). Engines: gitledger with `durability: fsync` (the default: the claim synced before the "
        "action, the outcome with the next claim's sync), `full` (every event synced) and `none`, "
        "bare SQLite WAL "
        "(`synchronous=FULL` and `NORMAL`; its log reused in place, as a long-running writer keeps it, "
        "not growing)"
        + (f", and the previous engine (`{baseline}`)" if baseline else "")
        + ". Medians in ms.\n"
    )
    inp = store.get("in_process") or {}
    if any(f"{peer}@100" in inp for peer in PEERS):
        add(
            "The peers (`benchmarks/peers.py`, run because they were installed) use their own protocol, "
            "as their users do, on stores of 100 entries: `dbos-sqlite` = a DBOS workflow under a "
            "workflow id on its SQLite database (WAL, every commit synced); `powertools-redis` = "
            "Powertools' `idempotent_function` on Redis with its defaults (nothing synced per write); "
            "`powertools-redis-aof` = the same with `appendfsync always`.\n"
        )
    if inp:
        add(f"| engine | fresh @100 | fresh @{large:,} | done @100 | done @{large:,} |")
        add("|---|---:|---:|---:|---:|")
        for engine in (*STORE_ENGINES, *PEERS):
            if f"{engine}@100" in inp:
                a, b = inp[f"{engine}@100"], inp.get(f"{engine}@{large}")
                add(
                    f"| {engine} | {_f(a['fresh'], 3)} | {_f(b['fresh'], 3) if b else '-'} | "
                    f"{_f(a['done'], 3)} | {_f(b['done'], 3) if b else '-'} |"
                )
        add("")
    sustained = store.get("sustained")
    if sustained:
        add(
            f"Sustained: {store.get('sustained_steps', '?')} fresh steps one after another in one process "
            f"at {large:,} entries, each engine in {store.get('sustained_rounds', '?')} interleaved "
            "rounds (the median of the rounds). The mean per step pays for the work an engine leaves for "
            "later: gitledger's loop writes exactly two folds' worth of events and folds twice, SQLite "
            "checkpoints its log as it fills. The medians above leave the folds out (one step in 1 024 "
            "folds; `in process` also folds between its processes, untimed).\n"
        )
        add("| engine | mean (folds included) | median | slowest step | events left unfolded |")
        add("|---|---:|---:|---:|---:|")
        for engine, cell in sustained.items():
            add(
                f"| {engine} | {_f(cell['mean_ms'], 3)} | {_f(cell['median_ms'], 3)} | "
                f"{_f(cell['max'], 1)} | {cell['left']} |"
            )
        add("")
    writers = store.get("writers")
    if writers:
        counts = _writer_counts(writers)
        add(
            f"Writer processes on one ledger, fresh steps on their own keys for "
            f"{store.get('writer_seconds', '?')} s, started together, every run on a copy of one ledger of "
            f"{store.get('writer_base', '?'):,} entries (the peers on an empty store); steps/s: the steps "
            f"done over the group's wall time, median of {store.get('writer_rounds', '?')} interleaved "
            "rounds; *lost*: steps missing from the ledger afterwards (all rounds). "
            "`gitledger-fsync-apart` is the ceiling the machine sets: each "
            "writer on a ledger of its own, sharing nothing, each folding after 1/n of the events (so the n "
            "ledgers fold as often as one shared ledger; not a way to run gitledger: one task's steps "
            "share a ledger).\n"
        )
        add(
            "| engine, steps/s | "
            + " | ".join(f"{n} writer{'s' if n > 1 else ''}" for n in counts)
            + " | lost |"
        )
        add("|---|" + "---:|" * (len(counts) + 1))
        engines = sorted({name.split("@")[0] for name in writers})
        for engine in engines:
            cells = [writers.get(f"{engine}@{n}") for n in counts]
            rates = " | ".join(f"{c['steps_per_s']:,.0f}" if c else "-" for c in cells)
            add(f"| {engine} | {rates} | {sum(c['lost'] for c in cells if c)} |")
        add("")
    for name, who in (
        ("growth", "gitledger"),
        ("growth_large", "gitledger"),
        ("growth_previous", f"the engine at `{baseline}`"),
    ):
        growth = store.get(name)
        if growth:
            where = _grown_into(growth)
            add(
                f"Growth, {who}: {growth['entries']:,} fresh steps into {where}: "
                f"{growth['bytes_per_entry_written']:.0f} B per entry as written, "
                f"{growth['bytes_per_entry_after_gc']:.0f} B after `git gc`, "
                f"{growth['loose_objects_per_step']:.2f} loose object files per step.\n"
            )
    for peer, growth in (store.get("growth_peers") or {}).items():
        written = growth["bytes_per_entry_written"]
        add(
            f"Growth, {peer}: {growth['entries']:,} fresh steps into an empty store: "
            + ("nothing written per step" if written is None else f"{written:.0f} B per entry as written")
            + f", {growth['bytes_per_entry_compacted']:.0f} B compacted (SQLite checkpointed and vacuumed; "
            "Redis's append-only file rewritten, or its snapshot).\n"
        )
    return out


def render(results: dict[str, Any], plot_name: str | None) -> str:
    meta = results["meta"]
    m = meta["machine"]
    out: list[str] = []
    add = out.append
    add("# gitledger benchmark report\n")
    add(
        f"Command: `{meta['command']}` — mode **{meta['mode']}**, {meta['duration_s']:.0f} s, "
        f"commit `{m['commit']}`, {m['time']}.\n"
    )
    add(
        f"Machine: {m['cpus']} CPUs ({m['cpu'] or 'unknown'}), {m['platform']}, Python {m['python']}, "
        f"{m['git']}, SQLite {m['sqlite']}; load average at start {m['loadavg_at_start']}. The cores are "
        "shared with other work, so **compare ratios measured in this run**, not absolute numbers across "
        "runs: every comparison below was measured interleaved (round robin) in this one run.\n"
    )
    add(f"Bytecode: {meta['bytecode']}\n")
    rows = targets(results)
    if rows:
        add("## Targets\n")
        add("| target | measured | met |")
        add("|---|---|---|")
        for row in rows:
            met = "n/a" if row["met"] is None else "yes" if row["met"] else "**no**"
            add(f"| {row['target']} | {row['measured']} | {met} |")
        add("")
    overhead = results.get("overhead")
    if overhead:
        add("## 1. Per-step protocol overhead (in process)\n")
        add(
            "`StepRunner.run` with a no-op action and the `ledger` check. *skip*: a done key (one ledger "
            "read), each one its ledger was not asked for before in the process (so at most 97 at 100 "
            "entries: drawn with replacement, most lookups in the small ledger were answered from the "
            "store's caches). *fresh*: a new key (claim with compare-and-swap, no-op, done). Ledgers "
            "built with the same entries (two events each, as a real step leaves), verified by count and "
            "by loading random keys, then measured interleaved (every size and ledger in the same "
            f"rounds); up to {overhead['reps']} samples per cell or "
            f"{overhead['budget_s']} s, at least {overhead['min_reps']}. Times in ms.\n"
        )
        if plot_name:
            add(f"![overhead vs ledger size]({plot_name})\n")
        add(
            "| entries | ledger | skip median | skip p90 | fresh median | fresh p90 | n skip/fresh | "
            "build s |"
        )
        add("|---:|---|---:|---:|---:|---:|---:|---:|")
        for size in overhead["sizes"]:
            for kind, cell in overhead["results"][str(size)].items():
                s, f = cell["skip"], cell["fresh"]
                add(
                    f"| {size:,} | {kind} | {_f(s['median'], 3)} | {_f(s['p90'], 3)} | "
                    f"{_f(f['median'], 3)} | {_f(f['p90'], 3)} | {s['n']}/{f['n']} | "
                    f"{_f(cell['build_s'], 1)} |"
                )
        add("")
        base = overhead["results"].get(str(overhead["sizes"][0]), {}).get("gitledger")
        if base:
            add(f"gitledger relative to its own {overhead['sizes'][0]:,}-entry figure (median):\n")
            add("| entries | skip | fresh | skip vs SQLite | fresh vs SQLite |")
            add("|---:|---:|---:|---:|---:|")
            for size in overhead["sizes"]:
                cells = overhead["results"][str(size)]
                g = cells.get("gitledger")
                sq = cells.get("sqlite")
                if g is None:
                    continue
                add(
                    f"| {size:,} | {ratio(g['skip']['median'], base['skip']['median']):.2f}x | "
                    f"{ratio(g['fresh']['median'], base['fresh']['median']):.2f}x | "
                    + (
                        f"{ratio(g['skip']['median'], sq['skip']['median']):.1f}x | "
                        f"{ratio(g['fresh']['median'], sq['fresh']['median']):.1f}x |"
                        if sq
                        else "- | - |"
                    )
                )
            add("")
    process = results.get("process")
    if process:
        add("## 2. Whole-process `gitledger run-step` latency\n")
        add(
            f"{process['runs']} runs per variant after {process['warmup']} warm-up rounds, interleaved; "
            f"ledger of {process['ledger_size']:,} entries plus the done key. Launcher: "
            f"{process['launcher']}. floor = `python -c pass` + one `git rev-parse`.\n"
        )
        add("| variant | median ms | p90 ms | min ms | x floor | CPU median ms |")
        add("|---|---:|---:|---:|---:|---:|")
        names = {
            "python": "python -c pass",
            "floor": "floor (python -c pass + git rev-parse)",
            "skip": "skip (done key, fast path)",
            "skip_typer": "skip with GITLEDGER_NO_FASTPATH=1 (typer)",
            "fresh": "fresh (new key, `-- true`)",
        }
        for variant, st in process["results"].items():
            add(
                f"| {names.get(variant, variant)} | {_f(st['median'], 1)} | {_f(st['p90'], 1)} | "
                f"{_f(st['min'], 1)} | {_f(st['x_floor'], 2)} | {_f(st.get('cpu_median', float('nan')), 1)} |"
            )
        ratios = process.get("ratios")
        if ratios:
            add(
                "\nIssue 14's whole-process targets: skip / `python -c pass` = "
                f"{ratios['skip_over_python']:.2f}x (CPU {ratios['cpu_skip_over_python']:.2f}x; target ≤ 4x);"
                " "
                f"fresh / skip = {ratios['fresh_over_skip']:.2f}x (CPU {ratios['cpu_fresh_over_skip']:.2f}x; "
                "target ≤ 1.3x)."
            )
        add("")
    conc = results.get("concurrency")
    if conc:
        add("## 3. Concurrent throughput (distinct keys)\n")
        add(
            f"P worker processes each record {conc['steps_per_worker']} fresh steps (claim + no-op + done) "
            "on their own keys in one ledger, started together. *ref CAS retries*: `update-ref` refused "
            "because another writer moved the notes ref first (the store rebuilds on the new tip); "
            "*key CAS losses*: the key's own version changed (0 expected on distinct keys); *lock wait*: "
            "share of worker time spent waiting for gitledger's advisory lock; *gave up*: steps "
            "whose store raised ConflictError after its 100 ref CAS tries. Every run is verified "
            "afterwards: the ledger holds every step that did not give up.\n"
        )
        add(
            "| ledger | P | steps/s | wall s | ref CAS retries (per write) | key CAS losses | gave up | "
            "lock wait |"
        )
        add("|---|---:|---:|---:|---:|---:|---:|---:|")
        for kind, by_p in conc["results"].items():
            for p, cell in by_p.items():
                add(
                    f"| {kind} | {p} | {cell['steps_per_s']:.0f} | {cell['wall_s']:.2f} | "
                    f"{cell['ref_cas_retries']} ({cell['ref_cas_retries_per_write']:.2f}) | "
                    f"{cell['key_cas_losses']} | {cell.get('gave_up', 0)} | "
                    f"{cell['lock_wait_share'] * 100:.0f}% |"
                )
        add("")
    add("## 4. Sync and audit\n")
    for name in ("sync", "audit"):
        section = results.get(name) or {"status": "not run"}
        add(f"**{name}**: {section.get('status')}" + (f" — {section['note']}" if section.get("note") else ""))
        figures = section.get("figures")
        if isinstance(figures, list) and figures and all(isinstance(r, dict) for r in figures):
            columns = list(figures[0])
            add("")
            add("| " + " | ".join(columns) + " |")
            add("|" + "---:|" * len(columns))
            for row in figures:
                add("| " + " | ".join(_f(row.get(c), 3) for c in columns) + " |")
        elif isinstance(figures, dict) and isinstance(figures.get("ms"), dict):
            ms = figures["ms"]
            add(f"\n- median {_f(ms['median'], 1)} ms, p90 {_f(ms['p90'], 1)} ms over {ms['n']} runs")
        elif figures:
            add("")
            add("```json")
            add(json.dumps(figures, indent=1)[:4000])
            add("```")
        add("")
    profile = results.get("profile")
    if profile:
        ip = profile["in_process"]
        add("## 5. Profiles\n")
        add(
            f"In process, cProfile, ledger of {ip['ledger_size']:,} entries, {ip['reps']} steps per path "
            f"(per-step figures include profiler overhead): skip {ip['skip']['per_step_ms']:.3f} ms, "
            f"fresh {ip['fresh']['per_step_ms']:.3f} ms. Call trees (`profile-*-pyinstrument.txt`, "
            "`profile-*-cprofile.txt`) and the raw `importtime-skip.txt` are written to the output folder "
            "(`benchmarks/results/` by default).\n"
        )
        for path in ("skip", "fresh"):
            add(f"Top functions by own time, {path}:\n")
            add("| function | calls | own ms | cum ms |")
            add("|---|---:|---:|---:|")
            for row in ip[path]["top_own"][:8]:
                add(f"| `{row['function']}` | {row['calls']} | {row['own_ms']:.1f} | {row['cum_ms']:.1f} |")
            add("")
        it = profile["importtime"]
        add(
            f"Whole process, `python -X importtime` of a fast-path skip (median of {it['runs']}): "
            f"{it['total_import_ms']:.1f} ms of imports, {it['modules']} modules.\n"
        )
        add("| top-level import | cumulative ms |   | module | self ms |")
        add("|---|---:|---|---|---:|")
        for a, b in zip(it["top_level"][:10], it["top_self"][:10], strict=False):
            add(f"| {a['module']} | {a['cum_ms']:.2f} | | {b['module']} | {b['self_ms']:.2f} |")
        add("")
    store = results.get("store")
    if store:
        out += render_store(store)
    add("## Method notes\n")
    add(
        "- JSON-file baseline: the whole ledger is one JSON object rewritten through a temporary file + "
        "rename under an exclusive `flock` on every transition; every read parses the whole file.\n"
        "- SQLite baseline: stdlib `sqlite3`, one table (key primary key, version, events), WAL, "
        "`synchronous=NORMAL` (no fsync per commit, while gitledger runs with its default `durability: "
        "fsync` in sections 1 and 3; section 6 measures both settings of each), one transaction per "
        "append, CAS by `UPDATE … WHERE version = ?`.\n"
        "- gitledger large ledgers are written by the store's own object writer as one fold of every "
        "entry (one pack, exactly the paths GitStore writes); measured writes then go through the "
        "journal and its folds as in normal use.\n"
        "- Full definitions: `benchmarks/README.md`. Raw figures: `report.json`."
    )
    return "\n".join(out) + "\n"


def write(results: dict[str, Any], out: Path, plot: Path | None) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    results["targets"] = targets(results)
    json_path = out / "report.json"
    json_path.write_text(json.dumps(results, indent=1, sort_keys=False, default=str) + "\n")
    md_path = out / "report.md"
    md_path.write_text(render(results, plot.name if plot else None))
    return md_path, json_path
