"""Turn the results of one run into ``report.md`` (tables, targets, the plot) and ``report.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benchmarks.common import ratio


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
    return rows


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
            add(f"| {row['target']} | {row['measured']} | {'yes' if row['met'] else '**no**'} |")
        add("")
    overhead = results.get("overhead")
    if overhead:
        add("## 1. Per-step protocol overhead (in process)\n")
        add(
            "`StepRunner.run` with a no-op action and the `ledger` check. *skip*: a done key (one ledger "
            "read). *fresh*: a new key (claim with compare-and-swap, no-op, done). Ledgers built with the "
            "same entries (two events each, as a real step leaves), verified by count and by loading "
            f"random keys, then measured interleaved (every size and ledger in the same rounds); up to "
            f"{overhead['reps']} samples per cell or "
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
            "share of worker time spent waiting for gitledger's advisory lock. `gitledger-noflock` is an "
            "ablation with the advisory lock disabled (correctness still from the ref CAS); *gave up*: steps "
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
    add("## Method notes\n")
    add(
        "- JSON-file baseline: the whole ledger is one JSON object rewritten through a temporary file + "
        "rename under an exclusive `flock` on every transition; every read parses the whole file.\n"
        "- SQLite baseline: stdlib `sqlite3`, one table (key primary key, version, events), WAL, "
        "`synchronous=NORMAL` (no fsync per commit — the same durability as gitledger, which does not "
        "fsync), one transaction per append, CAS by `UPDATE … WHERE version = ?`.\n"
        "- gitledger large ledgers are written with one `git fast-import` (packed objects, exactly the "
        "paths GitStore writes); measured writes then add loose objects as in normal use.\n"
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
