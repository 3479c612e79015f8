"""Idempotent GitHub actions: open the PR of a step, post the comment of a step.

These are meant to run as the command inside ``gitledger run-step`` (which guards them with the ledger),
but each is also idempotent on its own: it looks for the step's artifact first and, when a write ends
without a definite answer (GitHub's 422 "already exists", a 5xx, a timeout, a dropped connection), it
queries reality again and reports what exists instead of writing a second time. Writes are never
retried blindly (see :mod:`gitledger.github.client`).

Imported lazily: it imports PyGithub through :mod:`gitledger.github.client`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import github

from gitledger.core.errors import GitError, UsageError, last_line
from gitledger.core.keys import KEY_RE, Names, StepKey, branch_for, label_for
from gitledger.git.repo import GitRepo
from gitledger.github.client import MAX_BODY, GitHubContext, describe, is_unknown_outcome
from gitledger.github.settings import GitHubError, WriteUnknownError

CREATED = "created"
EXISTING = "existing"
GIT_NETWORK_TIMEOUT = 300.0
LABEL_COLOR = "5319e7"
LABEL_DESCRIPTION = "gitledger idempotency key (do not remove)"
CREATE_RETRIES_AFTER_CHECK = 1  # re-sends of a PR create, each only after a look found nothing


@dataclass
class Outcome:
    """What an action did: ``created`` a new artifact or found an ``existing`` one (and how)."""

    status: str
    url: str
    number: int | None = None
    found_by: str | None = None  # head, label, marker, comment (when existing)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "url": self.url}
        if self.number is not None:
            data["number"] = self.number
        if self.found_by:
            data["found_by"] = self.found_by
        if self.warnings:
            data["warnings"] = self.warnings
        return data


# -- the step, from run-step's environment ----------------------------------------------------------------


def step_from_env(env: Mapping[str, str], names: Names | None = None) -> StepKey | None:
    """The step ``run-step`` describes in ``GITLEDGER_*`` variables, or None when they are not set.

    Rebuilt from ``GITLEDGER_TASK``, ``_STEP`` and ``_DIGEST``; the prefixes are recovered from
    ``GITLEDGER_BRANCH`` and ``GITLEDGER_LABEL`` so the derived names match exactly what run-step used.
    Inconsistent variables are a usage error rather than a guess.
    """
    key = env.get("GITLEDGER_KEY", "").strip()
    if not key:
        return None
    task, step_name, digest = (env.get(f"GITLEDGER_{n}", "") for n in ("TASK", "STEP", "DIGEST"))
    if not KEY_RE.match(key) or not task or not step_name or len(digest) != 64:
        raise UsageError(
            "GITLEDGER_KEY is set but GITLEDGER_TASK, GITLEDGER_STEP or GITLEDGER_DIGEST is missing or "
            "invalid; run this inside 'gitledger run-step' or pass --task and --step"
        )
    base = names or Names()
    branch_prefix, label_prefix = base.branch_prefix, base.label_prefix
    branch = env.get("GITLEDGER_BRANCH", "").strip()
    if branch:
        suffix = branch_for(key, Names(branch_prefix="", label_prefix=base.label_prefix))
        if not branch.endswith(suffix):
            raise UsageError(f"GITLEDGER_BRANCH {branch!r} does not belong to GITLEDGER_KEY {key!r}")
        branch_prefix = branch[: -len(suffix)]
    label = env.get("GITLEDGER_LABEL", "").strip()
    if label:
        label_prefix = _label_prefix(key, label)
    step = StepKey(task, step_name, digest, Names(branch_prefix=branch_prefix, label_prefix=label_prefix))
    if step.key != key:
        raise UsageError(
            f"GITLEDGER_KEY {key!r} does not match GITLEDGER_TASK, _STEP and _DIGEST; run this inside "
            "'gitledger run-step' or pass --task and --step"
        )
    return step


def _label_prefix(key: str, label: str) -> str:
    digest = key.rsplit(".", 1)[1]
    for size in range(len(digest), 0, -1):
        prefix = label[:-size]
        if label.endswith(digest[:size]):
            try:
                if label_for(key, Names(label_prefix=prefix)) == label:
                    return prefix
            except UsageError:
                continue
    raise UsageError(f"GITLEDGER_LABEL {label!r} does not belong to GITLEDGER_KEY {key!r}")


def with_marker(body: str, step: StepKey) -> str:
    """``body`` with the step's hidden marker appended (once), within GitHub's size limit."""
    text = body if step.marker in body else f"{body.rstrip()}\n\n{step.marker}\n".lstrip("\n")
    if len(text) > MAX_BODY:
        raise UsageError(
            f"the body is {len(text)} characters with the gitledger marker; GitHub accepts {MAX_BODY}: "
            "shorten it"
        )
    return text


# -- git ------------------------------------------------------------------------------------------------


def ensure_remote_branch(repo: GitRepo, remote: str, branch: str, redact: Any = None) -> bool:
    """Push HEAD to ``refs/heads/<branch>`` on ``remote`` unless the branch is there; True if pushed.

    A push rejected because the branch appeared meanwhile (another worker) counts as "there": the
    existing branch is used as it is, never overwritten.
    """
    clean = redact or (lambda text: text)
    ref = f"refs/heads/{branch}"
    head = repo.resolve("HEAD")
    if head is None:
        raise UsageError("HEAD has no commit to push; commit the change before opening a pull request")
    listed = repo.run("ls-remote", "--heads", remote, ref, check=False, timeout=GIT_NETWORK_TIMEOUT)
    if listed.returncode != 0:
        raise GitError(clean(f"cannot list branches of remote {remote!r}: {last_line(listed.stderr)}"))
    if any(line.split("\t")[-1] == ref for line in listed.stdout.decode().splitlines()):
        return False
    pushed = repo.run(
        "push", "--porcelain", remote, f"{head}:{ref}", check=False, timeout=GIT_NETWORK_TIMEOUT
    )
    if pushed.returncode == 0:
        return True
    out = pushed.stdout.decode(errors="replace")
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0] == "!" and parts[1].endswith(f":{ref}"):
            reason = parts[2]
            if any(word in reason for word in ("fetch first", "non-fast-forward", "already exists")):
                return False
    raise GitError(clean(f"git push to {remote!r} failed: {last_line(pushed.stderr)}"))


# -- pull requests ----------------------------------------------------------------------------------------


def ensure_label(ctx: GitHubContext, name: str) -> str | None:
    """Make sure label ``name`` exists (1 read, plus 1 write when missing); a warning on failure."""
    import urllib.parse

    url = f"{ctx.repo.url}/labels/{urllib.parse.quote(name, safe='')}"
    try:
        ctx.repo.requester.requestJsonAndCheck("GET", url)
        return None
    except github.UnknownObjectException:
        pass
    except Exception as exc:
        if not _github_failure(exc):
            raise
        return ctx.redact(f"could not look up label {name!r}: {describe(exc)}")
    try:
        ctx.repo.create_label(name, LABEL_COLOR, LABEL_DESCRIPTION)
    except github.GithubException as exc:
        if exc.status == 422:  # already exists (created meanwhile)
            return None
        return ctx.redact(f"could not create label {name!r}: {describe(exc)}")
    except Exception as exc:
        if not _github_failure(exc):
            raise
        return ctx.redact(f"could not create label {name!r}: {describe(exc)}")
    return None


def _github_failure(exc: BaseException) -> bool:
    from urllib3.exceptions import MaxRetryError

    return isinstance(exc, github.GithubException | OSError | MaxRetryError)


def _existing(ctx: GitHubContext, step: StepKey) -> Outcome | None:
    found = ctx.find_pull(step)
    if found is None:
        return None
    return Outcome(EXISTING, found.html_url, found.number, found.via)


def open_pull_request(
    ctx: GitHubContext,
    step: StepKey,
    *,
    title: str,
    body: str,
    base: str | None = None,
    remote: str = "origin",
    git_repo: GitRepo | None = None,
) -> Outcome:
    """Open the pull request of ``step`` once: push its branch, label it, mark its body.

    1. A PR for the key in any state (head branch, label or marker) → ``existing``, nothing written.
    2. Push HEAD to the key's convention branch on ``remote`` unless the branch is there.
    3. Make sure the key's label exists; create the PR (head = the convention branch, body + marker).
    4. A 422 (e.g. "A pull request already exists"), a 5xx, a timeout or a dropped connection on the
       create → query again: found → ``existing``. Absent after a 422 → the error. Absent after an
       unknown outcome → the create is sent once more (never blindly: only after the look, and GitHub
       allows one open PR per head and base, so a late first create turns the second into a 422); a
       second unknown → an error saying that nothing exists and a rerun is safe.
    5. Add the key's label to the new PR (a failure is a warning: head branch and marker still find it).
    """
    if not title.strip():
        raise UsageError("--title must not be empty")
    text = with_marker(body, step)
    found = _existing(ctx, step)
    if found is not None:
        return found
    warnings: list[str] = []
    repo = git_repo or ctx.git_repo
    if repo is None:
        raise UsageError("opening a pull request needs the git repository to push the branch from")
    ensure_remote_branch(repo, remote, step.branch, ctx.redact)
    problem = ensure_label(ctx, step.label)
    if problem:
        warnings.append(problem)
    target = base or ctx.default_branch()
    pr = None
    for attempt in range(1 + CREATE_RETRIES_AFTER_CHECK):
        try:
            pr = ctx.repo.create_pull(base=target, head=step.branch, title=title, body=text)
            break
        except Exception as exc:
            if not _github_failure(exc):
                raise
            definite = isinstance(exc, github.GithubException) and exc.status == 422
            if not definite and not is_unknown_outcome(exc):
                raise ctx.error(exc, "create the pull request") from exc
            again = _existing(ctx, step)
            if again is not None:
                again.warnings[:0] = warnings
                return again
            if definite:
                raise ctx.error(exc, f"create the pull request for {step.key}") from exc
            if attempt == CREATE_RETRIES_AFTER_CHECK:
                raise WriteUnknownError(
                    ctx.redact(
                        f"creating the pull request for {step.key} got no definite answer "
                        f"({describe(exc)}), and no pull request for it exists now; rerun to try again "
                        "(it will look first)"
                    )
                ) from exc
            # Absent after the look: send once more. Should the first create still land late, GitHub
            # refuses the second (one open PR per head and base) with a 422, answered by a look.
            warnings.append(ctx.redact(f"the first create got no definite answer ({describe(exc)})"))
    assert pr is not None
    try:
        pr.add_to_labels(step.label)
    except Exception as exc:
        if not _github_failure(exc):
            raise
        warnings.append(ctx.redact(f"could not add label {step.label!r} to #{pr.number}: {describe(exc)}"))
    return Outcome(CREATED, pr.html_url, pr.number, warnings=warnings)


# -- comments -------------------------------------------------------------------------------------------


def post_comment(ctx: GitHubContext, step: StepKey, number: int, body: str) -> Outcome:
    """Post the comment of ``step`` on issue/PR ``number`` once (the marker identifies it).

    A comment carrying the marker → ``existing``. A 5xx, timeout or dropped connection on the post →
    look again: found → ``existing``; absent → an error saying a rerun is safe.
    """
    if number <= 0:
        raise UsageError(f"issue number must be positive, not {number}")
    text = with_marker(body, step)
    url = ctx.find_comment(number, step.marker)
    if url is not None:
        return Outcome(EXISTING, url, number, "comment")
    try:
        comment = ctx.repo.get_issue(number).create_comment(text)
    except Exception as exc:
        if not _github_failure(exc):
            raise
        if not is_unknown_outcome(exc):
            raise ctx.error(exc, f"comment on #{number}") from exc
        again = ctx.find_comment(number, step.marker)
        if again is not None:
            return Outcome(EXISTING, again, number, "comment")
        raise WriteUnknownError(
            ctx.redact(
                f"commenting on #{number} for {step.key} got no definite answer ({describe(exc)}), and "
                "no such comment exists now; rerun to try again (it will look first)"
            )
        ) from exc
    return Outcome(CREATED, comment.html_url, number)


__all__ = [
    "CREATED",
    "EXISTING",
    "GitHubError",
    "Outcome",
    "ensure_label",
    "ensure_remote_branch",
    "open_pull_request",
    "post_comment",
    "step_from_env",
    "with_marker",
]
