"""SessionStart briefing and the Stop gate of the agent guard.

The briefing lists what the task already did (from the ledger: every entry of the task, the agent
guard's and run-step's alike) and what is half-done, so that a restarted model does not try again in
the first place. The Stop gate refuses to let the model stop while one of the task's claims is open
and cannot be settled by reality; it never blocks twice in a row (``stop_hook_active``).
"""

from __future__ import annotations

from typing import Any

from gitledger.core.events import ATTEMPTING, DONE, FAILED, Entry
from gitledger.features.agent.guard import STEP, AgentGuard, GuardError, number_of
from gitledger.features.agent.model import CONTEXT, KEEP_WORKING, SILENT, Decision, Target

_KIND_OF_STEP = {v: k for k, v in STEP.items()}


def _mapping(value: Any) -> dict[str, Any]:
    """An event's ``agent`` or ``owner``; {} when it is not an object (anyone who can push the ledger
    refs can write any event: the briefing still lists the task's other entries)."""
    return value if isinstance(value, dict) else {}


def _well_formed(detail: dict[str, Any]) -> bool:
    """Whether a claim's ``agent`` details have the types the guard writes (a forged one may not)."""
    kinds = {"repo": str, "source": str, "head": str, "branch": str, "text": str, "target": int}
    return all(detail.get(name) is None or isinstance(detail[name], kind) for name, kind in kinds.items())


def describe(entry: Entry) -> str:
    folded = entry.folded
    event = folded.done or folded.claim or (entry.events[-1] if entry.events else {})
    detail = _mapping(event.get("agent"))
    kind = detail.get("kind")
    ref = folded.ref
    if kind == "pr":
        what = (
            f"pull request #{number_of(ref)} from branch {detail.get('head')}"
            if ref
            else (f"pull request from branch {detail.get('head')}")
        )
    elif kind == "comment":
        what = f"comment on #{detail.get('target')}"
    elif kind == "issue":
        what = f"issue #{number_of(ref)}" if ref else f"issue {str(detail.get('text', ''))[:80]!r}"
    elif kind == "push":
        what = f"push of branch {detail.get('branch')}"
    else:
        what = f"step {entry.field('step')}"
    return what + (f": {ref}" if ref else "")


def task_entries(guard: AgentGuard) -> list[Entry]:
    task = guard.task
    return [e for e in guard.ws.store.entries() if e.field("task") == task]


def briefing(guard: AgentGuard) -> Decision:
    if not guard.task:
        return Decision(
            CONTEXT,
            context=(
                "gitledger guards this session's GitHub side effects, but no task is set: pull requests are "
                "checked per head branch, comments and issues are refused until GITLEDGER_TASK is set."
            ),
        )
    done, half, failed = [], [], []
    for entry in task_entries(guard):
        state = entry.folded.state
        line = f"- {describe(entry)}"
        if state == DONE:
            done.append(line)
        elif state == ATTEMPTING:
            claim = entry.folded.claim or {}
            half.append(f"{line} (started {claim.get('at')}, outcome not recorded; check before redoing)")
        elif state == FAILED:
            failed.append(f"{line} (failed; may be retried)")
    parts = [f"gitledger: this session works on task {guard.task}."]
    if done:
        parts.append(
            "Already done for this task (do not do these again; change them instead):\n" + "\n".join(done)
        )
    if half:
        parts.append("Half-done (a run stopped before recording the outcome):\n" + "\n".join(half))
    if failed:
        parts.append("Failed earlier:\n" + "\n".join(failed))
    if not (done or half or failed):
        parts.append("Nothing recorded for it yet.")
    parts.append(
        "Calls that would repeat one of these (even reworded) are refused with the existing URL; "
        "`gitledger list` shows the ledger."
    )
    return Decision(CONTEXT, context="\n".join(parts))


def stop_gate(guard: AgentGuard, stop_hook_active: bool) -> Decision:
    if stop_hook_active or not guard.task:
        return SILENT
    open_entries: list[str] = []
    for entry in task_entries(guard):
        folded = entry.folded
        if folded.state != ATTEMPTING or folded.claim is None:
            continue
        if _settle(guard, entry):
            continue
        open_entries.append(f"- {describe(entry)} [{entry.key}]")
    if not open_entries:
        return SILENT
    return Decision(
        KEEP_WORKING,
        f"gitledger: task {guard.task} has steps that were started and whose outcome is not known:\n"
        + "\n".join(open_entries)
        + "\nBefore stopping, find out whether each happened (e.g. gh pr list --head BRANCH --state all, "
        "or the issue's comments), then record it: gitledger resolve KEY --done --ref URL if it exists, "
        "or gitledger resolve KEY --forget if it does not.",
    )


def _settle(guard: AgentGuard, entry: Entry) -> bool:
    """Settle a dead agent claim by reality; True when the entry is no longer half-done."""
    folded = entry.folded
    if guard.holder(folded) is not None:
        return False
    detail = _mapping((folded.claim or {}).get("agent"))
    kind = _KIND_OF_STEP.get(str(entry.field("step")))
    if kind is None or not detail.get("repo") or not _well_formed(detail):
        return False  # left open: the gate names it, with how to settle it by hand
    from gitledger.core.effects import Effect

    effect = Effect(
        kind,
        str(detail.get("source") or kind),
        repo=detail["repo"],
        head=detail.get("head"),
        target=detail.get("target"),
        branch=detail.get("branch"),
        title=detail.get("text") if kind == "issue" else None,
        body=detail.get("text") if kind == "comment" else None,
    )
    target = Target(effect, guard.task, detail["repo"], detail.get("head"))
    try:
        if kind == "pr":
            guard.pre_pr(target)  # settles the dead claim, then answers for the same head
        elif kind in ("comment", "issue"):
            guard.pre_slots(target)
        else:
            return False
    except GuardError:
        return False
    # pre_* may have claimed again (nothing existed): give that claim back, the entry is settled
    reread = guard.ws.store.load(entry.key)
    for claim in reread.folded.claims:
        if _mapping(claim.get("owner")).get("session") == guard.owner.session:
            guard.runner.record(
                _step_of(guard, target, entry),
                guard.runner.event(
                    _step_of(guard, target, entry),
                    FAILED,
                    claim=claim["id"],
                    withdrawn=True,
                    message="stop gate",
                ),
            )
    return guard.ws.store.load(entry.key).folded.state != ATTEMPTING


def _step_of(guard: AgentGuard, target: Target, entry: Entry) -> Any:
    from gitledger.core.keys import StepKey

    for slot in [None, *range(64)]:
        try:
            step = guard.step_for(target, slot)
        except AssertionError:
            continue
        if step.key == entry.key:
            return step
        if target.effect.kind in ("pr", "push"):
            break
    return StepKey(str(entry.field("task")), str(entry.field("step")), entry.key.rsplit(".", 1)[-1])
