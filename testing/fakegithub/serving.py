"""Serving a request: auth, faults, recording, routing and the admin endpoints (a mixin of FakeGitHub)."""

from __future__ import annotations

import hashlib
import json
import re
import time
import traceback
import urllib.parse
from collections.abc import Callable

from testing.fakegithub.faults import Fault, RecordedRequest, fault_from_json
from testing.fakegithub.state import (
    _REASONS,
    _ROUTE,
    CACHE_CONTROL,
    DOCS,
    RATE_LIMIT,
    _error,
    _HTTPError,
    _loads_or_none,
    _not_found,
    _Request,
    _Response,
)
from testing.fakegithub.transport import _Handler


class Serving:
    """Request handling: auth, fault injection, recording and routing."""

    # ---- internals: request handling ------------------------------------------------------------------

    def _serve(self, handler: _Handler) -> None:
        method = handler.command.upper()
        target = handler.path
        if "://" in target.split("?", 1)[0]:  # absolute-form request target
            target = urllib.parse.urlsplit(target)._replace(scheme="", netloc="").geturl()
        raw_path, _, query_string = target.partition("?")
        pairs = urllib.parse.parse_qsl(query_string, keep_blank_values=True)
        try:
            raw_body = handler.read_body()
        except (OSError, ValueError):
            handler.close_connection = True
            return
        path = urllib.parse.unquote(raw_path)
        if path.startswith("/_fake/"):
            self._send(handler, method, self._admin(method, path, raw_body))
            return

        fault = self._take_fault(method, path)
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)
        query = dict(pairs)
        fault_name = fault.describe() if fault is not None else None
        body_for_record = _loads_or_none(raw_body)
        if fault is not None and fault.kind in ("status", "rate_limit", "secondary_rate_limit"):
            resp = self._fault_response(fault)
        elif fault is not None and fault.kind == "drop_before_effect":
            self._record(RecordedRequest(method, path, query, None, body_for_record, fault_name))
            handler.close_connection = True
            return
        else:
            req = _Request(method, raw_path, path, query, pairs, handler.headers, None)
            resp = self._api(req, raw_body)
        if fault is not None and fault.kind == "drop_after_effect":
            self._record(RecordedRequest(method, path, query, None, body_for_record, fault_name))
            handler.close_connection = True
            return
        # Record before writing: once the client has the response it may inspect server.requests.
        self._send(
            handler,
            method,
            resp,
            before_write=lambda code: self._record(
                RecordedRequest(method, path, query, code, body_for_record, fault_name)
            ),
            refund_on_304=fault is None or fault.kind in ("delay", "drop_after_effect"),
        )

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for injection in self._injections:
                if injection.matches(method, path):
                    if injection.remaining is not None:
                        injection.remaining -= 1
                    injection.hits += 1
                    return injection.fault
        return None

    def _record(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(rec)

    def _fault_response(self, fault: Fault) -> _Response:
        with self._lock:
            rate = self._rate()
        if fault.kind == "status":
            return _Response(
                fault.code, {"message": fault.message, "documentation_url": DOCS, "status": str(fault.code)}
            )
        reset = int(self._clock()) + fault.retry_after
        headers: dict[str, str] = {}
        if fault.kind == "rate_limit":
            with self._lock:
                user_id = self._user_id(self.login)
            message = (
                f"API rate limit exceeded for user ID {user_id}. If you reach out to GitHub "
                "Support for help, please include the request ID FAKE:0000."
            )
            headers = {
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Used": str(RATE_LIMIT),
                "X-RateLimit-Reset": str(reset),
            }
            if fault.code == 429:
                headers["Retry-After"] = str(fault.retry_after)
        else:
            message = (
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
                "If you reach out to GitHub Support for help, please include the request ID FAKE:0000."
            )
            headers = {"Retry-After": str(fault.retry_after), "X-RateLimit-Remaining": str(rate["remaining"])}
        doc = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
        return _Response(
            fault.code, {"message": message, "documentation_url": doc, "status": str(fault.code)}, headers
        )

    def _api(self, req: _Request, raw_body: bytes) -> _Response:
        try:
            with self._lock:
                self._check_auth(req)
                if req.path != "/rate_limit":
                    self._rate()
                    self._rate_used += 1
                if raw_body.strip():
                    try:
                        req.body = json.loads(raw_body)
                    except ValueError:
                        raise _error(400, "Problems parsing JSON") from None
                return self._route(req)
        except _HTTPError as e:
            return _Response(e.status, e.body, e.headers)
        except Exception:
            tb = traceback.format_exc()
            with self._lock:
                self.errors.append(tb)
            return _Response(500, {"message": f"fakegithub internal error: {tb.splitlines()[-1]}"})

    def _check_auth(self, req: _Request) -> None:
        if not self.tokens:
            return
        header = req.headers.get("Authorization")
        if not header:
            raise _error(401, "Requires authentication")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() not in ("token", "bearer") or token.strip() not in self.tokens:
            raise _error(401, "Bad credentials")

    def _route(self, req: _Request) -> _Response:
        stripped = req.raw_path.rstrip("/") or "/"
        for method, pattern, keep_slash, func in self._routes:
            m = pattern.fullmatch(req.raw_path if keep_slash else stripped)
            if m is None or method != ("GET" if req.method == "HEAD" else req.method):
                continue
            params = {k: urllib.parse.unquote(v) for k, v in m.groupdict().items() if v is not None}
            if "o" in params:
                key = f"{params.pop('o')}/{params.pop('r')}".lower()
                repo = self._repos.get(key)
                if repo is None:
                    raise _not_found()
                return func(req, repo, **params)
            return func(req, **params)
        raise _not_found()

    def _send(
        self,
        handler: _Handler,
        method: str,
        resp: _Response,
        before_write: Callable[[int], None] | None = None,
        *,
        refund_on_304: bool = False,
    ) -> int:
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            "X-GitHub-Request-Id": f"FAKE:{next(self._request_ids):08X}",
            "X-OAuth-Scopes": "repo",
            "X-Accepted-OAuth-Scopes": "",
            "Vary": "Accept, Authorization, Cookie, X-GitHub-OTP",
        }
        payload = b"" if resp.empty else json.dumps(resp.body, separators=(",", ":")).encode()
        code = resp.status
        if method in ("GET", "HEAD") and code == 200:
            etag = f'W/"{hashlib.sha256(payload).hexdigest()}"'
            headers["ETag"] = etag
            headers["Cache-Control"] = CACHE_CONTROL
            if etag in [t.strip() for t in (handler.headers.get("If-None-Match") or "").split(",")]:
                code, payload = 304, b""
        with self._lock:
            if code == 304 and refund_on_304:  # GitHub does not charge conditional requests answered 304
                self._rate_used = max(self._rate_used - 1, 0)
            rate = self._rate()
        headers.update(
            {
                "X-RateLimit-Limit": str(rate["limit"]),
                "X-RateLimit-Remaining": str(rate["remaining"]),
                "X-RateLimit-Used": str(rate["used"]),
                "X-RateLimit-Reset": str(rate["reset"]),
                "X-RateLimit-Resource": "core",
            }
        )
        headers.update(resp.headers)
        if code in (204, 304):
            headers.pop("Content-Type", None)
            payload = b""
        if before_write is not None:
            before_write(code)
        try:
            handler.send_response(code, _REASONS.get(code))
            for k, v in headers.items():
                handler.send_header(k, v)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if payload and method != "HEAD":
                handler.wfile.write(payload)
            handler.wfile.flush()
        except OSError:  # the client went away (e.g. after a delay fault)
            handler.close_connection = True
        return code

    # ---- admin endpoints ------------------------------------------------------------------------------

    def _admin(self, method: str, path: str, raw_body: bytes) -> _Response:
        try:
            body = json.loads(raw_body) if raw_body.strip() else {}
            if not isinstance(body, dict):
                raise ValueError("expected a JSON object")
            action = (method, path.rstrip("/"))
            if action == ("GET", "/_fake/state"):
                return _Response(200, self.state())
            if action == ("GET", "/_fake/requests"):
                return _Response(200, [r.__dict__ for r in self.requests])
            if action == ("POST", "/_fake/reset_requests"):
                self.reset_requests()
                return _Response(200, {"ok": True})
            if action == ("POST", "/_fake/inject"):
                times = body.get("times", 1)
                injection = self.inject(
                    str(body.get("method", "*")),
                    str(body.get("path", ".*")),
                    fault_from_json(body),
                    None if times is None else int(times),
                )
                return _Response(200, {"ok": True, "fault": injection.fault.describe()})
            if action == ("POST", "/_fake/clear_faults"):
                self.clear_faults()
                return _Response(200, {"ok": True})
            if action == ("POST", "/_fake/seed_prs"):
                numbers = self.seed_prs(
                    int(body.get("count", 1)),
                    body.get("repo"),
                    branch_prefix=str(body.get("branch_prefix", "seed/pr-")),
                    base=body.get("base"),
                    state=str(body.get("state", "open")),
                    title=str(body.get("title", "Seeded PR {n}")),
                    body=str(body.get("body", "")),
                    labels=[str(x) for x in body.get("labels", [])],
                )
                return _Response(201, {"numbers": numbers})
            if action == ("POST", "/_fake/merge"):
                self.merge_pr(int(body["number"]), body.get("repo"))
                return _Response(200, {"ok": True})
            if action == ("POST", "/_fake/add_repo"):
                bare = self.add_repo(str(body["name"]), str(body.get("default_branch", "main")))
                return _Response(201, {"name": body["name"], "path": str(bare)})
            return _Response(404, {"message": "Not Found"})
        except (KeyError, ValueError, TypeError, re.error) as e:
            return _Response(400, {"message": f"{type(e).__name__}: {e}"})

    # ---- routes ---------------------------------------------------------------------------------------

    def _build_routes(self) -> list[tuple[str, re.Pattern[str], bool, _ROUTE]]:
        repo = r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)"
        table: list[tuple[str, str, _ROUTE]] = [
            ("GET", r"/user", self._get_user),
            ("GET", r"/users/(?P<login>[^/]+)", self._get_named_user),
            ("GET", r"/rate_limit", self._get_rate_limit),
            ("GET", repo, self._get_repo),
            ("GET", repo + r"/pulls", self._list_pulls),
            ("POST", repo + r"/pulls", self._create_pull),
            ("GET", repo + r"/pulls/(?P<n>\d+)", self._get_pull),
            ("PATCH", repo + r"/pulls/(?P<n>\d+)", self._update_pull),
            ("GET", repo + r"/pulls/(?P<n>\d+)/commits", self._list_pull_commits),
            ("GET", repo + r"/pulls/(?P<n>\d+)/merge", self._pull_merged),
            ("GET", repo + r"/issues", self._list_issues),
            ("POST", repo + r"/issues", self._create_issue),
            ("GET", repo + r"/issues/comments", self._list_repo_comments),
            ("GET", repo + r"/issues/comments/(?P<cid>\d+)", self._get_comment),
            ("PATCH", repo + r"/issues/comments/(?P<cid>\d+)", self._update_comment),
            ("DELETE", repo + r"/issues/comments/(?P<cid>\d+)", self._delete_comment),
            ("GET", repo + r"/issues/(?P<n>\d+)", self._get_issue),
            ("PATCH", repo + r"/issues/(?P<n>\d+)", self._update_issue),
            ("GET", repo + r"/issues/(?P<n>\d+)/labels", self._list_issue_labels),
            ("POST", repo + r"/issues/(?P<n>\d+)/labels", self._add_issue_labels),
            ("PUT", repo + r"/issues/(?P<n>\d+)/labels", self._set_issue_labels),
            ("DELETE", repo + r"/issues/(?P<n>\d+)/labels", self._clear_issue_labels),
            ("DELETE", repo + r"/issues/(?P<n>\d+)/labels/(?P<name>.+)", self._remove_issue_label),
            ("GET", repo + r"/issues/(?P<n>\d+)/comments", self._list_comments),
            ("POST", repo + r"/issues/(?P<n>\d+)/comments", self._create_comment),
            ("GET", repo + r"/labels", self._list_labels),
            ("POST", repo + r"/labels", self._create_label),
            ("GET", repo + r"/labels/(?P<name>.+)", self._get_label),
            ("PATCH", repo + r"/labels/(?P<name>.+)", self._update_label),
            ("DELETE", repo + r"/labels/(?P<name>.+)", self._delete_label),
            ("GET", repo + r"/branches", self._list_branches),
            ("GET", repo + r"/branches/(?P<branch>.+)", self._get_branch),
            ("GET", repo + r"/commits/(?P<sha>[^/]+)", self._get_commit),
            ("GET", repo + r"/git/commits/(?P<sha>[0-9a-fA-F]+)", self._get_git_commit),
            ("GET", repo + r"/git/ref/(?P<ref>.+)", self._get_ref),
            ("GET", repo + r"/git/refs/(?P<ref>.+)", self._get_refs_legacy),
            ("POST", repo + r"/git/refs", self._create_ref),
            ("PATCH", repo + r"/git/refs/(?P<ref>.+)", self._update_ref),
            ("DELETE", repo + r"/git/refs/(?P<ref>.+)", self._delete_ref),
        ]
        routes = [
            (
                "GET",
                re.compile(repo + r"/git/matching-refs(?:/(?P<ref>.*))?"),
                True,
                self._matching_refs,
            )
        ]
        routes += [(m, re.compile(p), False, f) for m, p, f in table]
        return routes
