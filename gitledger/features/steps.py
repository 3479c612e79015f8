"""Steps: from a request to what the protocol needs (key, checks, policy), and running a guarded
command once per intent.

Shared by the ``run-step`` command and the typer-free fast path (:mod:`gitledger.cli.fastpath`), so both
decide the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gitledger.core.checks import Check
from gitledger.core.errors import UsageError
from gitledger.core.keys import Content, StepKey
from gitledger.core.policy import StepPolicy
from gitledger.core.protocol import StepResult
from gitledger.session import Session


@dataclass(frozen=True)
class StepRequest:
    """A step as asked for: its name, its content and the options given for this run."""

    task: str
    step: str
    content: Content = field(default_factory=Content.empty)
    checks: Sequence[str] = ()
    on_unconfirmed: str | None = None
    lease: float | None = None
    settle: float | None = None


@dataclass
class StepPlan:
    key: StepKey
    checks: list[Check]
    policy: StepPolicy


def plan_step(session: Session, request: StepRequest) -> StepPlan:
    """Combine options, the step's settings in .gitledger.yml and the defaults (in that order)."""
    cfg = session.config
    return StepPlan(
        StepKey.derive(request.task, request.step, request.content, cfg.names),
        session.checks(request.checks or cfg.step(request.step).checks or ()),
        session.policy(request.step, request.on_unconfirmed, request.lease, request.settle),
    )


def run_step(
    session: Session,
    request: StepRequest,
    command: Sequence[str],
    *,
    remote: str | None = None,
    allow_offline: bool = False,
    stdout_to_stderr: bool = False,
    github_repo: str | None = None,
) -> StepResult:
    """Run ``command`` once per intent: skip it when done, detect what exists, never run it twice."""
    from gitledger.core.protocol import Claim, StepRunner
    from gitledger.local.command import check_command, run_command

    if remote == "":  # e.g. --remote "$REMOTE" with REMOTE unset: not silently local claims
        raise UsageError("--remote is given an empty name; give a remote's name (see 'git remote')")
    check_command(command, session.cwd)
    plan = plan_step(session, request)
    arbiter = None
    if remote or session.config.claims == "remote":
        from gitledger.git.sync import RemoteArbiter, default_remote

        repo, store = session.git()
        name = default_remote(repo, remote or session.config.remote)
        arbiter = RemoteArbiter(store, name, allow_offline=allow_offline)
    elif allow_offline:
        raise UsageError("--allow-offline goes with remote claims: add --remote NAME")
    runner = StepRunner(session.store, arbiter=arbiter)
    # heartbeats start once the command runs: no thread may exist while the command is forked
    started = runner.start(plan.key, plan.checks, plan.policy, heartbeat=False)
    if not isinstance(started, Claim):
        return started
    try:
        outcome = run_command(
            command,
            plan.key,
            session.cwd,
            stdout_to_stderr=stdout_to_stderr,
            extra_env={"GITLEDGER_GITHUB_REPO": github_repo} if github_repo else None,
            claim_id=started.claim_id,
            on_start=started.renewal.start if started.renewal is not None else None,
        )
    except BaseException as exc:
        runner.fail(started, exc)
        raise
    return runner.finish(started, outcome)


__all__ = ["StepPlan", "StepRequest", "plan_step", "run_step"]
