"""The agent guard's decisions: before a tool call (claim or deny), after it (record), and settling.

Every recognised effect has a ledger key built from what decides it (:mod:`gitledger.core.effects`),
never from prose. Before the call the guard reads the ledger, asks GitHub when the ledger does not
know, and either denies (the artifact exists: its URL and the safe way forward) or records a claim
and lets the call go on. After the call it records ``done`` with the URL the tool printed, or
``failed``. A claim that nobody will close (the agent was killed between the effect and the
PostToolUse hook) is settled by reality on the next call that needs its key: the exact text or head
the claim names is looked up on GitHub.

Claims belong to the agent, not to the hook process (which exits at once): the owner's pid is the
agent's process (the nearest ancestor of the hook that is not a shell, or ``GITLEDGER_AGENT_PID``),
its session is derived from the agent's session id. The claim holds while that process lives and
its lease (``DEFAULT_LEASE``, longer than the agent's longest tool timeout) runs; after that the
claim is settled by reality like a dead one (a lost PostToolUse, a command moved to the background).

Anything the guard cannot decide raises :class:`GuardError` (exit 2, "fails closed").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gitledger.core.effects import COMMENT, ISSUE, PR, PUSH, Effect
from gitledger.core.errors import CorruptLedgerError, GitledgerError
from gitledger.core.events import ATTEMPTING, DONE, FAILED, Entry, Event, Folded
from gitledger.core.keys import Content, StepKey
from gitledger.core.owner import Owner
from gitledger.core.policy import parse_iso
from gitledger.core.protocol import StepRunner, iso
from gitledger.core.store import Intent
from gitledger.features.agent.model import ALLOWED, DENY, Claimed, Decision, HookEvent, Target
from gitledger.features.agent.recognise import recognise

if TYPE_CHECKING:
    from gitledger.github.client import GitHubContext
    from gitledger.session import Session as Workspace

NO_TASK = "(no task)"
DEFAULT_LEASE = 900.0  # Claude Code's longest Bash timeout is 10 minutes
MAX_SLOTS = 64
MAX_DECISIONS = 50
STEP = {PR: "agent-pr", COMMENT: "agent-comment", ISSUE: "agent-issue", PUSH: "agent-push"}
# patterns as text: re compiles (and caches) one on first use, so a hook call pays only for those
# it uses
_PR_URL = r"https?://[^\s\"'<>]+/pull/(\d+)\b(?!#)"
_REPO_IN_URL = r"https?://[^\s\"'<>]*?/(?P<repo>[^/\s\"'<>]+/[^/\s\"'<>]+)"
_COMMENT_URL = _REPO_IN_URL + r"/(?:pull|issues)/(?P<number>\d+)#issuecomment-\d+"
_ISSUE_URL = _REPO_IN_URL + r"/issues/(?P<number>\d+)\b(?!#)"
_NUMBER = r"/(?:pull|issues)/(\d+)"


class GuardError(GitledgerError):
    """The guard cannot tell whether the call would duplicate something: refuse (exit 2)."""

    exit_code = 2


def number_of(ref: str | None) -> int | None:
    match = re.search(_NUMBER, ref or "")
    return int(match.group(1)) if match else None


class AgentGuard:
    """Decides one hook event against a workspace's ledger and GitHub.

    A plain class: a dataclass of these fields cost ~1 ms to define, on every guarded hook call.
    """

    def __init__(
        self,
        ws: Workspace,
        owner: Owner,
        task: str | None,
        event: HookEvent,
        github_for: Callable[[str], GitHubContext] | None = None,
        clock: Callable[[], float] = time.time,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        if ws.repo is None:
            raise GuardError("gitledger: the agent works outside a git repository; not acting")
        self.ws, self.owner, self.task, self.event = ws, owner, task, event
        self.github_for, self.clock, self.lease = github_for, clock, lease
        self.repo = ws.repo
        self.runner = StepRunner(ws.store, owner=owner, clock=clock)
        self._github: dict[str, GitHubContext] = {}
        self._cache: dict[tuple[str, Any], Any] = {}
        self._shared: set[str] = set()

    # -- plumbing ----------------------------------------------------------------------------------

    def gh(self, repo: str) -> GitHubContext:
        if repo not in self._github:
            if self.github_for is not None:
                self._github[repo] = self.github_for(repo)
            elif repo == self.ws.config.github_repo or repo == self._origin_repo():
                self._github[repo] = self.ws.github()  # the session's own client (closed with it)
                self._shared.add(repo)
            else:
                from gitledger.github.client import GitHubContext

                self._github[repo] = GitHubContext.from_settings(
                    repo=repo, api_url=self.ws.config.github_api_url, git_repo=self.ws.repo
                )
        return self._github[repo]

    def close(self) -> None:
        for repo, ctx in self._github.items():
            if repo not in self._shared:
                ctx.close()

    def _origin_repo(self) -> str | None:
        from gitledger.core.remotes import parse_remote_url

        if self.ws.repo is None:
            return None
        url = self.ws.repo.remote_url("origin")
        return parse_remote_url(url) if url else None

    def load(self, step: StepKey) -> Entry:
        entry = self.ws.store.load(Intent.of(step))
        bad = entry.folded.corrupt
        if bad:
            raise CorruptLedgerError(
                f"ledger entry {step.key} is corrupt (line {bad[0].number}: {bad[0].error}); inspect it "
                f"with 'gitledger show {step.key}' and repair it with 'gitledger resolve {step.key}'"
            )
        folded = entry.folded  # what the guard reads of them: anyone who can push the ledger can write any
        for event in (folded.done, folded.claim, *folded.claims):
            for name, kind in (("ref", str), ("owner", dict), ("agent", dict)):
                if event is not None and event.get(name) is not None and not isinstance(event[name], kind):
                    raise CorruptLedgerError(
                        f"ledger entry {step.key} is corrupt (the {name} of its {event['state']} event is a "
                        f"{type(event[name]).__name__}); inspect it with 'gitledger show {step.key}' and "
                        f"retire it with 'gitledger resolve {step.key} --forget'"
                    )
        return entry

    def append(self, step: StepKey, event: Event, version: str | None) -> bool:
        return self.ws.store.append(Intent.of(step), event, version) is not None

    def held(self, claim: Event) -> bool:
        """A claim holds while its agent lives and its lease runs (the lease bounds a lost Post)."""
        if not self.runner.held(claim):
            return False
        until = parse_iso(claim.get("lease_until"))
        return until is None or self.clock() < until

    def holder(self, folded: Folded) -> Event | None:
        return next((c for c in reversed(folded.claims) if self.held(c)), None)

    def step_for(self, t: Target, slot: int | None = None) -> StepKey:
        kind = t.effect.kind
        names = self.ws.config.names
        if kind == PR:
            if t.task and self.ws.config.agent.one_pr_per_task:
                return StepKey.derive(t.task, STEP[PR], Content.args({"repo": t.repo}), names)
            return StepKey.derive(
                t.task or NO_TASK, STEP[PR], Content.args({"repo": t.repo, "head": t.head}), names
            )
        if kind == PUSH:
            fields = {"repo": t.repo, "branch": t.effect.branch}
            return StepKey.derive(t.task or NO_TASK, STEP[PUSH], Content.args(fields), names)
        assert t.task is not None and slot is not None
        fields2: dict[str, Any] = {"repo": t.repo, "slot": slot}
        if kind == COMMENT:
            fields2["target"] = t.effect.target
        return StepKey.derive(t.task, STEP[kind], Content.args(fields2), names)

    # -- resolving an effect -----------------------------------------------------------------------

    def resolve(self, effect: Effect) -> Target:
        if effect.problems:
            raise GuardError(
                f"gitledger: {effect.source} is guarded but gitledger cannot tell "
                f"{', '.join(effect.problems)}; "
                "not acting. Write the call with explicit values so it can be checked for duplicates."
            )
        # the command's directory names the repository, or the branch, unless the call names them (a
        # push without a task is not checked at all)
        unnamed = effect.head if effect.kind == PR else effect.branch if effect.kind == PUSH else ""
        if (not effect.repo or unnamed is None) and (effect.kind != PUSH or self.task):
            self.readable_cwd(effect)
        repo = self.same_repo(effect.repo or self.default_repo(effect))
        head = effect.head
        if effect.kind == PR and head is None:
            head = self.current_branch(effect.cwd)
            if head is None:
                raise GuardError(
                    "gitledger: gh pr create without --head on a detached HEAD: cannot tell which branch the "
                    "pull request is for; not acting. Pass --head BRANCH."
                )
        if effect.kind == PUSH and effect.branch is None:
            branch = self.current_branch(effect.cwd)
            effect = effect._replace(branch=branch or "HEAD")
        if effect.kind in (COMMENT, ISSUE) and not self.task:
            raise GuardError(
                f"gitledger: {effect.source} needs a task to be checked for duplicates, and none is set; "
                "not acting. Set GITLEDGER_TASK (or 'git config gitledger.task', or agent.task_branch in "
                ".gitledger.yml) to the task this agent works on, then retry."
            )
        return Target(effect, self.task, repo, head)

    def readable_cwd(self, effect: Effect) -> None:
        """Refuse an effect whose repository or branch would be read in a directory the shell names
        (``cd "$DIR" && gh pr create``): that path does not exist as written, and reading the hook's
        repository instead would key the effect on another repository."""
        import os

        cwd = effect.cwd
        if cwd and ("$" in cwd or "`" in cwd) and not os.path.isdir(cwd):
            raise GuardError(
                f"gitledger: {effect.source} runs in {cwd!r}, which the shell expands: gitledger cannot "
                "tell which repository or branch that is; not acting. Write the directory out "
                "(cd /path/to/repo), or pass --repo OWNER/NAME and --head BRANCH."
            )

    def same_repo(self, repo: str) -> str:
        """``repo`` (from ``-R``, a URL, a tool's arguments, another repository's origin) spelt as the
        configured or origin repository when it is that one in another case, any other one in lower
        case: GitHub names are not case-sensitive, and the name is part of the key."""
        for known in (self.ws.config.github_repo, self._origin_repo()):
            if known and known.casefold() == repo.casefold():
                return known
        return repo.lower()

    def default_repo(self, effect: Effect) -> str:
        from gitledger.core.remotes import parse_remote_url

        remote = effect.remote or "origin"
        elsewhere, url = self.other_remote_url(effect.cwd, remote)
        configured = None if elsewhere else self.ws.config.github_repo  # this repository's setting
        if configured and not effect.remote:
            return configured
        if not elsewhere:
            url = self.repo.remote_url(remote)
        parsed = parse_remote_url(url) if url else None
        if parsed:
            return parsed
        if configured:
            return configured
        raise GuardError(
            f"gitledger: cannot tell which GitHub repository {effect.source} acts on (remote {remote!r} "
            f"is {url or 'missing'}); not acting. Pass --repo OWNER/NAME or set github.repo in "
            ".gitledger.yml."
        )

    def other_remote_url(self, cwd: str | None, remote: str) -> tuple[bool, str | None]:
        """(whether ``cwd`` is in another repository than the hook's, the URL of its remote ``remote``):
        ``cd /other/repo && gh pr create`` acts on that repository (a subdirectory or a worktree of
        this one is this one)."""
        if not cwd or cwd == str(self.ws.cwd):
            return False, None
        from gitledger.git.repo import GitRepo

        try:
            with GitRepo.discover(cwd) as other:
                if other.common_dir == self.repo.common_dir:
                    return False, None
                return True, other.remote_url(remote)
        except GitledgerError:
            return False, None

    def current_branch(self, cwd: str | None) -> str | None:
        from gitledger.features.agent.task import current_branch

        if cwd and cwd != str(self.ws.cwd):
            from gitledger.git.repo import GitRepo

            try:
                with GitRepo.discover(cwd) as other:
                    return current_branch(other)
            except GitledgerError:
                pass
        return current_branch(self.repo)

    # -- PreToolUse --------------------------------------------------------------------------------

    def pre(self) -> Decision:
        effects = recognise(
            self.event.tool_name, self.event.tool_input, self.event.cwd, self.ws.config.agent.rules
        )
        claimed: list[Claimed] = []
        try:
            for effect in effects:
                answer = self.pre_one(self.resolve(effect))
                if isinstance(answer, Decision):
                    self.withdraw(claimed, "another effect of the same call was refused")
                    return answer
                if answer is not None:
                    claimed.append(answer)
        except BaseException:
            self.withdraw(claimed, "the guard could not decide the whole call")
            raise
        return ALLOWED

    def withdraw(self, claimed: list[Claimed], why: str) -> None:
        for c in claimed:
            self.runner.record(
                c.step, self.runner.event(c.step, FAILED, claim=c.claim_id, withdrawn=True, message=why)
            )

    def pre_one(self, t: Target) -> Decision | Claimed | None:
        if t.effect.kind == PR:
            return self.pre_pr(t)
        if t.effect.kind == PUSH:
            return self.pre_push(t)
        return self.pre_slots(t)

    def claim(self, t: Target, step: StepKey, entry: Entry, slot: int | None = None) -> Claimed | None:
        folded = entry.folded
        claim = self.runner.event(
            step,
            ATTEMPTING,
            lease_until=iso(self.clock() + self.lease),
            checks=[f"agent:{t.effect.kind}"],
            supersedes=[c["id"] for c in folded.claims if isinstance(c.get("id"), str)],
            agent=t.detail(
                tool_use_id=self.event.tool_use_id,
                agent=self.event.agent,
                session_id=self.event.session_id,
                slot=slot,
            ),
        )
        return Claimed(step, claim["id"]) if self.append(step, claim, entry.version) else None

    def record_found(
        self, step: StepKey, t: Target, entry: Entry, ref: str, text: str | None, **more: Any
    ) -> bool:
        detail = t.detail(**more)
        if text is not None:
            detail["text"] = text[:4000]
        event = self.runner.event(
            step,
            DONE,
            outcome="already_existed",
            ref=ref,
            check=f"agent:{t.effect.kind}",
            claim=[c["id"] for c in entry.folded.claims if isinstance(c.get("id"), str)] or None,
            agent=detail,
        )
        return self.append(step, event, entry.version)

    def settle_failed(self, step: StepKey, entry: Entry, why: str) -> bool:
        ids = [c["id"] for c in entry.folded.claims if isinstance(c.get("id"), str)]
        return self.append(
            step, self.runner.event(step, FAILED, claim=ids or None, message=why), entry.version
        )

    def settle_by_reality(self, t: Target, step: StepKey, entry: Entry) -> None:
        """Settle an open claim by asking GitHub for exactly what it names (the PR from its head, the
        comment or issue with its text): one whose agent is gone (or whose lease ran out), or one whose
        call ended well but named no URL."""
        claim = entry.folded.claim or {}
        detail = claim.get("agent") or {}
        kind = t.effect.kind
        if kind == PR:
            head = str(detail.get("head") or t.head)
            pr = self.gh(t.repo).pull_for_head(head)
            if pr is not None:
                self.record_found(step, t._replace(head=head), entry, pr.html_url, None, status=pr.status)
            else:
                self.settle_failed(step, entry, f"settled: no pull request from {head} on GitHub")
            return
        if kind == PUSH:
            self.settle_failed(step, entry, "settled: a push is repeated safely")
            return
        from gitledger.core import similarity  # texts only: a PR's path never loads it

        text = str(detail.get("text") or "")
        found = self.reality(t, text, similarity.SETTLE) if text else None
        if found is not None:
            self.record_found(step, t, entry, found[0], text, slot=detail.get("slot"))
        else:
            self.settle_failed(step, entry, "settled: the claimed text is not on GitHub")

    def same_call(self, claim: Event) -> bool:
        detail = claim.get("agent") or {}
        return bool(self.event.tool_use_id) and detail.get("tool_use_id") == self.event.tool_use_id

    # PRs: one per task (or per head), found on GitHub by head in any state

    def pre_pr(self, t: Target) -> Decision | Claimed | None:
        step = self.step_for(t)
        assert t.head is not None
        for _ in range(MAX_DECISIONS):
            entry = self.load(step)
            folded = entry.folded
            if folded.state == DONE:
                assert folded.done is not None
                detail = folded.done.get("agent") or {}
                return deny_pr(t, folded.ref, detail.get("head") or t.head, detail.get("status"), found=False)
            if folded.state == ATTEMPTING:
                holder = self.holder(folded)
                if holder is not None:
                    return None if self.same_call(holder) else deny_in_progress(t, step, holder)
                self.settle_by_reality(t, step, entry)
                continue
            pr = self.gh(t.repo).pull_for_head(t.head)
            if pr is not None:
                if self.record_found(step, t, entry, pr.html_url, None, status=pr.status):
                    return deny_pr(t, pr.html_url, t.head, pr.status, found=True)
                continue
            claimed = self.claim(t, step, entry)
            if claimed is not None:
                return claimed
        raise GuardError(f"gitledger: the ledger entry {step.key} kept changing; not acting. Retry the call.")

    # pushes: naturally idempotent; refused only when the task's PR is on another branch

    def pre_push(self, t: Target) -> Decision | Claimed | None:
        branch = t.effect.branch or "HEAD"
        if t.task and self.ws.config.agent.one_pr_per_task:
            pr_entry = self.load(self.step_for(Target(Effect(PR, "push"), t.task, t.repo, branch)))
            done = pr_entry.folded.done
            head = (done or {}).get("agent", {}).get("head") if done else None
            ref = done.get("ref") if done else None
            if head and head != branch:
                return Decision(
                    DENY,
                    f"gitledger: task {t.task} already has pull request #{number_of(ref)} "
                    f"from branch {head}: {ref}. Do not push a new branch {branch} for it (that "
                    f"leads to a second pull request). Push your commits to {head} instead: "
                    f"git push {t.effect.remote or 'origin'} HEAD:{head}",
                )
        if not t.task:
            return None
        step = self.step_for(t)
        for _ in range(MAX_DECISIONS):
            entry = self.load(step)
            folded = entry.folded
            if folded.state == DONE or self.holder(folded) is not None:
                return None  # pushing again to a branch is an update, not a duplicate
            claimed = self.claim(t, step, entry)
            if claimed is not None:
                return claimed
        return None

    # comments and issues: slots per (task, target) / (task, repo), near-duplicate texts

    def reality(self, t: Target, text: str, threshold: float) -> tuple[str, str] | None:
        """(url, text) of a comment/issue by the token's user whose text is a near-duplicate, or None."""
        from gitledger.core import similarity

        gh = self.gh(t.repo)
        if t.effect.kind == COMMENT:
            assert t.effect.target is not None
            key: tuple[str, Any] = ("comments", (t.repo, t.effect.target))
            if key not in self._cache:
                self._cache[key] = gh.comments(t.effect.target)
            candidates = [c for c in self._cache[key] if similarity.near_duplicate(c.body, text, threshold)]
            if candidates:
                login = gh.login()
                for c in candidates:
                    if c.user == login:
                        return c.html_url, c.body
            return None
        key = ("issues", t.repo)
        if key not in self._cache:
            self._cache[key] = gh.issues_by(gh.login())
        for issue in self._cache[key]:
            if similarity.near_duplicate(issue.title, text, threshold):
                return issue.html_url, issue.title
        return None

    def pre_slots(self, t: Target) -> Decision | Claimed | None:
        from gitledger.core import similarity

        text = t.effect.text
        for slot in range(MAX_SLOTS):
            step = self.step_for(t, slot)
            for _ in range(MAX_DECISIONS):
                entry = self.load(step)
                folded = entry.folded
                if folded.state == DONE:
                    assert folded.done is not None
                    recorded = (folded.done.get("agent") or {}).get("text")
                    if recorded is None or similarity.near_duplicate(recorded, text, similarity.SAME_INTENT):
                        return deny_text(t, folded.ref, recorded, found=False)
                    break  # a different comment/issue of this task: the next slot
                if folded.state == ATTEMPTING:
                    assert folded.claim is not None
                    holder = self.holder(folded)
                    claimed_text = str((folded.claim.get("agent") or {}).get("text") or "")
                    if holder is not None:
                        if self.same_call(holder):
                            return None
                        if similarity.near_duplicate(claimed_text, text, similarity.SAME_INTENT):
                            return deny_in_progress(t, step, holder)
                        break
                    self.settle_by_reality(t, step, entry)
                    continue
                found = self.reality(t, text, similarity.REALITY)
                if found is not None:
                    if self.record_found(step, t, entry, found[0], found[1], slot=slot):
                        return deny_text(t, found[0], found[1], found=True)
                    continue
                claimed = self.claim(t, step, entry, slot)
                if claimed is not None:
                    return claimed
            else:
                raise GuardError(f"gitledger: the ledger entry {step.key} kept changing; not acting. Retry.")
        raise GuardError(
            f"gitledger: task {t.task} already made {MAX_SLOTS} {t.effect.kind}s here; not acting. "
            "Check with 'gitledger list' what it did."
        )

    # -- PostToolUse / PostToolUseFailure ------------------------------------------------------------

    def post(self, failed: bool) -> Decision:
        effects = recognise(
            self.event.tool_name, self.event.tool_input, self.event.cwd, self.ws.config.agent.rules
        )
        output = self.event.tool_output or ""
        problems: list[str] = []
        for effect in effects:
            if effect.kind == COMMENT and effect.target is not None:
                # its key needs no body, which the line may have removed (--body-file F && rm F): the
                # claim holds the text that was posted
                effect = effect._replace(problems=())
            try:
                t = self.resolve(effect)
            except GuardError as exc:
                problems.append(exc.message)
                continue
            self.post_one(t, output, failed)
        return Decision("nothing", warning="; ".join(problems) or None)

    def find_own_claim(self, t: Target) -> tuple[StepKey, Event | None, Entry, int | None] | None:
        slots = [None] if t.effect.kind in (PR, PUSH) else list(range(MAX_SLOTS))
        free: tuple[StepKey, Event | None, Entry, int | None] | None = None
        for slot in slots:
            step = self.step_for(t, slot)
            entry = self.ws.store.load(Intent.of(step))
            for claim in reversed(entry.folded.claims):
                if self.same_call(claim) or (
                    not self.event.tool_use_id
                    and (claim.get("owner") or {}).get("session") == self.owner.session
                ):
                    return step, claim, entry, slot
            if free is None and (slot is None or entry.folded.state != DONE):
                free = (step, None, entry, slot)
            if not entry.exists:
                break
        return free

    def posted_anyway(self, t: Target, step: StepKey, entry: Entry, claim: Event | None) -> bool:
        """A comment or issue whose call failed may be on GitHub all the same (the line failed after gh
        posted it, a timeout): recorded as found when its exact claimed text is there. A PR is found by
        its head on the next call; this looks for texts, which the next call compares at a high bar."""
        if t.effect.kind not in (COMMENT, ISSUE) or claim is None:
            return False
        from gitledger.core import similarity

        detail = claim.get("agent") or {}
        text = str(detail.get("text") or "")
        try:
            found = self.reality(t, text, similarity.SETTLE) if text else None
        except GitledgerError:
            return False  # recorded failed, as before: GitHub cannot be asked now
        return found is not None and self.record_found(
            step, t, entry, found[0], text, slot=detail.get("slot")
        )

    def post_one(self, t: Target, output: str, failed: bool) -> None:
        if t.effect.kind == PUSH and not t.task:
            return
        found = self.find_own_claim(t)
        if found is None:
            return
        step, claim, entry, slot = found
        claim_id = claim.get("id") if claim else None
        if failed:
            if claim_id and not self.posted_anyway(t, step, entry, claim):
                message = (self.event.error or "the tool call failed")[:2000]
                self.runner.record(step, self.runner.event(step, FAILED, claim=claim_id, message=message))
            return
        ref = ref_from_output(t, output)
        if ref is None and claim_id and t.effect.kind != PUSH:
            # the call ended well but named no URL ('> /dev/null'; '|| true' after gh failed): whether
            # the effect exists is asked of GitHub, or the task's next call would be refused for it
            try:
                return self.settle_by_reality(t, step, entry)
            except GitledgerError:
                pass  # GitHub cannot be asked now: recorded done without a URL, as before
        if claim is None and (ref is None or entry.folded.state == DONE):
            return  # nothing of ours to close and nothing new to record
        claimed_text = (claim.get("agent") or {}).get("text") if claim else None
        if t.effect.kind == COMMENT and isinstance(claimed_text, str):  # what the call was let through with
            t = t._replace(effect=t.effect._replace(body=claimed_text))
        event = self.runner.event(
            step,
            DONE,
            outcome="created",
            ref=ref,
            claim=claim_id,
            agent=t.detail(
                tool_use_id=self.event.tool_use_id, status="open" if t.effect.kind == PR else None, slot=slot
            ),
            message=None if ref else "the tool's output named no URL",
        )
        self.runner.record(step, event)


def ref_from_output(t: Target, output: str) -> str | None:
    kind = t.effect.kind
    if kind == PR:
        match = re.search(_PR_URL, output)
        return match.group(0) if match else None
    if kind in (COMMENT, ISSUE):  # of this repository (and target): a line may print others' URLs
        for match in re.finditer(_COMMENT_URL if kind == COMMENT else _ISSUE_URL, output):
            repo, number = match["repo"].casefold(), int(match["number"])
            if repo == t.repo.casefold() and (kind == ISSUE or number == t.effect.target):
                return match.group(0)
        return None
    return f"{t.repo}:refs/heads/{t.effect.branch}"


# -- reasons the model reads ---------------------------------------------------------------------------


def deny_pr(t: Target, ref: str | None, head: str, status: str | None, found: bool) -> Decision:
    number = number_of(ref)
    who = f"task {t.task}" if t.task else f"branch {head}"
    state = f" ({status})" if status else ""
    origin = " (found on GitHub: opened by an earlier run that did not finish recording it)" if found else ""
    if status == "merged":
        way = "It is merged: the work is done; do not open another pull request for it."
    elif status == "closed":
        way = (
            f"It is closed: reopen it with 'gh pr reopen {number}' and push to {head} instead of opening "
            "another."
        )
    else:
        way = f"To change it, push to {head} or run: gh pr edit {number} --title ... --body ..."
    return Decision(
        DENY,
        f"gitledger: {who} already has pull request #{number}{state} from branch {head}: {ref}{origin}. "
        f"Do not open another. {way}",
    )


def deny_text(t: Target, ref: str | None, recorded: str | None, found: bool) -> Decision:
    kind = t.effect.kind
    number = number_of(ref)
    origin = " (found on GitHub: posted by an earlier run that did not finish recording it)" if found else ""
    said = f' It says: "{recorded[:300]}"' if recorded else ""
    if kind == COMMENT:
        way = (
            "Do not post it again. To change it, edit that comment: "
            f"gh api -X PATCH repos/{t.repo}/issues/comments/{ref.rsplit('-', 1)[-1] if ref else 'ID'} "
            "-f body=..."
        )
        what = f"a comment on #{t.effect.target}"
    else:
        way = f"Do not open another. To change it, run: gh issue edit {number} --title ... --body ..."
        what = f"issue #{number}"
    return Decision(DENY, f"gitledger: task {t.task} already posted {what}: {ref}{origin}.{said} {way}")


def deny_in_progress(t: Target, step: StepKey, claim: Event) -> Decision:
    owner = claim.get("owner") or {}
    return Decision(
        DENY,
        f"gitledger: the same {t.effect.kind} for task {t.task or NO_TASK} is being made right now by "
        "another call "
        f"(claimed at {claim.get('at')} by pid {owner.get('pid')} on {owner.get('host')}, until "
        f"{claim.get('lease_until')}). Do not repeat it: wait for that call to finish, then look at the "
        "result "
        f"(gitledger show {step.key}).",
    )


__all__ = ["DEFAULT_LEASE", "NO_TASK", "AgentGuard", "GuardError", "number_of", "ref_from_output"]
