"""``gitledger github open-pr`` and ``gitledger github comment``: idempotent GitHub writes.

Thin: parse, find the step, call :mod:`gitledger.github.writes`, print. PyGithub is imported only when
one of these commands runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gitledger.cli.app import ARG, CONTENT, CONTENT_FILE, JSON_OUT, REPO, app, emit_json, say
from gitledger.core.errors import UsageError

if TYPE_CHECKING:
    from gitledger.core.keys import StepKey
    from gitledger.github.writes import Outcome
    from gitledger.session import Session

github_app = typer.Typer(
    name="github",
    help=(
        "Idempotent GitHub writes, meant to run inside 'gitledger run-step': each looks for the step's "
        "artifact first and never writes twice. Token: GITHUB_TOKEN or GH_TOKEN; API: GITHUB_API_URL."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(github_app, name="github")

GITHUB_REPO = typer.Option(
    None,
    "--github-repo",
    envvar="GITLEDGER_GITHUB_REPO",
    help=(
        "OWNER/NAME (default: run-step's --github-repo, then github.repo in .gitledger.yml, "
        "else the origin URL)."
    ),
)
TASK = typer.Option(None, "--task", "-t", help="Task id (default: GITLEDGER_TASK from run-step).")
STEP = typer.Option(None, "--step", "-s", help="Step name (default: GITLEDGER_STEP from run-step).")
BODY = typer.Option("", "--body", "-b", help="Body text; the step's hidden marker is appended.")
BODY_FILE = typer.Option(
    None, "--body-file", help="Read the body from this file (at most 16 MiB; '-' for stdin)."
)


def _step(
    ws: Session,
    task: str | None,
    step: str | None,
    content: str | None,
    content_file: str | None,
    arg: list[str] | None,
) -> StepKey:
    """The step from --task/--step (and content options), else from run-step's GITLEDGER_* variables."""
    from gitledger.cli.parse import content_from_options
    from gitledger.core.keys import StepKey
    from gitledger.github.writes import step_from_env

    if task or step:
        if not (task and step):
            raise UsageError("pass both --task and --step (or run inside 'gitledger run-step')")
        return StepKey.derive(task, step, content_from_options(content, content_file, arg), ws.config.names)
    found = step_from_env(os.environ, ws.config.names)
    if found is None:
        raise UsageError(
            "no step given: run this as the command of 'gitledger run-step' (which sets GITLEDGER_KEY "
            "and friends) or pass --task and --step"
        )
    return found


def _body(body: str, body_file: str | None) -> str:
    if body_file is None:
        return body
    if body:
        raise UsageError("use only one of --body and --body-file")
    from gitledger.cli.parse import read_file_option

    try:
        return read_file_option(body_file, "--body-file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read --body-file {body_file}: {exc}; give UTF-8 text") from exc


def _report(outcome: Outcome, what: str, json_out: bool, calls: dict[str, object]) -> None:
    result_path = os.environ.get("GITLEDGER_RESULT")
    if result_path:
        try:
            Path(result_path).write_text(outcome.url + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write GITLEDGER_RESULT {result_path}: {exc.strerror}") from exc
    for warning in outcome.warnings:
        say(f"warning: {warning}")
    if json_out:
        emit_json({**outcome.to_json(), "api_calls": calls})
        return
    if outcome.status == "created":
        say(f"created {what} {outcome.url}")
    else:
        say(f"{what} already exists (found by {outcome.found_by}): {outcome.url}; nothing created")
    typer.echo(outcome.url)


@github_app.command("open-pr")
def open_pr_command(
    title: str = typer.Option(..., "--title", help="Pull request title."),
    body: str = BODY,
    body_file: str | None = BODY_FILE,
    base: str | None = typer.Option(None, "--base", help="Base branch (default: the repository's)."),
    remote: str | None = typer.Option(
        None,
        "--remote",
        help="Remote to push the branch to (default: 'remote' in .gitledger.yml, else origin).",
    ),
    github_repo: str | None = GITHUB_REPO,
    task: str | None = TASK,
    step: str | None = STEP,
    content: str | None = CONTENT,
    content_file: str | None = CONTENT_FILE,
    arg: list[str] | None = ARG,
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """Open the step's pull request once: push HEAD to the key's branch, label it, mark the body.

    Looks first for a PR of the key in any state (open, closed, merged) and reports it instead of
    opening another. Writes the PR URL to GITLEDGER_RESULT and prints it on stdout.

    Example: gitledger run-step -t T-42 -s open-pr -c github-pr -- gitledger github open-pr --title "Fix"
    """
    from gitledger.github.writes import open_pull_request
    from gitledger.session import open_session

    text = _body(body, body_file)
    with open_session(repo, github_repo) as ws:
        step_key = _step(ws, task, step, content, content_file, arg)
        ctx = ws.github()
        try:
            outcome = open_pull_request(
                ctx,
                step_key,
                title=title,
                body=text,
                base=base,
                remote=remote or ws.config.remote or "origin",
                git_repo=ws.repo,
            )
        finally:
            ctx.close()
        _report(outcome, "pull request", json_out, ctx.calls.as_dict())


@github_app.command("comment")
def comment_command(
    number: int = typer.Argument(..., help="Issue or pull request number."),
    body: str = BODY,
    body_file: str | None = BODY_FILE,
    github_repo: str | None = GITHUB_REPO,
    task: str | None = TASK,
    step: str | None = STEP,
    content: str | None = CONTENT,
    content_file: str | None = CONTENT_FILE,
    arg: list[str] | None = ARG,
    settle: float = typer.Option(
        15.0,
        "--settle",
        help=(
            "When GitHub gives no definite answer to the post: look for the comment this many seconds "
            "before giving up (it may land late; it is never posted twice)."
        ),
        min=0,
        max=600,
    ),
    json_out: bool = JSON_OUT,
    repo: Path | None = REPO,
) -> None:
    """Post the step's comment on issue/PR NUMBER once (the hidden marker finds it again).

    Example: gitledger run-step -t T-42 -s notify -c github-comment:7 -- gitledger github comment 7 -b "Done"
    """
    from gitledger.github.writes import post_comment
    from gitledger.session import open_session

    text = _body(body, body_file)
    if not text.strip():
        raise UsageError("the comment needs a body: pass --body or --body-file")
    with open_session(repo, github_repo) as ws:
        step_key = _step(ws, task, step, content, content_file, arg)
        ctx = ws.github()
        try:
            outcome = post_comment(ctx, step_key, number, text, settle=settle)
        finally:
            ctx.close()
        _report(outcome, "comment", json_out, ctx.calls.as_dict())
