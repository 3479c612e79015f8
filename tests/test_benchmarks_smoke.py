"""The benchmarks run and produce well-formed results (smallest configuration; nothing is timed here)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.ledgers import JsonFileStore, SqliteStore
from gitledger.core.checks import LedgerCheck
from gitledger.core.keys import StepKey
from gitledger.core.protocol import ActionResult, StepRunner
from gitledger.core.store import ANY_VERSION, Intent, Store


@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_baseline_ledgers_have_the_store_semantics(tmp_path: Path, kind: str) -> None:
    store: Store = JsonFileStore(tmp_path / "l.json") if kind == "json" else SqliteStore(tmp_path / "l.db")
    step = StepKey.derive("T", "s")
    intent = Intent.of(step)
    assert store.load(intent).version is None
    v1 = store.append(intent, {"state": "attempting", "key": step.key}, None)
    assert v1 is not None
    assert store.append(intent, {"state": "attempting", "key": step.key}, None) is None  # lost the race
    v2 = store.append(intent, {"state": "done", "key": step.key, "outcome": "created"}, v1)
    assert v2 is not None and v2 != v1
    assert store.append(intent, {"state": "done", "key": step.key}, v1) is None  # stale version
    assert store.append(intent, {"state": "info", "key": step.key}, ANY_VERSION) is not None
    entry = store.load(step.key)
    assert entry.folded.state == "done" and len(entry.events) == 3
    assert [e.key for e in store.entries()] == [step.key]
    runner = StepRunner(store)
    other = StepKey.derive("T", "other")
    assert runner.run(other, [LedgerCheck()], lambda: ActionResult(ok=True)).status == "created"
    assert runner.run(other, [LedgerCheck()], lambda: ActionResult(ok=True)).status == "skipped"
    store.close()


def test_sqlite_baseline_reuses_its_log_in_place(tmp_path: Path) -> None:
    """``reuse_wal`` leaves a log that later commits overwrite from its start: it does not grow."""
    store = SqliteStore(tmp_path / "l.db", "FULL")
    wal = tmp_path / "l.db-wal"
    store.reuse_wal(1 << 20)
    size = wal.stat().st_size
    assert size > 1 << 20
    runner = StepRunner(store)
    for i in range(20):
        result = runner.run(StepKey.derive("T", f"s{i}"), [LedgerCheck()], lambda: ActionResult(ok=True))
        assert result.status == "created"
    assert wal.stat().st_size == size
    assert store.count() == 20 and "wal_fill" not in {
        row[0] for row in store.db.execute("SELECT name FROM sqlite_master")
    }
    store.close()


@pytest.fixture
def kept_environ() -> Iterator[None]:
    """The benchmarks' ``main`` functions point this process's git at their own identity
    (``use_isolated_git``); the tests after them in the same worker must not commit as it."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value >= 0


