"""The JSON shapes of the fake GitHub's answers, and pagination (a mixin of :class:`FakeGitHub`)."""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Callable
from typing import Any

from testing.fakegithub.state import (
    DEFAULT_PER_PAGE,
    JSON,
    MAX_PER_PAGE,
    MAX_PR_COMMITS,
    RATE_LIMIT,
    _Comment,
    _Commit,
    _git_proc,
    _int,
    _iso,
    _Issue,
    _Label,
    _node_id,
    _Pull,
    _q,
    _Ref,
    _Repo,
    _Request,
    _Response,
)


class Render:
    """JSON shapes and pagination, as GitHub renders them."""

    # ---- internals: JSON shapes -----------------------------------------------------------------------

    def _api_base(self, repo: _Repo) -> str:
        return f"{self.url}/repos/{repo.full_name}"

    def _user_json(self, login: str) -> JSON:
        u = f"{self.url}/users/{login}"
        owner_is_org = login != self.login and any(r.owner == login for r in self._repos.values())
        return {
            "login": login,
            "id": self._user_id(login),
            "node_id": _node_id("U", self._user_id(login)),
            "avatar_url": f"{self.url}/avatars/{login}",
            "gravatar_id": "",
            "url": u,
            "html_url": f"{self.url}/{login}",
            "followers_url": f"{u}/followers",
            "following_url": f"{u}/following{{/other_user}}",
            "gists_url": f"{u}/gists{{/gist_id}}",
            "starred_url": f"{u}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{u}/subscriptions",
            "organizations_url": f"{u}/orgs",
            "repos_url": f"{u}/repos",
            "events_url": f"{u}/events{{/privacy}}",
            "received_events_url": f"{u}/received_events",
            "type": "Organization" if owner_is_org else "User",
            "user_view_type": "public",
            "site_admin": False,
        }

    def _repo_json(self, repo: _Repo, req: _Request | None = None) -> JSON:
        data: JSON = self._memo(req, ("repo", repo.full_name), lambda: self._build_repo_json(repo))
        return data

    def _build_repo_json(self, repo: _Repo) -> JSON:
        base = self._api_base(repo)
        open_issues = sum(i.state == "open" for i in repo.issues.values())
        return {
            "id": repo.id,
            "node_id": _node_id("R", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": True,
            "owner": self._user_json(repo.owner),
            "html_url": f"{self.url}/{repo.full_name}",
            "description": None,
            "fork": False,
            "url": base,
            "branches_url": f"{base}/branches{{/branch}}",
            "comments_url": f"{base}/comments{{/number}}",
            "commits_url": f"{base}/commits{{/sha}}",
            "git_commits_url": f"{base}/git/commits{{/sha}}",
            "git_refs_url": f"{base}/git/refs{{/sha}}",
            "issue_comment_url": f"{base}/issues/comments{{/number}}",
            "issues_url": f"{base}/issues{{/number}}",
            "labels_url": f"{base}/labels{{/name}}",
            "pulls_url": f"{base}/pulls{{/number}}",
            "created_at": _iso(repo.created_at),
            "updated_at": _iso(repo.created_at),
            "pushed_at": _iso(repo.created_at),
            "git_url": repo.bare.as_uri(),
            "ssh_url": repo.bare.as_uri(),
            "clone_url": repo.bare.as_uri(),
            "homepage": None,
            "size": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": None,
            "has_issues": True,
            "has_projects": False,
            "has_downloads": False,
            "has_wiki": False,
            "has_pages": False,
            "has_discussions": False,
            "forks_count": 0,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_issues,
            "license": None,
            "allow_forking": True,
            "is_template": False,
            "topics": [],
            "visibility": "private",
            "forks": 0,
            "open_issues": open_issues,
            "watchers": 0,
            "default_branch": repo.default_branch,
            "permissions": {"admin": True, "maintain": True, "push": True, "triage": True, "pull": True},
            "allow_squash_merge": True,
            "allow_merge_commit": True,
            "allow_rebase_merge": True,
            "allow_auto_merge": False,
            "delete_branch_on_merge": False,
        }

    def _label_json(self, repo: _Repo, label: _Label) -> JSON:
        return {
            "id": label.id,
            "node_id": _node_id("LA", label.id),
            "url": f"{self._api_base(repo)}/labels/{_q(label.name)}",
            "name": label.name,
            "color": label.color,
            "default": False,
            "description": label.description,
        }

    def _issue_labels(self, repo: _Repo, issue: _Issue) -> list[JSON]:
        return [self._label_json(repo, repo.labels[k]) for k in issue.labels if k in repo.labels]

    def _comment_count(self, repo: _Repo, number: int, req: _Request | None = None) -> int:
        def count_all() -> dict[int, int]:
            counts: dict[int, int] = {}
            for c in repo.comments.values():
                counts[c.number] = counts.get(c.number, 0) + 1
            return counts

        counts: dict[int, int] = self._memo(req, ("comment_counts", repo.full_name), count_all)
        return counts.get(number, 0)

    def _html_issue(self, repo: _Repo, issue: _Issue) -> str:
        kind = "pull" if issue.pull is not None else "issues"
        return f"{self.url}/{repo.full_name}/{kind}/{issue.number}"

    def _issue_json(self, req: _Request, repo: _Repo, issue: _Issue) -> JSON:
        base = self._api_base(repo)
        url = f"{base}/issues/{issue.number}"
        html = self._html_issue(repo, issue)
        data: JSON = {
            "url": url,
            "repository_url": base,
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": html,
            "id": issue.id,
            "node_id": _node_id("PR" if issue.pull else "I", issue.id),
            "number": issue.number,
            "title": issue.title,
            "user": self._user_json(issue.user),
            "labels": self._issue_labels(repo, issue),
            "state": issue.state,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": self._comment_count(repo, issue.number, req),
            "created_at": _iso(issue.created_at),
            "updated_at": _iso(issue.updated_at),
            "closed_at": _iso(issue.closed_at),
            "author_association": "OWNER",
            "active_lock_reason": None,
            "body": issue.body,
            "closed_by": None,
            "timeline_url": f"{url}/timeline",
            "performed_via_github_app": None,
            "state_reason": issue.state_reason,
        }
        if issue.pull is not None:
            self._refresh_pull(req, repo, issue)
            data["draft"] = issue.pull.draft
            data["pull_request"] = {
                "url": f"{base}/pulls/{issue.number}",
                "html_url": html,
                "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": _iso(issue.pull.merged_at),
            }
        return data

    def _pull_part(self, req: _Request, repo: _Repo, ref: str, sha: str) -> JSON:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self._user_json(repo.owner),
            "repo": self._repo_json(repo, req),
        }

    def _pull_json(self, req: _Request, repo: _Repo, issue: _Issue, *, full: bool) -> JSON:
        pull = issue.pull
        assert pull is not None
        self._refresh_pull(req, repo, issue)
        base = self._api_base(repo)
        url = f"{base}/pulls/{issue.number}"
        issue_url = f"{base}/issues/{issue.number}"
        html = self._html_issue(repo, issue)
        data: JSON = {
            "url": url,
            "id": pull.id,
            "node_id": _node_id("PR", pull.id),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": issue_url,
            "commits_url": f"{url}/commits",
            "review_comments_url": f"{url}/comments",
            "review_comment_url": f"{base}/pulls/comments{{/number}}",
            "comments_url": f"{issue_url}/comments",
            "statuses_url": f"{base}/statuses/{pull.head_sha}",
            "number": issue.number,
            "state": issue.state,
            "locked": False,
            "title": issue.title,
            "user": self._user_json(issue.user),
            "body": issue.body,
            "labels": self._issue_labels(repo, issue),
            "milestone": None,
            "active_lock_reason": None,
            "created_at": _iso(issue.created_at),
            "updated_at": _iso(issue.updated_at),
            "closed_at": _iso(issue.closed_at),
            "merged_at": _iso(pull.merged_at),
            "merge_commit_sha": pull.merge_commit_sha,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self._pull_part(req, repo, pull.head_ref, pull.head_sha),
            "base": self._pull_part(req, repo, pull.base_ref, pull.base_sha),
            "_links": {
                "self": {"href": url},
                "html": {"href": html},
                "issue": {"href": issue_url},
                "comments": {"href": f"{issue_url}/comments"},
                "review_comments": {"href": f"{url}/comments"},
                "review_comment": {"href": f"{base}/pulls/comments{{/number}}"},
                "commits": {"href": f"{url}/commits"},
                "statuses": {"href": f"{base}/statuses/{pull.head_sha}"},
            },
            "author_association": "OWNER",
            "auto_merge": None,
            "draft": pull.draft,
        }
        if full:
            is_open = issue.state == "open"
            commits, additions, deletions, changed = self._diff_stats(repo, pull)
            data.update(
                {
                    "merged": pull.merged,
                    "mergeable": True if is_open else None,
                    "rebaseable": True if is_open else None,
                    "mergeable_state": ("draft" if pull.draft else "clean") if is_open else "unknown",
                    "merged_by": self._user_json(self.login) if pull.merged else None,
                    "comments": self._comment_count(repo, issue.number, req),
                    "review_comments": 0,
                    "maintainer_can_modify": pull.maintainer_can_modify,
                    "commits": commits,
                    "additions": additions,
                    "deletions": deletions,
                    "changed_files": changed,
                }
            )
        return data

    def _diff_stats(self, repo: _Repo, pull: _Pull) -> tuple[int, int, int, int]:
        count = _git_proc(repo.bare, "rev-list", "--count", f"{pull.base_sha}..{pull.head_sha}")
        numstat = _git_proc(repo.bare, "diff", "--numstat", f"{pull.base_sha}...{pull.head_sha}")
        additions = deletions = changed = 0
        for line in numstat.stdout.splitlines():
            add, delete, _ = line.split("\t", 2)
            changed += 1
            additions += int(add) if add.isdigit() else 0
            deletions += int(delete) if delete.isdigit() else 0
        commits = int(count.stdout.strip() or 0) if count.returncode == 0 else 0
        return min(commits, MAX_PR_COMMITS), additions, deletions, changed

    def _git_commit_json(self, repo: _Repo, c: _Commit) -> JSON:
        base = self._api_base(repo)
        return {
            "sha": c.sha,
            "node_id": _node_id("C", int(c.sha[:8], 16)),
            "url": f"{base}/git/commits/{c.sha}",
            "html_url": f"{self.url}/{repo.full_name}/commit/{c.sha}",
            "author": {"name": c.author_name, "email": c.author_email, "date": _iso(c.author_time)},
            "committer": {
                "name": c.committer_name,
                "email": c.committer_email,
                "date": _iso(c.committer_time),
            },
            "tree": {"sha": c.tree, "url": f"{base}/git/trees/{c.tree}"},
            "message": c.message,
            "parents": [
                {
                    "sha": p,
                    "url": f"{base}/git/commits/{p}",
                    "html_url": f"{self.url}/{repo.full_name}/commit/{p}",
                }
                for p in c.parents
            ],
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
                "verified_at": None,
            },
        }

    def _commit_json(self, repo: _Repo, c: _Commit) -> JSON:
        base = self._api_base(repo)
        git_commit = self._git_commit_json(repo, c)
        inner = {k: git_commit[k] for k in ("author", "committer", "message", "tree", "url", "verification")}
        inner["comment_count"] = 0
        return {
            "sha": c.sha,
            "node_id": git_commit["node_id"],
            "commit": inner,
            "url": f"{base}/commits/{c.sha}",
            "html_url": git_commit["html_url"],
            "comments_url": f"{base}/commits/{c.sha}/comments",
            "author": None,
            "committer": None,
            "parents": [
                {
                    "sha": p,
                    "url": f"{base}/commits/{p}",
                    "html_url": f"{self.url}/{repo.full_name}/commit/{p}",
                }
                for p in c.parents
            ],
        }

    def _comment_json(self, repo: _Repo, c: _Comment) -> JSON:
        base = self._api_base(repo)
        issue = repo.issues.get(c.number)
        html = self._html_issue(repo, issue) if issue is not None else f"{self.url}/{repo.full_name}"
        return {
            "url": f"{base}/issues/comments/{c.id}",
            "html_url": f"{html}#issuecomment-{c.id}",
            "issue_url": f"{base}/issues/{c.number}",
            "id": c.id,
            "node_id": _node_id("IC", c.id),
            "user": self._user_json(c.user),
            "created_at": _iso(c.created_at),
            "updated_at": _iso(c.updated_at),
            "author_association": "OWNER",
            "body": c.body,
            "performed_via_github_app": None,
        }

    def _ref_json(self, repo: _Repo, ref: _Ref) -> JSON:
        base = self._api_base(repo)
        short = ref.name.removeprefix("refs/")
        kind = "commits" if ref.type == "commit" else f"{ref.type}s"
        return {
            "ref": ref.name,
            "node_id": _node_id("REF", int(hashlib.sha1(ref.name.encode()).hexdigest()[:8], 16)),
            "url": f"{base}/git/refs/{_q(short, safe='/')}",
            "object": {"sha": ref.sha, "type": ref.type, "url": f"{base}/git/{kind}/{ref.sha}"},
        }

    def _rate(self) -> JSON:
        now = int(self._clock())
        if now >= self._rate_reset:
            self._rate_used, self._rate_reset = 0, now + 3600
        return {
            "limit": RATE_LIMIT,
            "used": self._rate_used,
            "remaining": max(RATE_LIMIT - self._rate_used, 0),
            "reset": self._rate_reset,
            "resource": "core",
        }

    # ---- internals: pagination ------------------------------------------------------------------------

    def _paginate(self, req: _Request, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        per_page = _int(req.query.get("per_page"), DEFAULT_PER_PAGE)
        per_page = DEFAULT_PER_PAGE if per_page < 1 else min(per_page, MAX_PER_PAGE)
        page = max(_int(req.query.get("page"), 1), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page : page * per_page]

        def link(p: int) -> str:
            pairs = [(k, v) for k, v in req.query_pairs if k != "page"] + [("page", str(p))]
            return f"<{self.url}{req.raw_path}?{urllib.parse.urlencode(pairs)}>"

        links = []
        if page > 1:
            links.append(f'{link(min(page - 1, last))}; rel="prev"')
        if page < last:
            links += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            links.append(f'{link(1)}; rel="first"')
        return chunk, ({"Link": ", ".join(links)} if links else {})

    def _page(self, req: _Request, items: list[Any], render: Callable[[Any], JSON]) -> _Response:
        chunk, headers = self._paginate(req, items)
        return _Response(200, [render(x) for x in chunk], headers)
