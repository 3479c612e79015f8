"""``gitledger agent install``: put the agent guard's hooks into an agent's settings (docs/agents.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from gitledger.cli.app import JSON_OUT, app, emit_json

agent_app = typer.Typer(
    name="agent",
    help=(
        "The agent guard: gitledger in front of an AI coding agent's own tool calls (gh pr create, "
        "gh issue/pr comment, gh issue create, gh api POSTs, git push, GitHub MCP tools). The hooks run "
        "'gitledger agent-hook AGENT', which refuses a call that would repeat an effect the task already "
        "made (even reworded) and fails closed when it cannot tell. See docs/agents.md."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
app.add_typer(agent_app)


def _project_dir(repo: Path) -> Path:
    """``--repo`` as an absolute path; it must be an existing directory (nothing is created there)."""
    from gitledger.core.errors import UsageError

    try:
        found = repo.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise UsageError(f"--repo {repo}: no such directory; pass the project's directory") from exc
    if not found.is_dir():
        raise UsageError(f"--repo {repo} is not a directory; pass the project's directory")
    return found


@agent_app.command("install")
def install(
    agent: str = typer.Argument(..., help="claude, codex or gemini."),
    user: bool = typer.Option(
        False, "--user", help="Install into the user's settings (~/.claude, ~/.codex or ~/.gemini)."
    ),
    project: bool = typer.Option(False, "--project", help="Install into this project's settings (default)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resulting file; change nothing."),
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove gitledger's entries, keep the rest."),
    repo: Path = typer.Option(Path("."), "--repo", help="The project directory (for --project)."),
    fail_closed: bool | None = typer.Option(
        None,
        "--fail-closed/--no-fail-closed",
        help=(
            "Claude Code: add onFailure: block, so a hook that crashes or times out refuses the call "
            "(default: when 'claude --version' is 2.1.295 or newer)."
        ),
        show_default=False,
    ),
    json_out: bool = JSON_OUT,
) -> None:
    """Merge the agent guard's hook entries into the agent's settings file, idempotently.

    Other hooks and settings are kept. Prints the '--settings' JSON for headless runs (claude -p
    --bare skips settings files but honours --settings).
    """
    from gitledger.core.errors import UsageError
    from gitledger.features.agent.install import (
        PATHS,
        apply,
        parse_version,
        plan_install,
        supports_on_failure,
    )

    if agent not in PATHS:
        raise UsageError(f"unknown agent {agent!r}; use one of: {', '.join(PATHS)}")
    if user and project:
        raise UsageError("choose --user or --project, not both")
    local, home = PATHS[agent]
    path = Path(home).expanduser() if user else _project_dir(repo) / local
    if fail_closed is None:
        fail_closed = False
        if agent == "claude" and not uninstall:
            from gitledger.local.agents import claude_version_text

            found = claude_version_text()
            fail_closed = supports_on_failure(parse_version(found) if found else None)
    plan = plan_install(agent, path, uninstall, fail_closed=fail_closed)
    if json_out:
        if not dry_run:
            apply(plan)
        emit_json(
            {
                "agent": agent,
                "path": str(path),
                "action": "uninstall" if uninstall else "install",
                "dry_run": dry_run,
                "changed": plan.changed,
                "fail_closed": fail_closed,
                "settings": plan.after,
                "settings_flag": plan.settings_flag,
            }
        )
        return
    if dry_run:
        typer.echo(plan.after, nl=False)
        typer.echo(
            f"gitledger: --dry-run: {path} {'would change' if plan.changed else 'is up to date'}", err=True
        )
        return
    apply(plan)
    what = "removed from" if uninstall else "installed in"
    state = "" if plan.changed else " (already up to date)"
    typer.echo(f"gitledger: agent guard for {agent} {what} {path}{state}", err=True)
    if not uninstall and agent == "claude":
        typer.echo("For headless runs (claude -p --bare), pass the hooks explicitly:", err=True)
        typer.echo(f"  claude -p --bare --settings '{plan.settings_flag}' ...", err=True)
    if not uninstall and agent == "codex":
        typer.echo(
            "Codex runs only trusted hooks: review them once, or pass --dangerously-bypass-hook-trust "
            "in headless runs; enable [features] codex_hooks = true on older versions.",
            err=True,
        )
