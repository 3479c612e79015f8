"""Commit trailers of pull requests: fetched with git first, the API only as a capped fallback."""

from __future__ import annotations

import base64
import shutil
import tempfile
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitledger.core.errors import GitledgerError, git_message
from gitledger.core.keys import (
    KEY_RE,
    TRAILER_TOKEN,
)
from gitledger.features.audit.evidence import Pull
from gitledger.git.repo import GitRepo
from gitledger.git.trailers import trailer_values

if TYPE_CHECKING:
    from gitledger.github.port import GitHubClient

AUDIT_REF_PREFIX = "refs/gitledger/audit/"
PULL_REFS = AUDIT_REF_PREFIX + "pull/"
HEAD_REFS = AUDIT_REF_PREFIX + "heads/"
MAX_PR_COMMITS = 250  # GitHub lists at most 250 commits of a PR; the git walk keeps the same bound
GIT_NETWORK_TIMEOUT = 600.0


# -- trailers: git first, the API only as a capped fallback -------------------------------------------------


@dataclass
class TrailerScan:
    """Trailer keys per PR number, and how they were read."""

    via: str  # git, api or none
    keys: dict[int, set[str]] = field(default_factory=dict)
    scanned: int = 0
    skipped: int = 0
    git_processes: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "via": self.via,
            "scanned": self.scanned,
            "skipped": self.skipped,
            "git_processes": self.git_processes,
        }


class FetchError(GitledgerError):
    """git could not fetch the pull request heads."""


