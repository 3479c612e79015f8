"""``gitledger run-step``: run a side-effecting command at most once per intent."""

from __future__ import annotations

from pathlib import Path

import typer

from gitledger.cli.app import JSON_OUT, RAW_ARGS, REPO, app, say
from gitledger.cli.keys import ARG, CONTENT, CONTENT_FILE, STEP, TASK
from gitledger.errors import UsageError

CHECK = typer.Option(
    None,
    "--check",
    "-c",
    help=(
        "How to find out whether the effect already exists; repeatable, any match counts: ledger, "
        "branch[:REMOTE], trailer, file:PATH, cmd:SHELL, github-pr, github-branch, github-comment:N. "
        "Default: the step's checks in .gitledger.yml, else 'ledger'."
    ),
)
ON_UNCONFIRMED = typer.Option(
    None,
    "--on-unconfirmed",
    help=(
        "For ledger-only steps left attempting by a dead process: fail (default; exit 3), "
        "retry (at-least-once) or skip (at-most-once)."
    ),
)
LEASE = typer.Option(
    None,
    "--lease",
    help="Seconds a claim holds against processes on other hosts (default 900).",
    show_default=False,
)
REMOTE = typer.Option(
    None,
    "--remote",
    help=(
        "Remote claim mode: push the claim to this git remote before acting, so the remote decides "
        "between clones (also 'claims: remote' in .gitledger.yml). Unreachable remote: fail closed."
    ),
    show_default=False,
)
ALLOW_OFFLINE = typer.Option(
    False,
    "--allow-offline",
    help="In remote claim mode, act on the local claim alone when the remote cannot be reached.",
)
GITHUB_REPO = typer.Option(
    None, "--github-repo", help="OWNER/NAME for GitHub checks (default: config/origin)."
)


@app.command(
    "run-step",
    context_settings={"allow_interspersed_args": False},
)
def run_step_command(
    command: list[str] = typer.Argument(None, help="The command to guard, after '--'.", show_default=False),
    task: str = TASK,
    step: str = STEP,
    content: str | None = CONTENT,
    content_file: Path | None = CONTENT_FILE,
    arg: list[str] | None = ARG,
    check: list[str] | None = CHECK,
    on_unconfirmed: str | None = ON_UNCONFIRMED,
    lease: float | None = LEASE,
    remote: str | None = REMOTE,
    allow_offline: bool = ALLOW_OFFLINE,
    github_repo: str | None = GITHUB_REPO,
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """Run COMMAND once per intent: skip it when done, detect what already exists, never run it twice.

    Statuses and exit codes: created, skipped, already_existed (0); in_progress (75); unconfirmed (3);
    failed (the command's own exit code); interrupted (130, 143, 129: SIGINT, SIGTERM or SIGHUP reached
    gitledger; it waited for the command); usage or configuration error (2). The command gets
    GITLEDGER_KEY, _TASK, _STEP, _DIGEST, _BRANCH, _LABEL, _TRAILER, _MARKER and GITLEDGER_RESULT
    (a file: what the command writes there is recorded as the step's ref, e.g. a PR URL).

    Example: gitledger run-step -t T-42 -s push -c branch:origin -- git push origin HEAD:$BRANCH
    """
    if "--" not in RAW_ARGS:
        raise UsageError(
            "put the command after '--': gitledger run-step --task T --step S [options] -- COMMAND [ARG...]"
        )
    if not command:
        raise UsageError("no command after '--'; write: gitledger run-step --task T --step S -- COMMAND")
    from gitledger.command import check_command, run_command
    from gitledger.plan import content_from_options, plan_step, report_step
    from gitledger.protocol import Claim, StepRunner
    from gitledger.workspace import open_workspace

    step_content = content_from_options(content, content_file, arg)
    with open_workspace(repo, github_repo) as ws:
        check_command(command, ws.cwd)
        plan = plan_step(ws, task, step, step_content, check, on_unconfirmed, lease)
        arbiter = None
        if remote or ws.config.claims == "remote":
            from gitledger.sync import RemoteArbiter, default_remote

            name = default_remote(ws.repo, remote or ws.config.remote)
            arbiter = RemoteArbiter(ws.store, name, allow_offline=allow_offline)
        elif allow_offline:
            raise UsageError("--allow-offline goes with remote claims: add --remote NAME")
        runner = StepRunner(ws.store, arbiter=arbiter)
        started = runner.start(plan.key, plan.checks, plan.policy, heartbeat=False)
        if isinstance(started, Claim):
            claim = started
            try:
                outcome = run_command(
                    command,
                    plan.key,
                    ws.cwd,
                    stdout_to_stderr=json_out,
                    extra_env={"GITLEDGER_GITHUB_REPO": github_repo} if github_repo else None,
                    claim_id=claim.claim_id,
                    on_start=claim.renewal.start if claim.renewal is not None else None,
                )
            except BaseException as exc:
                runner.fail(claim, exc)
                raise
            result = runner.finish(claim, outcome)
        else:
            result = started
    for warning in result.extra.get("warnings", ()):
        say(f"warning: {warning}")
    report_step(result.to_json(), json_out)
    raise typer.Exit(result.exit_code)
