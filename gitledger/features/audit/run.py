"""Duplicate-PR audit: which pull requests of a GitHub repository belong to one intent (one key)?

An agent that crashed after opening a pull request and was restarted without gitledger (or with a lost
ledger) opens a second one for the same intent. The audit finds them afterwards, from the evidence the
pull requests themselves carry, and reads the ledger to report what is stuck or suspicious
(docs/audit.md is the user's guide):

Evidence (each names a key, or part of one)
    ``label``    the key's label, ``<label prefix><digest hex>`` (the shape of :func:`keys.label_for`)
    ``marker``   ``<!-- gitledger:KEY -->`` in the PR body
    ``trailer``  ``Gitledger-Key: KEY`` in one of the PR's commits
    ``branch``   a head ref in the key's convention-branch family: ``<branch prefix><task>/<step>-<12 hex>``,
                 exactly (:func:`keys.branch_for`) or followed by a suffix such as ``-2`` or ``/retry``

Grouping
    Every piece of evidence is an *identity*: a digest prefix (12 to 24 hex digits) and, when it says so,
    the task and step slugs. Two identities are compatible when the shorter digest is a prefix of the
    longer and the slugs agree where both are known; compatible identities are joined (union-find), and
    a group is the set of PRs whose evidence falls in one joined set. A group whose identities are not
    all pairwise compatible (two different keys that share twelve digits, which only a forger arranges)
    is reported ``ambiguous`` and never closed automatically. PRs are not joined *through* a PR: a PR
    that carries evidence of two keys belongs to two groups.

Cost
    PRs come from the pulls list endpoint in all states (``per_page=100``: 10 calls for 1 000 PRs), which
    carries labels, body and head ref. Trailers are read with git, not the API: the PR heads are fetched
    from ``refs/pull/*/head`` (GitHub keeps one per PR) into ``refs/gitledger/audit/pull/*`` and every
    trailer is read by one ``git for-each-ref`` plus one ``git log`` per distinct base commit. Only when
    git cannot fetch are the PRs' commits listed through the API, one call per PR, capped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitledger.core.errors import GitledgerError, UsageError
from gitledger.core.keys import (
    Names,
)
from gitledger.features.audit.close import close_duplicates
from gitledger.features.audit.evidence import Group, Pull, group_pulls, match_ledger, pull_evidence
from gitledger.features.audit.ledger_view import LedgerView, missing_refs, read_ledger, stuck_entries
from gitledger.features.audit.trailers import (
    ScanRepo,
    TrailerScan,
    auth_env,
    can_take_refs,
    fetch_and_read,
    read_trailers_api,
    temporary_scan_repo,
)
from gitledger.git.repo import GitRepo
from gitledger.session import Session

if TYPE_CHECKING:
    from gitledger.github.port import GitHubClient

DEFAULT_COMMIT_API_LIMIT = 50
TRAILER_SOURCES = ("auto", "git", "api", "none")


# -- the whole audit --------------------------------------------------------------------------------------


@dataclass
class AuditOptions:
    github_repo: str | None = None
    repo_path: Path | None = None
    close: bool = False
    trailers: str = "auto"
    commit_api_limit: int = DEFAULT_COMMIT_API_LIMIT
    env: Mapping[str, str] | None = None
    # told each phase as it starts, with a count where there is one ("listing pull requests", 300)
    progress: Callable[[str, int | None], None] | None = None


@dataclass
class AuditReport:
    repository: str
    pulls: list[Pull]
    groups: list[Group]
    trailer_scan: TrailerScan
    api_calls: dict[str, Any]
    seconds: float
    ledger: LedgerView | None = None
    stuck: list[dict[str, Any]] | None = None
    unclaimed: list[Group] | None = None
    missing_refs: list[dict[str, Any]] | None = None
    closed: list[dict[str, Any]] | None = None
    warnings: list[str] = field(default_factory=list)
    redact: Callable[[str], str] = field(default=lambda text: text, repr=False)

    @property
    def duplicates(self) -> list[Group]:
        return [g for g in self.groups if len(g.pulls) > 1]

    @property
    def close_errors(self) -> list[dict[str, Any]]:
        return [r for r in self.closed or [] if r.get("result") == "error"]

    def to_json(self) -> dict[str, Any]:
        ledger_duplicates = None
        if self.ledger is not None:
            ledger_duplicates = [
                {"key": e.key, "created": e.folded.created} for e in self.ledger.entries if e.folded.duplicate
            ]
        return {
            "repository": self.repository,
            "pulls": len(self.pulls),
            "keyed_pulls": len({p.number for g in self.groups for p in g.pulls}),
            "groups": len(self.groups),
            "duplicates": [g.to_json() for g in self.duplicates],
            "stuck": self.stuck,
            "unclaimed": (
                None
                if self.unclaimed is None
                else [
                    {**{k: v for k, v in g.to_json().items() if k != "keep" and k != "ambiguous"}}
                    for g in self.unclaimed
                ]
            ),
            "missing_refs": self.missing_refs,
            "ledger_duplicates": ledger_duplicates,
            "closed": self.closed,
            "trailers": self.trailer_scan.to_json(),
            "api_calls": self.api_calls["total"],
            "api_calls_detail": self.api_calls,
            "seconds": round(self.seconds, 3),
            "warnings": self.warnings,
        }


def _origin_names(repo: GitRepo | None, full_name: str) -> str | None:
    """A remote URL of ``repo`` that names ``full_name`` (so its credentials and config apply)."""
    from gitledger.core.remotes import parse_remote_url

    if repo is None:
        return None
    listed = repo.out("config", "--get-regexp", r"^remote\..*\.url$", check=False)
    for line in listed.splitlines():
        _, _, url = line.partition(" ")
        parsed = parse_remote_url(url)
        if parsed and parsed.lower() == full_name.lower():
            return url.strip()
    return None


def list_pulls(client: GitHubClient, progress: Callable[[str, int | None], None] | None = None) -> list[Pull]:
    """Every PR of the repository in all states, oldest first (1 call per 100 PRs)."""
    tell = progress or (lambda phase, done: None)
    pulls: list[Pull] = []
    for info in client.iter_pulls(state="all", newest_first=False):
        tell("listing pull requests", len(pulls))
        pulls.append(
            Pull(
                number=info.number,
                url=info.html_url,
                state=info.status,
                title=info.title,
                body=info.body,
                head_ref=info.head_ref,
                base_ref=info.base_ref,
                head_sha=info.head_sha,
                base_sha=info.base_sha,
                labels=info.labels,
                created_at=info.created_at,
            )
        )
    return pulls


def scan_trailers(
    ctx: GitHubClient, pulls: Sequence[Pull], ledger_repo: GitRepo | None, options: AuditOptions
) -> TrailerScan:
    if options.trailers == "none" or not pulls:
        return TrailerScan("none")
    problems: list[str] = []
    if options.trailers in ("auto", "git"):
        environ = os.environ if options.env is None else options.env
        try:
            url = _origin_names(ledger_repo, ctx.full_name) or ctx.clone_url()
            extra = auth_env(url, ctx.token, ctx.web_url(), environ)
            # The user's repository first (its credentials, and later audits fetch only what is new),
            # then a throw-away clone with the token (when there is a token to offer, or no choice).
            places: list[Callable[[], ScanRepo]] = []
            if ledger_repo is not None and can_take_refs(ledger_repo):
                places.append(lambda: ScanRepo(ledger_repo, url, {}))
            if not places or extra:
                places.append(lambda: temporary_scan_repo(url, extra))
        except (GitledgerError, OSError) as exc:
            problems.append(ctx.redact(str(exc)))
            places = []
        for place in places:
            scan_repo = None
            try:
                scan_repo = place()
                return fetch_and_read(scan_repo, pulls, ctx.redact)
            except (GitledgerError, OSError) as exc:
                problems.append(ctx.redact(str(exc)))
            finally:
                if scan_repo is not None:
                    scan_repo.close()
        if options.trailers == "git":
            raise GitledgerError(f"cannot read commit trailers with git: {'; '.join(problems)}")
    result = read_trailers_api(ctx, pulls, options.commit_api_limit)
    if problems:
        result.warnings.insert(0, f"reading trailers with git failed ({'; '.join(problems)}); used the API")
    return result


def run_audit(options: AuditOptions, session: Session | None = None) -> AuditReport:
    """Scan the repository's PRs, group them by key, read the ledger, and close duplicates if asked.

    ``session`` (default: the one of ``options.repo_path``, or none outside a repository) is closed
    when the audit ends.
    """

    if options.trailers not in TRAILER_SOURCES:
        raise UsageError(f"--trailers must be one of {', '.join(TRAILER_SOURCES)}, not {options.trailers!r}")
    if options.commit_api_limit < 0:
        raise UsageError("--commit-api-limit must be 0 or more")
    started = time.monotonic()
    environ = os.environ if options.env is None else options.env
    if session is None:
        session = Session.discover(options.repo_path, options.github_repo, environ)
    try:
        git_repo = session.repo
        if (
            session.github_repo is None
            and session.config.github_repo is None
            and _origin_repo(git_repo) is None
        ):
            session.github_repo = environ.get("GITHUB_REPOSITORY") or None  # the GitHub Actions convention
        ctx = session.github()
        report = _audit(ctx, git_repo, session.config.names, options)
        report.api_calls = ctx.calls.as_dict()
        report.redact = ctx.redact
    finally:
        session.close()
    report.seconds = time.monotonic() - started
    return report


def _origin_repo(repo: GitRepo | None) -> str | None:
    from gitledger.core.remotes import parse_remote_url

    if repo is None:
        return None
    url = repo.remote_url("origin")
    return parse_remote_url(url) if url else None


def _audit(ctx: GitHubClient, git_repo: GitRepo | None, names: Names, options: AuditOptions) -> AuditReport:
    tell = options.progress or (lambda phase, done: None)
    tell("listing pull requests", None)
    pulls = list_pulls(ctx, options.progress)
    warnings: list[str] = []
    ledger = None
    if git_repo is not None:
        tell("reading the ledger", None)
        try:
            ledger = read_ledger(git_repo)
        except GitledgerError as exc:
            warnings.append(
                f"the ledger could not be read ({exc.message}); stuck, unclaimed and missing refs are "
                "not reported"
            )
    tell("reading commit trailers", None)
    trailer_scan = scan_trailers(ctx, pulls, git_repo, options)
    warnings.extend(trailer_scan.warnings)
    evidence = {}
    for pull in pulls:
        found = pull_evidence(pull, trailer_scan.keys.get(pull.number, ()), names)
        if found:
            evidence[pull.number] = found
    groups = group_pulls(pulls, evidence)
    report = AuditReport(
        ctx.full_name, pulls, groups, trailer_scan, {}, 0.0, ledger=ledger, warnings=warnings
    )
    if ledger is not None and git_repo is not None:
        from gitledger.core.protocol import StepRunner
        from gitledger.git.store import GitStore

        report.stuck = stuck_entries(ledger, StepRunner(GitStore(git_repo)).held)
        match_ledger(groups, ledger.keys)
        report.unclaimed = [g for g in groups if not g.ledger_keys]
        report.missing_refs = missing_refs(
            ledger, {p.number for p in pulls}, ctx.web_url(), ctx.api_url, ctx.full_name
        )
    if options.close:
        tell("closing duplicates", None)
        report.closed = close_duplicates(ctx, report.duplicates)
    return report
