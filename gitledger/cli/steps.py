"""``gitledger run-step``: run a side-effecting command at most once per intent."""

from __future__ import annotations

from pathlib import Path

import typer

from gitledger.cli.app import ARG, CONTENT, CONTENT_FILE, JSON_OUT, REPO, STEP, TASK, Invocation, app, say
from gitledger.core.errors import UsageError

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
    help=(
        "Seconds a claim holds against processes on other machines (default 900); renewed every third "
        "of it while the command runs."
    ),
    show_default=False,
)
SETTLE = typer.Option(
    None,
    "--settle",
    help=(
        "Seconds a write whose answer was lost may still land: a rerun within that time after a failed "
        "or abandoned attempt waits for the rest before asking reality (default per check kind: "
        "github-comment 15, others 0; also 'settle:' in .gitledger.yml)."
    ),
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
    ctx: typer.Context,
    command: list[str] = typer.Argument(None, help="The command to guard, after '--'.", show_default=False),
    task: str = TASK,
    step: str = STEP,
    content: str | None = CONTENT,
    content_file: str | None = CONTENT_FILE,
    arg: list[str] | None = ARG,
    check: list[str] | None = CHECK,
    on_unconfirmed: str | None = ON_UNCONFIRMED,
    lease: float | None = LEASE,
    settle: float | None = SETTLE,
    remote: str | None = REMOTE,
    allow_offline: bool = ALLOW_OFFLINE,
    github_repo: str | None = GITHUB_REPO,
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """Run COMMAND once per intent: skip it when done, detect what already exists, never run it twice.

    Statuses and exit codes: created, skipped, already_existed (0); in_progress (75); unconfirmed (3);
    failed (the command's own exit code); interrupted (130, 143, 129: SIGINT, SIGTERM or SIGHUP reached
    gitledger; it waited for the command); error (1, e.g. a check could not query reality or the remote
    did not confirm a remote claim: nothing ran); usage or configuration error (2). The command gets
    GITLEDGER_KEY, _TASK, _STEP, _DIGEST, _BRANCH, _LABEL, _TRAILER, _MARKER and GITLEDGER_RESULT
    (a file: what the command writes there, at most 64 KiB, is recorded as the step's ref, e.g. a PR
    URL; anything else there, such as a directory or a symbolic link, is left out with a warning).

    Example: gitledger run-step -t T-42 -s push -c branch:origin -- sh -c 'git push origin
    "HEAD:refs/heads/$GITLEDGER_BRANCH"'
    """
    invocation = ctx.find_object(Invocation)
    if invocation is None or "--" not in invocation.raw_args:
        raise UsageError(
            "put the command after '--': gitledger run-step --task T --step S [options] -- COMMAND [ARG...]"
        )
    if not command:
        raise UsageError("no command after '--'; write: gitledger run-step --task T --step S -- COMMAND")
    from gitledger.cli.parse import content_from_options
    from gitledger.cli.render import report_step
    from gitledger.features.steps import StepRequest, run_step
    from gitledger.session import open_session

    request = StepRequest(
        task,
        step,
        content_from_options(content, content_file, arg),
        check or (),
        on_unconfirmed,
        lease,
        settle,
    )
    with open_session(repo, github_repo) as session:
        result = run_step(
            session,
            request,
            command,
            remote=remote,
            allow_offline=allow_offline,
            stdout_to_stderr=json_out,
            github_repo=github_repo,
        )
    for warning in result.extra.get("warnings", ()):
        say(f"warning: {warning}")
    report_step(result.to_json(), json_out)
    raise typer.Exit(result.exit_code)
