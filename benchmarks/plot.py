"""The overhead-vs-ledger-size plot (matplotlib, a benchmark-only extra: ``pip install '.[bench]'``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLORS = {"gitledger": "#d62728", "sqlite": "#1f77b4", "json": "#7f7f7f"}
LABELS = {"gitledger": "gitledger (git notes)", "sqlite": "SQLite (WAL, CAS column)", "json": "one JSON file"}


def plot_overhead(overhead: dict[str, Any], path: Path) -> Path | None:
    """Median per-step time against ledger size, skip and fresh side by side (log-log); None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    sizes = overhead["sizes"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for ax, step_path, title in (
        (axes[0], "skip", "skip (done key: one ledger read)"),
        (axes[1], "fresh", "fresh (new key: claim + no-op + done)"),
    ):
        for kind in overhead["ledgers"]:
            xs, med, p90 = [], [], []
            for size in sizes:
                cell = overhead["results"].get(str(size), {}).get(kind)
                if cell is None or not cell[step_path]["n"]:
                    continue
                xs.append(size)
                med.append(cell[step_path]["median"])
                p90.append(cell[step_path]["p90"])
            if not xs:
                continue
            color = COLORS.get(kind)
            ax.plot(xs, med, marker="o", color=color, label=f"{LABELS.get(kind, kind)} median")
            ax.plot(xs, p90, linestyle=":", color=color, alpha=0.7, label=f"{kind} p90")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("entries in the ledger")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ms per step (in process)")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("Per-step protocol overhead vs ledger size (lower is better; flat = size-independent)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
