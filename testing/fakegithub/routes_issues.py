"""Routes: issues, labels and comments (a mixin)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from testing.fakegithub.state import (
    _COLOR_RE,
    DEFAULT_LABEL_COLOR,
    _body_object,
    _Comment,
    _invalid,
    _Issue,
    _Label,
    _not_found,
    _parse_iso,
    _Repo,
    _Request,
    _Response,
)


class IssueRoutes:
    """Issue, label and comment endpoints."""

    def _issue(self, repo: _Repo, n: str) -> _Issue:
        issue = repo.issues.get(int(n))
        if issue is None:
            raise _not_found()
        return issue

    def _list_issues(self, req: _Request, repo: _Repo) -> _Response:
        state = req.query.get("state", "open") or "open"
        if state not in ("open", "closed", "all"):
            raise _invalid("Issue", {"field": "state", "code": "invalid"})
        items = [i for i in repo.issues.values() if state in ("all", i.state)]
        wanted = [x.strip().lower() for x in req.query.get("labels", "").split(",") if x.strip()]
        if wanted:
            items = [i for i in items if all(w in i.labels for w in wanted)]
        if req.query.get("creator"):
            items = [i for i in items if i.user.lower() == req.query["creator"].lower()]
        since = _parse_iso(req.query.get("since", "")) if req.query.get("since") else None
        if since is not None:
            items = [i for i in items if i.updated_at >= since]
        sort = req.query.get("sort", "created") or "created"
        keys: dict[str, Callable[[_Issue], tuple[float, int]]] = {
            "created": lambda i: (i.created_at, i.number),
            "updated": lambda i: (i.updated_at, i.number),
            "comments": lambda i: (self._comment_count(repo, i.number, req), i.number),
        }
        if sort not in keys:
            raise _invalid("Issue", {"field": "sort", "code": "invalid"})
        items.sort(key=keys[sort], reverse=(req.query.get("direction") or "desc") == "desc")
        return self._page(req, items, lambda i: self._issue_json(req, repo, i))

    def _label_names(self, value: Any) -> list[str]:
        if isinstance(value, dict):
            value = value.get("labels")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise _invalid("Label", {"field": "labels", "code": "invalid"})
        names = []
        for item in value:
            name = item.get("name") if isinstance(item, dict) else item
            if not isinstance(name, str) or not name.strip():
                raise _invalid("Label", {"field": "name", "code": "invalid"})
            names.append(name)
        return names

    def _attach_labels(self, repo: _Repo, issue: _Issue, names: list[str], *, replace: bool) -> None:
        keys = [self._ensure_label(repo, name).name.lower() for name in names]
        if replace:
            issue.labels = []
        for key in keys:
            if key not in issue.labels:
                issue.labels.append(key)
        issue.updated_at = self._now()

    def _create_issue(self, req: _Request, repo: _Repo) -> _Response:
        body = _body_object(req)
        title = body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise _invalid("Issue", {"field": "title", "code": "missing_field"})
        now = self._now()
        text = body.get("body")
        issue = _Issue(
            repo.next_number,
            next(self._ids),
            title,
            text if isinstance(text, str) else None,
            self.login,
            now,
            now,
        )
        if body.get("labels"):
            self._attach_labels(repo, issue, self._label_names(body["labels"]), replace=True)
        repo.issues[issue.number] = issue
        repo.next_number += 1
        data = self._issue_json(req, repo, issue)
        return _Response(201, data, {"Location": data["url"]})

    def _get_issue(self, req: _Request, repo: _Repo, n: str) -> _Response:
        return _Response(200, self._issue_json(req, repo, self._issue(repo, n)))

    def _update_issue(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        body = _body_object(req)
        if "state" in body:
            self._set_state(req, repo, issue, body["state"], body.get("state_reason"))
        if "labels" in body:
            self._attach_labels(repo, issue, self._label_names(body["labels"] or []), replace=True)
        self._apply_common_edits(issue, body)
        return _Response(200, self._issue_json(req, repo, issue))

    def _list_issue_labels(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        labels = [repo.labels[k] for k in issue.labels if k in repo.labels]
        return self._page(req, labels, lambda label: self._label_json(repo, label))

    def _add_issue_labels(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        self._attach_labels(repo, issue, self._label_names(req.body), replace=False)
        return _Response(200, self._issue_labels(repo, issue))

    def _set_issue_labels(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        self._attach_labels(repo, issue, self._label_names(req.body or []), replace=True)
        return _Response(200, self._issue_labels(repo, issue))

    def _clear_issue_labels(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        issue.labels, issue.updated_at = [], self._now()
        return _Response(204, empty=True)

    def _remove_issue_label(self, req: _Request, repo: _Repo, n: str, name: str) -> _Response:
        issue = self._issue(repo, n)
        if name.lower() not in issue.labels:
            raise _not_found("Label does not exist")
        issue.labels.remove(name.lower())
        issue.updated_at = self._now()
        return _Response(200, self._issue_labels(repo, issue))

    # -- comments

    def _list_comments(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        comments = sorted((c for c in repo.comments.values() if c.number == issue.number), key=lambda c: c.id)
        since = _parse_iso(req.query["since"]) if req.query.get("since") else None
        if since is not None:
            comments = [c for c in comments if c.updated_at >= since]
        return self._page(req, comments, lambda c: self._comment_json(repo, c))

    def _list_repo_comments(self, req: _Request, repo: _Repo) -> _Response:
        comments = sorted(repo.comments.values(), key=lambda c: c.id)
        if (req.query.get("direction") or "asc") == "desc":
            comments.reverse()
        return self._page(req, comments, lambda c: self._comment_json(repo, c))

    def _create_comment(self, req: _Request, repo: _Repo, n: str) -> _Response:
        issue = self._issue(repo, n)
        body = _body_object(req)
        text = body.get("body")
        if not isinstance(text, str) or not text:
            raise _invalid("IssueComment", {"field": "body", "code": "missing_field"})
        now = self._now()
        comment = _Comment(next(self._ids), issue.number, text, self.login, now, now)
        repo.comments[comment.id] = comment
        issue.updated_at = now
        data = self._comment_json(repo, comment)
        return _Response(201, data, {"Location": data["url"]})

    def _comment(self, repo: _Repo, cid: str) -> _Comment:
        comment = repo.comments.get(int(cid))
        if comment is None:
            raise _not_found()
        return comment

    def _get_comment(self, req: _Request, repo: _Repo, cid: str) -> _Response:
        return _Response(200, self._comment_json(repo, self._comment(repo, cid)))

    def _update_comment(self, req: _Request, repo: _Repo, cid: str) -> _Response:
        comment = self._comment(repo, cid)
        text = _body_object(req).get("body")
        if not isinstance(text, str) or not text:
            raise _invalid("IssueComment", {"field": "body", "code": "missing_field"})
        comment.body, comment.updated_at = text, self._now()
        return _Response(200, self._comment_json(repo, comment))

    def _delete_comment(self, req: _Request, repo: _Repo, cid: str) -> _Response:
        del repo.comments[self._comment(repo, cid).id]
        return _Response(204, empty=True)

    # -- labels

    def _label(self, repo: _Repo, name: str) -> _Label:
        label = repo.labels.get(name.lower())
        if label is None:
            raise _not_found()
        return label

    def _list_labels(self, req: _Request, repo: _Repo) -> _Response:
        labels = sorted(repo.labels.values(), key=lambda label: label.id)
        return self._page(req, labels, lambda label: self._label_json(repo, label))

    def _create_label(self, req: _Request, repo: _Repo) -> _Response:
        body = _body_object(req)
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _invalid("Label", {"field": "name", "code": "missing_field"})
        color = str(body.get("color") or DEFAULT_LABEL_COLOR).lstrip("#")
        if not _COLOR_RE.match(color):
            raise _invalid("Label", {"field": "color", "code": "invalid"})
        if name.lower() in repo.labels:
            raise _invalid("Label", {"field": "name", "code": "already_exists"})
        description = body.get("description")
        label = _Label(
            next(self._ids), name, color.lower(), description if isinstance(description, str) else None
        )
        repo.labels[name.lower()] = label
        data = self._label_json(repo, label)
        return _Response(201, data, {"Location": data["url"]})

    def _get_label(self, req: _Request, repo: _Repo, name: str) -> _Response:
        return _Response(200, self._label_json(repo, self._label(repo, name)))

    def _update_label(self, req: _Request, repo: _Repo, name: str) -> _Response:
        label = self._label(repo, name)
        body = _body_object(req)
        new_name = body.get("new_name") or body.get("name")
        if isinstance(new_name, str) and new_name.lower() != label.name.lower():
            if new_name.lower() in repo.labels:
                raise _invalid("Label", {"field": "name", "code": "already_exists"})
            old_key = label.name.lower()
            del repo.labels[old_key]
            repo.labels[new_name.lower()] = label
            for issue in repo.issues.values():
                issue.labels = [new_name.lower() if k == old_key else k for k in issue.labels]
        if isinstance(new_name, str):
            label.name = new_name
        if isinstance(body.get("color"), str):
            color = body["color"].lstrip("#")
            if not _COLOR_RE.match(color):
                raise _invalid("Label", {"field": "color", "code": "invalid"})
            label.color = color.lower()
        if "description" in body:
            label.description = body["description"]
        return _Response(200, self._label_json(repo, label))

    def _delete_label(self, req: _Request, repo: _Repo, name: str) -> _Response:
        label = self._label(repo, name)
        key = label.name.lower()
        del repo.labels[key]
        for issue in repo.issues.values():
            if key in issue.labels:
                issue.labels.remove(key)
        return _Response(204, empty=True)

    # -- branches, commits, refs