@pytest.mark.usefixtures("kept_environ")
def test_every_benchmark_runs_and_reports(tmp_path: Path) -> None:
    from benchmarks import run

    out = tmp_path / "out"
    assert run.main(["--smoke", "--out", str(out), "--workdir", str(tmp_path / "work")]) == 0
    data = json.loads((out / "report.json").read_text())
    report = (out / "report.md").read_text()
    assert report.startswith("# gitledger benchmark report")

    overhead = data["overhead"]
    for size in overhead["sizes"]:
        for kind in ("gitledger", "sqlite", "json"):
            cell = overhead["results"][str(size)][kind]
            assert cell["verified"]["count"] == size and cell["verified"]["ok"]
            for path in ("skip", "fresh"):
                assert cell[path]["n"] >= 2 and _finite(cell[path]["median"]) and _finite(cell[path]["p90"])

    process = data["process"]["results"]
    assert set(process) == {"python", "floor", "skip", "skip_typer", "fresh"}
    for v in process.values():
        assert _finite(v["median"]) and _finite(v["x_floor"]) and _finite(v["cpu_median"])
    assert all(_finite(r) and r > 0 for r in data["process"]["ratios"].values())

    conc = data["concurrency"]["results"]
    assert set(conc) == {"gitledger", "sqlite", "json"}
    for kind in ("gitledger", "sqlite", "json"):
        for p, cell in conc[kind].items():
            assert cell["verified_entries"] == int(p) * data["concurrency"]["steps_per_worker"]
            assert _finite(cell["steps_per_s"]) and cell["key_cas_losses"] == 0
            assert cell["gave_up"] == 0
    assert conc["gitledger"]["2"]["ref_cas_retries"] >= 0

    # the hooks run whatever of sync and audit is on this branch, and must not fail on it
    root = Path(run.__file__).resolve().parent.parent
    has_sync = (root / "benchmarks" / "bench_sync.py").exists()
    has_audit = (root / "gitledger" / "cli" / "audit.py").exists()
    assert data["sync"]["status"] == ("measured" if has_sync else "pending"), data["sync"]
    assert data["audit"]["status"] == ("measured" if has_audit else "pending"), data["audit"]

    profile = data["profile"]
    for path in ("skip", "fresh"):
        assert profile["in_process"][path]["top_own"] and _finite(profile["in_process"][path]["per_step_ms"])
    assert profile["importtime"]["total_import_ms"] > 0
    assert any(row["module"].startswith("gitledger") for row in profile["importtime"]["gitledger_cum"])

    store = data["store"]
    for engine in ("gitledger-fsync", "gitledger-full", "gitledger-none", "sqlite-full", "sqlite-normal"):
        for size in store["sizes"]:
            cell = store["in_process"][f"{engine}@{size}"]
            assert _finite(cell["fresh"]) and _finite(cell["done"])
            assert [len(cell["rounds"][what]) for what in ("fresh", "done")] == [store["rounds"]] * 2
        for n in (1, 2):  # from a copy of one ledger of writer_base entries: every step counted on top
            assert _finite(store["writers"][f"{engine}@{n}"]["steps_per_s"])
            assert store["writers"][f"{engine}@{n}"]["steps_per_s"] > 0
            assert store["writers"][f"{engine}@{n}"]["lost"] == 0
    assert (store["writer_base"], store["writer_seconds"]) == (20, 0.2)
    assert "on a copy of one ledger of 20 entries" in report
    for engine, cell in store["sustained"].items():  # fresh steps in one process, folds included
        assert _finite(cell["mean_ms"]) and _finite(cell["median_ms"]) and len(cell["mean"]) == 1, engine
    assert "| engine | mean (folds included) |" in report
    for n in (1, 2):  # the machine's ceiling: each writer on a ledger of its own, all counted
        assert store["writers"][f"gitledger-fsync-apart@{n}"]["lost"] == 0
    assert "| gitledger-fsync-apart |" in report
    # the last step up in writers, round by round, for gitledger and for what shares nothing
    (step_up,) = [t for t in data["targets"] if "1 → 2 writers, steps/s at 2 over" in t["target"]]
    fsync = [store["writers"][f"gitledger-fsync@{n}"]["runs"][0] for n in (1, 2)]
    assert step_up["met"] is None and f"gitledger `fsync` {fsync[1] / fsync[0]:.2f}" in step_up["measured"]
    assert "the ceiling (a ledger per writer, nothing shared) " in step_up["measured"]
    assert store["growth"]["entries"] == 5 and _finite(store["growth"]["bytes_per_entry_after_gc"])
    large = store["growth_large"]  # the same steps into a ledger that held entries before
    assert (large["entries"], large["ledger_before"]) == (5, 50) and _finite(large["bytes_per_entry_written"])
    from benchmarks import peers

    for peer in peers.available():  # the optional peers, where they are installed
        cell = store["in_process"][f"{peer}@{peers.PEER_SIZE}"]
        assert _finite(cell["fresh"]) and _finite(cell["done"])
        if peer in peers.WRITER_PEERS:
            assert [store["writers"][f"{peer}@{n}"]["lost"] for n in (1, 2)] == [0, 0]
        grown = store["growth_peers"][peer]
        assert grown["entries"] == 5 and _finite(grown["bytes_per_entry_compacted"])
        assert f"| {peer} |" in report
    assert "## 6. Storage engine" in report
    issue14 = [t for t in data["targets"] if t["target"].endswith("(issue 14)")]
    assert len(issue14) == 15, [t["target"] for t in issue14]

    assert {t["target"] for t in data["targets"]} >= {
        "run-step skip path median < 150 ms (issue 2)",
        "run-step skip path ≤ 5x floor (issue 8)",
    }
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (out / "overhead.png").stat().st_size > 1000 and "overhead.png" in report


