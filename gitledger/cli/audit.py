"""``gitledger audit``: duplicate pull requests, stuck steps and forged refs (gitledger.features.audit)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gitledger.cli.app import JSON_OUT, REPO, app, emit_json, say

if TYPE_CHECKING:
    from gitledger.features.audit.run import AuditReport


@app.command("audit")
def audit_command(
    github_repo: str | None = typer.Option(
        None,
        "--github-repo",
        help=(
            "OWNER/NAME (default: github.repo in .gitledger.yml, else the origin URL, else "
            "GITHUB_REPOSITORY)."
        ),
    ),
    json_out: bool = JSON_OUT,
    fail_on_duplicates: bool = typer.Option(
        False, "--fail-on-duplicates", help="Exit 1 when any key has more than one pull request."
    ),
    close_duplicates: bool = typer.Option(
        False,
        "--close-duplicates",
        help="Close all but the oldest open pull request of each key, with one explanatory comment each.",
    ),
    trailers: str = typer.Option(
        "auto",
        "--trailers",
        help=(
            "How to read Gitledger-Key trailers of PR commits: auto (git, else the API), git, api or none."
        ),
    ),
    commit_api_limit: int = typer.Option(
        50,
        "--commit-api-limit",
        help="When trailers are read through the API: list the commits of at most this many PRs.",
    ),
    repo: Path | None = REPO,
) -> None:
    """Find pull requests opened more than once for one gitledger key (in any state), and report
    ledger entries that are stuck, keys on PRs the ledger never recorded, and 'done' entries whose
    PR does not exist. Appends a Markdown summary to $GITHUB_STEP_SUMMARY when it is set.

    Exit codes: 0; 1 when closing a duplicate failed, when GitHub could not be read, or with
    --fail-on-duplicates when duplicates exist; 2 for usage errors (a missing token too).
    """
    from gitledger.cli.render import Progress
    from gitledger.features.audit.run import AuditOptions, run_audit
    from gitledger.features.audit.summary import write_step_summary

    with Progress("auditing") as progress:
        report = run_audit(
            AuditOptions(
                github_repo=github_repo,
                repo_path=repo,
                close=close_duplicates,
                trailers=trailers,
                commit_api_limit=commit_api_limit,
                progress=lambda phase, done: progress.phase(f"auditing: {phase}", done),
            )
        )
    write_step_summary(report, os.environ)
    if json_out:
        emit_json(report.to_json())
    else:
        _print(report)
    for warning in report.warnings:
        say(f"warning: {warning}")
    for error in report.close_errors:
        say(f"could not close #{error['number']}: {error['reason']}")
    if report.close_errors or (fail_on_duplicates and report.duplicates):
        raise typer.Exit(1)


def _print(report: AuditReport) -> None:
    from gitledger.cli.render import table

    dups = report.duplicates
    typer.echo(
        f"{report.repository}: {len(report.pulls)} pull requests, {len(report.groups)} keys, "
        f"{len(dups)} with duplicates; {report.api_calls.get('total', 0)} API calls, trailers via "
        f"{report.trailer_scan.via}, {report.seconds:.1f} s"
    )
    if dups:
        typer.echo("")
        rows = []
        for group in dups:
            keep = group.keep
            rows.append(
                {
                    "key": group.name,
                    "prs": " ".join(
                        f"#{p.number}:{p.state}" + ("*" if keep and p.number == keep.number else "")
                        for p in group.pulls
                    ),
                    "evidence": ", ".join(sorted({kind for kind, _ in group.evidence})),
                }
            )
        table(rows, ["key", "prs", "evidence"])
        typer.echo("(* = the PR --close-duplicates keeps: the oldest open one)")
    if report.closed:
        typer.echo("")
        for item in report.closed:
            reason = f" ({item['reason']})" if item.get("reason") else ""
            typer.echo(f"#{item['number']}: {item['result']}, duplicate of #{item['duplicate_of']}{reason}")
    sections = (
        ("stuck (owner gone or lease over; run 'gitledger reconcile')", report.stuck),
        ("done, but the recorded pull request does not exist", report.missing_refs),
    )
    for title, found in sections:
        if found:
            typer.echo(f"\n{title}:")
            for row in found:
                typer.echo(f"  {row['key']}  {row['reason']}")
    if report.unclaimed:
        typer.echo("\nkeys on pull requests that the ledger never recorded:")
        for group in report.unclaimed:
            typer.echo(f"  {group.name}  " + " ".join(f"#{p.number}" for p in group.pulls))
