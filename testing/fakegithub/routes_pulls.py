"""Routes: pull requests (list, create with GitHub's uniqueness rule, update, commits, merged) (a mixin)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from testing.fakegithub.state import (
    DOCS,
    JSON,
    MAX_PR_COMMITS,
    _body_object,
    _git_proc,
    _invalid,
    _Issue,
    _not_found,
    _Pull,
    _Repo,
    _Request,
    _Response,
)


class PullRoutes:
    """Pull request endpoints."""

    def _pull_issue(self, repo: _Repo, n: str) -> _Issue:
        issue = repo.issues.get(int(n))
        if issue is None or issue.pull is None:
            raise _not_found()
        return issue

    def _list_pulls(self, req: _Request, repo: _Repo) -> _Response:
        state = req.query.get("state", "open") or "open"
        if state not in ("open", "closed", "all"):
            raise _invalid("PullRequest", {"field": "state", "code": "invalid"})
        items = [i for i in repo.issues.values() if i.pull is not None and state in ("all", i.state)]
        head = req.query.get("head", "")
        if ":" in head:  # GitHub ignores a head filter that lacks the owner: prefix
            owner, _, branch = head.partition(":")
            items = [
                i
                for i in items
                if owner.lower() == repo.owner.lower()
                and (not branch or (i.pull is not None and i.pull.head_ref == branch))
            ]
        if req.query.get("base"):
            items = [i for i in items if i.pull and i.pull.base_ref == req.query["base"]]
        sort = req.query.get("sort", "created") or "created"
        default_direction = "desc" if sort == "created" else "asc"
        descending = (req.query.get("direction") or default_direction) == "desc"
        keys: dict[str, Callable[[_Issue], tuple[float, int]]] = {
            "created": lambda i: (i.created_at, i.number),
            "updated": lambda i: (i.updated_at, i.number),
            "popularity": lambda i: (self._comment_count(repo, i.number, req), i.number),
            "long-running": lambda i: (-i.created_at, -i.number),
        }
        if sort not in keys:
            raise _invalid("PullRequest", {"field": "sort", "code": "invalid"})
        items.sort(key=keys[sort], reverse=descending)
        return self._page(req, items, lambda i: self._pull_json(req, repo, i, full=False))

    def _create_pull(self, req: _Request, repo: _Repo) -> _Response:
        doc = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
        body = _body_object(req)
        for required in ("head", "base"):
            if not isinstance(body.get(required), str) or not body[required]:
                raise _invalid("PullRequest", {"field": required, "code": "missing_field"}, doc=doc)
        if "issue" in body:
            raise _invalid(
                "PullRequest",
                {"code": "custom", "message": "fakegithub cannot convert issues to pull requests"},
                doc=doc,
            )
        title = body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise _invalid("PullRequest", {"field": "title", "code": "missing_field"}, doc=doc)
        head: str = body["head"]
        base: str = body["base"]
        owner, sep, branch = head.partition(":")
        if not sep:
            owner, branch = repo.owner, head
        if owner.lower() != repo.owner.lower():
            raise _invalid("PullRequest", {"field": "head", "code": "invalid"}, doc=doc)
        branches = self._branches(req, repo)
        if base not in branches:
            raise _invalid("PullRequest", {"field": "base", "code": "invalid"}, doc=doc)
        if branch not in branches:
            raise _invalid("PullRequest", {"field": "head", "code": "invalid"}, doc=doc)
        self._check_no_open_duplicate(req, repo, branch, base, doc=doc)
        ahead = _git_proc(repo.bare, "rev-list", "--count", f"{branches[base]}..{branches[branch]}")
        if ahead.returncode == 0 and ahead.stdout.strip() == "0":
            raise _invalid(
                "PullRequest",
                {"code": "custom", "message": f"No commits between {base} and {branch}"},
                doc=doc,
            )
        now = self._now()
        pull = _Pull(
            next(self._ids),
            branch,
            base,
            branches[branch],
            branches[base],
            draft=bool(body.get("draft", False)),
            maintainer_can_modify=bool(body.get("maintainer_can_modify", False)),
        )
        body_text = body.get("body")
        issue = _Issue(
            repo.next_number,
            next(self._ids),
            title,
            body_text if isinstance(body_text, str) else None,
            self.login,
            now,
            now,
            pull=pull,
        )
        repo.issues[issue.number] = issue
        repo.next_number += 1
        self._set_pull_refs(repo, {issue.number: pull.head_sha})
        data = self._pull_json(req, repo, issue, full=True)
        return _Response(201, data, {"Location": data["url"]})

    def _check_no_open_duplicate(
        self, req: _Request, repo: _Repo, branch: str, base: str, *, doc: str = DOCS, exclude: int = 0
    ) -> None:
        for other in repo.issues.values():
            if (
                other.pull is not None
                and other.number != exclude
                and other.state == "open"
                and other.pull.head_ref == branch
                and other.pull.base_ref == base
            ):
                message = f"A pull request already exists for {repo.owner}:{branch}."
                raise _invalid("PullRequest", {"code": "custom", "message": message}, doc=doc)

    def _get_pull(self, req: _Request, repo: _Repo, n: str) -> _Response:
        return _Response(200, self._pull_json(req, repo, self._pull_issue(repo, n), full=True))

    def _update_pull(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._pull_issue(repo, n)
        assert issue.pull is not None
        body = _body_object(req)
        if "base" in body and body["base"] not in self._branches(req, repo):
            raise _invalid("PullRequest", {"field": "base", "code": "invalid"})
        if "state" in body:
            self._set_state(req, repo, issue, body["state"], None)
        if "base" in body:
            issue.pull.base_ref = body["base"]
        self._apply_common_edits(issue, body)
        return _Response(200, self._pull_json(req, repo, issue, full=True))

    def _apply_common_edits(self, issue: _Issue, body: JSON) -> None:
        if isinstance(body.get("title"), str):
            issue.title = body["title"]
        if "body" in body and (body["body"] is None or isinstance(body["body"], str)):
            issue.body = body["body"]
        issue.updated_at = self._now()

    def _set_state(self, req: _Request, repo: _Repo, issue: _Issue, state: Any, reason: Any) -> None:
        if state not in ("open", "closed"):
            resource = "PullRequest" if issue.pull else "Issue"
            raise _invalid(resource, {"field": "state", "code": "invalid"})
        now = self._now()
        if state == "closed" and issue.state == "open":
            self._refresh_pull(req, repo, issue)
            issue.state, issue.closed_at = "closed", now
            if issue.pull is None:
                issue.state_reason = reason if reason in ("completed", "not_planned") else "completed"
        elif state == "open" and issue.state == "closed":
            pull = issue.pull
            if pull is not None:
                if pull.merged:
                    raise _invalid(
                        "PullRequest",
                        {
                            "field": "state",
                            "code": "custom",
                            "message": "state cannot be changed. The pull request has already been merged.",
                        },
                    )
                if pull.head_ref not in self._branches(req, repo):
                    raise _invalid(
                        "PullRequest",
                        {
                            "field": "state",
                            "code": "custom",
                            "message": "state cannot be changed. The head branch was deleted.",
                        },
                    )
                self._check_no_open_duplicate(req, repo, pull.head_ref, pull.base_ref, exclude=issue.number)
            else:
                issue.state_reason = "reopened"
            issue.state, issue.closed_at = "open", None
            self._refresh_pull(req, repo, issue)
        issue.updated_at = now

    def _list_pull_commits(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._pull_issue(repo, n)
        assert issue.pull is not None
        self._refresh_pull(req, repo, issue)
        commits = self._log(repo, "--reverse", f"{issue.pull.base_sha}..{issue.pull.head_sha}")
        return self._page(req, commits[:MAX_PR_COMMITS], lambda c: self._commit_json(repo, c))

    def _pull_merged(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._pull_issue(repo, n)
        if issue.pull is not None and issue.pull.merged:
            return _Response(204, empty=True)
        raise _not_found()

    # -- issues