def test_store_targets_give_the_ratio_round_by_round() -> None:
    """A durable step is mostly two syncs, whose latency drifts during a run: beside the ratio of the
    medians, each target row gives the range of the ratios of the rounds (paired by round)."""
    from benchmarks.report import store_targets

    def cell(fresh: list[float]) -> dict[str, object]:
        rounds = {"fresh": fresh, "done": [0.1] * len(fresh)}
        return {"fresh": sorted(fresh)[1], "done": 0.1, "rounds": rounds}

    engines = {
        "gitledger-fsync": ([0.40, 0.50, 0.60], [0.40, 0.50, 0.66]),
        "gitledger-none": ([0.15] * 3, [0.18] * 3),
        "sqlite-full": ([0.45] * 3, [0.40, 0.55, 0.44]),
        "sqlite-normal": ([0.10] * 3, [0.10] * 3),
    }
    inp = {}
    for engine, (small, large) in engines.items():
        inp[f"{engine}@100"], inp[f"{engine}@1000"] = cell(small), cell(large)
    rows = {row["target"]: row for row in store_targets({"sizes": [100, 1000], "in_process": inp})}
    durable = rows["fresh, durable ≤ 1.0x SQLite WAL FULL, 1,000 entries (issue 14)"]
    assert not any("sustained" in target for target in rows)  # only when that part ran
    # medians 0.50 vs 0.44; rounds 0.40/0.40, 0.50/0.55, 0.66/0.44
    assert durable["measured"] == "1.14x (0.500 vs 0.440 ms; round by round 0.91 to 1.50x)"
    assert not durable["met"]
    assert not any("durability: full" in target for target in rows)  # no full engine: no comparison row
    size = rows["fresh: 1,000 vs 100 entries ≤ 1.3x (issue 14)"]
    assert size["measured"].endswith("round by round 1.00 to 1.10x)") and size["met"]

    inp["gitledger-full@100"], inp["gitledger-full@1000"] = cell([0.6] * 3), cell([0.66, 0.60, 0.55])
    rows = {row["target"]: row for row in store_targets({"sizes": [100, 1000], "in_process": inp})}
    like = [row for target, row in rows.items() if "durability: full" in target]
    # like for like, beside the targets and never one: medians 0.60 vs 0.44, rounds 1.65, 1.09, 1.25
    assert [(row["measured"], row["met"]) for row in like] == [
        ("1.36x (0.600 vs 0.440 ms; round by round 1.09 to 1.65x)", None)
    ]
    assert len([target for target in rows if target.endswith("(issue 14)")]) == 5

    for name in inp:  # one round: no range to give
        inp[name] = {**inp[name], "rounds": {"fresh": [1.0], "done": [1.0]}}
    rows = {row["target"]: row for row in store_targets({"sizes": [100, 1000], "in_process": inp})}
    assert all("round by round" not in row["measured"] for row in rows.values())


def test_fdatasync_benchmark_measures_every_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import bench_fdatasync

    out = tmp_path / "fdatasync.json"
    argv = ["--procs", "1,2", "--syncs", "5", "--rounds", "1", "--dir", str(tmp_path), "--json", str(out)]
    assert bench_fdatasync.main(argv) == 0
    results = json.loads(out.read_text())
    assert set(results) == {f"{mode}@{n}" for mode in bench_fdatasync.MODES for n in (1, 2)}
    fields = ("syncs_per_s", "sync_us", "user_us", "system_us", "switches")
    for cell in results.values():
        assert all(_finite(cell[field]) for field in fields)
        assert cell["syncs_per_s"] > 0
    assert list(tmp_path.iterdir()) == [out]  # its files are removed
    assert "written in place / append" in capsys.readouterr().out


