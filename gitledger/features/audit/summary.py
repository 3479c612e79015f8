"""The audit's Markdown job summary (GitHub Actions' $GITHUB_STEP_SUMMARY)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gitledger.core.errors import GitledgerError
from gitledger.features.audit.run import AuditReport

if TYPE_CHECKING:
    pass


# -- output -----------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_summary(report: AuditReport) -> str:
    """The job summary (``$GITHUB_STEP_SUMMARY``): what was found, what was done, what it cost."""
    lines = [f"## gitledger audit: {report.repository}", ""]
    dups = report.duplicates
    lines.append(
        f"Scanned **{len(report.pulls)}** pull requests with **{report.api_calls.get('total', 0)}** API "
        f"calls (commit trailers via {report.trailer_scan.via}): **{len(dups)}** duplicate group(s)."
    )
    lines.append("")
    if dups:
        lines += ["### Duplicate pull requests", "", "| key | pull requests | evidence |", "|---|---|---|"]
        for group in dups:
            keep = group.keep
            prs = ", ".join(
                f"[#{p.number}]({p.url}) {p.state}" + (" (kept)" if keep and p.number == keep.number else "")
                for p in group.pulls
            )
            evidence = "; ".join(
                f"{e['kind']} `{e['value']}`: #{', #'.join(map(str, e['prs']))}"
                for e in group.evidence_json()
            )
            lines.append(f"| `{_cell(group.name)}` | {_cell(prs)} | {_cell(evidence)} |")
        lines.append("")
    if report.closed:
        lines += ["### Closed by this run", ""]
        for item in report.closed:
            what = {"closed": "closed", "kept": "left open", "skipped": "not closed", "error": "FAILED"}.get(
                item["result"], item["result"]
            )
            reason = f" ({item['reason']})" if item.get("reason") else ""
            lines.append(f"- #{item['number']}: {what}, duplicate of #{item['duplicate_of']}{reason}")
        lines.append("")
    for title, rows in (
        ("Stuck steps", report.stuck),
        ("Ledger refs to missing pull requests", report.missing_refs),
    ):
        if rows:
            lines += [f"### {title}", ""]
            for row in rows:
                detail = row.get("reason", "")
                lines.append(f"- `{row['key']}`: {detail}")
            lines.append("")
    if report.unclaimed:
        lines += ["### Pull requests with a key the ledger never recorded", ""]
        for group in report.unclaimed:
            lines.append(f"- `{group.name}`: " + ", ".join(f"[#{p.number}]({p.url})" for p in group.pulls))
        lines.append("")
    for warning in report.warnings:
        lines.append(f"> **Warning:** {warning}")
    return report.redact("\n".join(lines).rstrip() + "\n\n")


def write_step_summary(report: AuditReport, environ: Mapping[str, str]) -> Path | None:
    """Append the Markdown summary to ``$GITHUB_STEP_SUMMARY`` when it is set (as GitHub does)."""
    target = environ.get("GITHUB_STEP_SUMMARY", "").strip()
    if not target:
        return None
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(markdown_summary(report))
    except OSError as exc:
        raise GitledgerError(f"cannot write GITHUB_STEP_SUMMARY {path}: {exc.strerror}") from exc
    return path


__all__ = ["markdown_summary", "write_step_summary"]