def auth_env(url: str, token: str, web_url: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Environment that gives git the token for ``url`` as an HTTP header, never on the command line.

    Only for an https URL on the repository's own web host (github.com or the Enterprise host), in the
    form actions/checkout uses (``AUTHORIZATION: basic base64(x-access-token:TOKEN)``).
    """
    parsed = urllib.parse.urlsplit(url)
    web = urllib.parse.urlsplit(web_url)
    if parsed.scheme != "https" or parsed.hostname is None or parsed.hostname != web.hostname:
        return {}
    credentials = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    count = environ.get("GIT_CONFIG_COUNT", "").strip()
    index = int(count) if count.isdigit() else 0
    return {
        "GIT_CONFIG_COUNT": str(index + 1),
        f"GIT_CONFIG_KEY_{index}": f"http.https://{parsed.netloc}/.extraheader",
        f"GIT_CONFIG_VALUE_{index}": f"AUTHORIZATION: basic {credentials}",
    }


@dataclass
class ScanRepo:
    """Where the PR heads are fetched: the user's repository, or a throw-away partial clone."""

    repo: GitRepo
    source: str  # a URL, or the name of a remote configured in ``repo``
    env: dict[str, str]
    temporary: Path | None = None  # the folder of a throw-away clone (deleted by close)
    processes: int = 0

    def git(
        self, *args: str, input: bytes | None = None, timeout: float | None = None
    ) -> tuple[int, bytes, bytes]:
        self.processes += 1
        proc = self.repo.run(*args, input=input, check=False, timeout=timeout, env=self.env)
        return proc.returncode, proc.stdout, proc.stderr

    def close(self) -> None:
        if self.temporary is not None:
            self.repo.close()
            shutil.rmtree(self.temporary, ignore_errors=True)


def can_take_refs(repo: GitRepo) -> bool:
    """Can the PR heads be fetched into the user's repository? Not into a shallow one."""
    return repo.out("rev-parse", "--is-shallow-repository", check=False) == "false"


def temporary_scan_repo(url: str, extra_env: dict[str, str]) -> ScanRepo:
    """A throw-away bare partial clone that fetches commits only (``--filter=tree:0``).

    Only commits are needed to read trailers, so this costs little even for a large repository. The
    token header (``extra_env``) is used only here: the user's own repository has its credentials, and
    a second Authorization header would make GitHub refuse the fetch.
    """
    folder = Path(tempfile.mkdtemp(prefix="gitledger-audit-"))
    try:
        bare = folder / "scan.git"
        repo = GitRepo.init_bare(bare)
        for setting in (
            ("core.repositoryformatversion", "1"),
            ("remote.gitledger-audit.url", url),
            ("remote.gitledger-audit.promisor", "true"),
            ("remote.gitledger-audit.partialclonefilter", "tree:0"),
            ("extensions.partialClone", "gitledger-audit"),
            ("gc.auto", "0"),
        ):
            repo.run("config", *setting)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return ScanRepo(repo, "gitledger-audit", extra_env, temporary=folder)


def fetch_and_read(scan: ScanRepo, pulls: Sequence[Pull], redact: Callable[[str], str]) -> TrailerScan:
    fetch_heads(scan, pulls, redact)
    keys, scanned = read_trailers_git(scan, pulls)
    return TrailerScan(
        "git", keys, scanned=scanned, skipped=len(pulls) - scanned, git_processes=scan.processes
    )


def fetch_heads(scan: ScanRepo, pulls: Sequence[Pull], redact: Callable[[str], str]) -> None:
    """Fetch every PR head and branch tip, then any base commit still missing (best effort)."""
    refspecs = [f"+refs/pull/*/head:{PULL_REFS}*", f"+refs/heads/*:{HEAD_REFS}*"]
    filt = ["--filter=tree:0"] if scan.temporary is not None else []
    code, _, err = scan.git(
        "fetch", "--quiet", "--no-tags", "--prune", *filt, scan.source, *refspecs, timeout=GIT_NETWORK_TIMEOUT
    )
    if code != 0:
        raise FetchError(redact(f"git fetch of the pull request heads failed: {git_message(err)}"))
    bases = sorted({p.base_sha for p in pulls if p.base_sha})
    missing = [sha for sha, present in _present(scan, bases).items() if not present]
    if missing:
        wants = "".join(f"{sha}\n" for sha in missing).encode()
        fetch = ("fetch", "--quiet", "--no-tags", *filt, "--stdin", scan.source)
        scan.git(*fetch, input=wants, timeout=GIT_NETWORK_TIMEOUT)  # unreachable ones just stay missing


def _present(scan: ScanRepo, oids: Sequence[str]) -> dict[str, bool]:
    if not oids:
        return {}
    _, out, _ = scan.git(
        "cat-file", "--batch-check=%(objectname) %(objecttype)", input="\n".join(oids).encode() + b"\n"
    )
    result = dict.fromkeys(oids, False)
    for line in out.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == "commit":
            result[parts[0]] = True
    return result


_TRAILER_FORMAT = f"%(trailers:key={TRAILER_TOKEN},valueonly,unfold,separator=%x01)"


def _keys_of(values: str) -> set[str]:
    return {v.strip() for v in values.split("\x01") if KEY_RE.match(v.strip())}


def read_trailers_git(scan: ScanRepo, pulls: Sequence[Pull]) -> tuple[dict[int, set[str]], int]:
    """Trailer keys of every PR's commits (``base..head``, at most 250 each), from the fetched refs,
    and the number of PRs whose head was there to read.

    One ``git for-each-ref`` reads each head commit; one ``git log`` per distinct base reads the rest.
    Commits reachable from the PR's base are not the PR's (they are on the branch it targets). When the
    base commit is unknown, the current tip of the base branch stands in for it.
    """
    code, out, err = scan.git(
        "for-each-ref", f"--format=%(refname)%00%(objectname)%00{_TRAILER_FORMAT}", PULL_REFS
    )
    if code != 0:
        raise FetchError(f"git for-each-ref failed: {git_message(err)}")
    heads: dict[int, str] = {}
    keys: dict[int, set[str]] = defaultdict(set)
    for line in out.decode(errors="replace").splitlines():
        name, _, rest = line.partition("\0")
        oid, _, values = rest.partition("\0")
        number = name.removeprefix(PULL_REFS).removesuffix("/head")
        if number.isdigit():
            heads[int(number)] = oid
            keys[int(number)] |= _keys_of(values)
    wanted = [p for p in pulls if p.number in heads]
    present = _present(scan, sorted({p.base_sha for p in wanted if p.base_sha}))
    tips_out = scan.git("for-each-ref", "--format=%(refname)%00%(objectname)", HEAD_REFS)[1]
    tips = {
        name.removeprefix(HEAD_REFS): oid
        for name, _, oid in (line.partition("\0") for line in tips_out.decode(errors="replace").splitlines())
    }
    by_base: dict[str, list[Pull]] = defaultdict(list)
    for pull in wanted:
        base = pull.base_sha if present.get(pull.base_sha) else tips.get(pull.base_ref)
        if base:
            by_base[base].append(pull)
    for base, members in sorted(by_base.items()):
        revs = "".join(f"{heads[p.number]}\n" for p in members) + f"^{base}\n"
        code, out, err = scan.git(
            "log",
            "--stdin",
            "--no-show-signature",
            f"--format=%x1e%H%x1f%P%x1f{_TRAILER_FORMAT}",
            input=revs.encode(),
        )
        if code != 0:
            raise FetchError(f"git log failed: {git_message(err)}")
        commits: dict[str, tuple[list[str], set[str]]] = {}
        for record in out.decode(errors="replace").split("\x1e"):
            parts = record.strip("\n").split("\x1f")
            if len(parts) == 3:
                commits[parts[0]] = (parts[1].split(), _keys_of(parts[2]))
        for pull in members:
            keys[pull.number] |= _walk(heads[pull.number], commits)
    return dict(keys), len(wanted)


def _walk(head: str, commits: Mapping[str, tuple[list[str], set[str]]]) -> set[str]:
    """Trailer keys of the commits reachable from ``head`` inside ``commits`` (at most 250 commits)."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = [head]
    while todo and len(seen) < MAX_PR_COMMITS:
        oid = todo.pop()
        if oid in seen or oid not in commits:
            continue
        seen.add(oid)
        parents, keys = commits[oid]
        found |= keys
        todo.extend(parents)
    return found


def read_trailers_api(ctx: GitHubClient, pulls: Sequence[Pull], limit: int) -> TrailerScan:
    """The fallback: list the commits of at most ``limit`` PRs through the API (open ones first)."""
    order = sorted(pulls, key=lambda p: (p.state != "open", -p.number))
    scan = TrailerScan("api")
    owners: list[int] = []  # the PR of each message
    messages: list[str] = []
    for pull in order[:limit]:
        for message in ctx.pull_commit_messages(pull.number):
            owners.append(pull.number)
            messages.append(message)
        scan.scanned += 1
    # the trailers as git reads them, all messages in one git process
    for number, values in zip(owners, trailer_values(messages, TRAILER_TOKEN), strict=True):
        keys = {v for v in values if KEY_RE.match(v)}
        if keys:
            scan.keys.setdefault(number, set()).update(keys)
    scan.skipped = max(0, len(order) - limit)
    if scan.skipped:
        scan.warnings.append(
            f"git could not fetch the pull requests, so commit trailers of only {scan.scanned} of "
            f"{len(order)} pull requests were read through the API (--commit-api-limit {limit}); run "
            "the audit where git can fetch the repository to read them all"
        )
    return scan