def test_fdatasync_benchmark_refuses_bad_counts(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import bench_fdatasync

    for argv in (["--procs", "one"], ["--syncs", "0"]):
        with pytest.raises(SystemExit) as exc:
            bench_fdatasync.main(argv)
        assert exc.value.code == 2
        assert "error:" in capsys.readouterr().err


@pytest.mark.usefixtures("kept_environ")
def test_ab_compares_two_revisions_and_leaves_nothing_behind(capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/ab.py`` (what fix commits quote) runs end to end and removes its work directory."""
    import tempfile

    from benchmarks import ab

    before = set(Path(tempfile.gettempdir()).glob("gitledger-ab-*"))
    assert ab.main(["HEAD", "HEAD", "--rounds", "2", "--size", "20", "--reps", "3"]) == 0
    assert set(Path(tempfile.gettempdir()).glob("gitledger-ab-*")) == before
    printed = capsys.readouterr().out
    for metric in ("floor", "skip", "fresh", "in_skip", "in_fresh", "cpu_fresh"):
        row = next(line for line in printed.splitlines() if line.split()[:1] == [metric])
        assert all(_finite(float(cell)) for cell in row.split()[1:])


def test_sustained_rows_compare_and_are_never_targets() -> None:
    """The sustained means (folds and checkpoints paid in the loop) are shown beside the targets, paired
    round by round, and never decide one: the issue's figures are medians."""
    from benchmarks.report import store_targets

    def cell(means: list[float]) -> dict[str, object]:
        return {
            "mean": means,
            "median": means,
            "max": 9.0,
            "left": 0,
            "mean_ms": sorted(means)[1],
            "median_ms": 0.1,
        }

    sustained = {
        "gitledger-fsync": cell([0.50, 0.60, 0.55]),
        "gitledger-full": cell([0.70, 0.70, 0.70]),
        "gitledger-none": cell([0.30, 0.30, 0.30]),
        "sqlite-full": cell([0.50, 0.50, 0.40]),
        "sqlite-normal": cell([0.10, 0.10, 0.10]),
    }
    rows = store_targets({"sizes": [100, 1000], "sustained": sustained, "sustained_steps": 2048})
    assert [row["met"] for row in rows] == [None, None, None]
    fsync = next(row for row in rows if "`fsync`, sustained" in row["target"])
    assert "the mean of 2048 steps" in fsync["target"] and "1,000 entries" in fsync["target"]
    # means 0.55 vs 0.50; rounds 0.50/0.50, 0.60/0.50, 0.55/0.40
    assert fsync["measured"] == "1.10x (0.550 vs 0.500 ms; round by round 1.00 to 1.38x)"


@pytest.mark.usefixtures("kept_environ")
def test_writer_parts_benchmark_times_every_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/bench_writer_parts.py`` (the CPU of a step by part and writer count) runs end to end."""
    from benchmarks import bench_writer_parts

    out = tmp_path / "parts.json"
    argv = ["--writers", "1,2", "--seconds", "0.3", "--base", "20", "--rounds", "1", "--fold-sizes", "8"]
    assert bench_writer_parts.main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    timed = {f"{cls}.{name}" for _, cls, name in bench_writer_parts.PARTS}
    for n in ("1", "2"):
        (run,) = report["parts"][n]
        assert run["steps"] > 0 and _finite(run["steps_per_s"]) and run["cpu_us"] > 0, run
        assert set(run["parts"]) == timed
        # every step loads its entry and appends its claim and its outcome
        assert run["parts"]["GitStore.load"]["calls"] >= 1 and run["parts"]["GitStore.append"]["calls"] == 2
        assert all(cell["cpu_us"] <= cell["wall_us"] + 1 for cell in run["parts"].values())
    (fold,) = report["folds"]["8"]
    assert _finite(fold) and fold > 0
    assert "a fold of 8 events" in capsys.readouterr().out


def test_writer_parts_benchmark_refuses_bad_counts(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import bench_writer_parts

    for argv in (["--writers", "one"], ["--writers", "0"], ["--fold-sizes", "1,x"], ["--seconds", "0"]):
        with pytest.raises(SystemExit) as exc:
            bench_writer_parts.main(argv)
        assert exc.value.code == 2
        assert "error:" in capsys.readouterr().err
