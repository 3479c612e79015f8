"""Routes: the user, the rate limit, the repository, branches, commits and refs (a mixin)."""

from __future__ import annotations

from testing.fakegithub.state import (
    JSON,
    _body_object,
    _error,
    _git_proc,
    _invalid,
    _iso,
    _not_found,
    _q,
    _Repo,
    _Request,
    _Response,
    _run_git,
)


class RepoRoutes:
    """User, rate limit, repository, branch, commit and ref endpoints."""

    # -- users, rate limit, repo

    def _get_user(self, req: _Request) -> _Response:
        data = self._user_json(self.login)
        data.update(
            {
                "name": self.login,
                "company": None,
                "blog": "",
                "location": None,
                "email": None,
                "hireable": None,
                "bio": None,
                "twitter_username": None,
                "public_repos": 0,
                "public_gists": 0,
                "followers": 0,
                "following": 0,
                "created_at": _iso(0),
                "updated_at": _iso(0),
            }
        )
        return _Response(200, data)

    def _get_named_user(self, req: _Request, login: str) -> _Response:
        known = login == self.login or any(r.owner == login for r in self._repos.values())
        if not known:
            raise _not_found()
        return _Response(200, self._user_json(login))

    def _get_rate_limit(self, req: _Request) -> _Response:
        core = self._rate()
        reset = core["reset"]

        def other(limit: int, resource: str) -> JSON:
            return {"limit": limit, "used": 0, "remaining": limit, "reset": reset, "resource": resource}

        resources = {
            "core": core,
            "search": other(30, "search"),
            "graphql": other(5000, "graphql"),
            "integration_manifest": other(5000, "integration_manifest"),
            "code_search": other(10, "code_search"),
        }
        return _Response(200, {"resources": resources, "rate": core})

    def _get_repo(self, req: _Request, repo: _Repo) -> _Response:
        return _Response(200, self._repo_json(repo, req))

    # -- pulls

    def _list_branches(self, req: _Request, repo: _Repo) -> _Response:
        base = self._api_base(repo)
        branches = sorted(self._branches(req, repo).items())
        return self._page(
            req,
            branches,
            lambda b: {
                "name": b[0],
                "commit": {"sha": b[1], "url": f"{base}/commits/{b[1]}"},
                "protected": False,
            },
        )

    def _get_branch(self, req: _Request, repo: _Repo, branch: str) -> _Response:
        sha = self._branches(req, repo).get(branch)
        commits = self._log(repo, "-1", sha) if sha else []
        if not commits:
            raise _not_found("Branch not found")
        base = self._api_base(repo)
        quoted = _q(branch, safe="/")
        return _Response(
            200,
            {
                "name": branch,
                "commit": self._commit_json(repo, commits[0]),
                "_links": {
                    "self": f"{base}/branches/{quoted}",
                    "html": f"{self.url}/{repo.full_name}/tree/{quoted}",
                },
                "protected": False,
                "protection": {
                    "enabled": False,
                    "required_status_checks": {"enforcement_level": "off", "contexts": [], "checks": []},
                },
                "protection_url": f"{base}/branches/{quoted}/protection",
            },
        )

    def _get_commit(self, req: _Request, repo: _Repo, sha: str) -> _Response:
        resolved = self._resolve_commit(repo, sha)
        commits = self._log(repo, "-1", resolved) if resolved else []
        if not commits:
            raise _error(422, f"No commit found for SHA: {sha}")
        return _Response(200, self._commit_json(repo, commits[0]))

    def _get_git_commit(self, req: _Request, repo: _Repo, sha: str) -> _Response:
        resolved = self._resolve_commit(repo, sha) if len(sha) == 40 else None
        commits = self._log(repo, "-1", resolved) if resolved else []
        if not commits:
            raise _not_found()
        return _Response(200, self._git_commit_json(repo, commits[0]))

    def _get_ref(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        found = self._refs(req, repo).get(f"refs/{ref}")
        if found is None:
            raise _not_found()
        return _Response(200, self._ref_json(repo, found))

    def _get_refs_legacy(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        """``GET /git/refs/{ref}``: the ref itself, else (legacy GitHub behaviour) refs that start with it."""
        refs = self._refs(req, repo)
        if f"refs/{ref}" in refs:
            return _Response(200, self._ref_json(repo, refs[f"refs/{ref}"]))
        matching = [r for name, r in sorted(refs.items()) if name.startswith(f"refs/{ref}")]
        if not matching:
            raise _not_found()
        return _Response(200, [self._ref_json(repo, r) for r in matching])

    def _matching_refs(self, req: _Request, repo: _Repo, ref: str = "") -> _Response:
        refs = self._refs(req, repo)
        prefix = f"refs/{ref}" if ref else "refs/"
        return _Response(
            200, [self._ref_json(repo, r) for name, r in sorted(refs.items()) if name.startswith(prefix)]
        )

    def _create_ref(self, req: _Request, repo: _Repo) -> _Response:
        body = _body_object(req)
        ref, sha = body.get("ref"), body.get("sha")
        if not isinstance(ref, str) or not isinstance(sha, str):
            raise _invalid(
                "Reference", {"field": "ref" if not isinstance(ref, str) else "sha", "code": "missing_field"}
            )
        if not ref.startswith("refs/") or ref.count("/") < 2:
            raise _error(422, "Reference name must start with 'refs/' and have at least two slashes.")
        if _git_proc(repo.bare, "check-ref-format", ref).returncode != 0:
            raise _error(422, f"{ref} is not a valid ref name.")
        if ref in self._refs(req, repo):
            raise _error(422, "Reference already exists")
        if len(sha) != 40 or self._resolve_commit(repo, sha) is None:
            raise _error(422, "Object does not exist")
        _run_git(repo.bare, "update-ref", ref, sha, "")
        req.git_cache.clear()
        data = self._ref_json(repo, self._refs(req, repo)[ref])
        return _Response(201, data, {"Location": data["url"]})

    def _update_ref(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        body = _body_object(req)
        full = f"refs/{ref}"
        current = self._refs(req, repo).get(full)
        if current is None:
            raise _error(422, "Reference does not exist")
        sha = body.get("sha")
        if not isinstance(sha, str) or len(sha) != 40 or self._resolve_commit(repo, sha) is None:
            raise _error(422, "Object does not exist")
        ancestor = _git_proc(repo.bare, "merge-base", "--is-ancestor", current.sha, sha).returncode == 0
        if not body.get("force") and not ancestor:
            raise _error(422, "Update is not a fast forward")
        _run_git(repo.bare, "update-ref", full, sha, current.sha)
        req.git_cache.clear()
        return _Response(200, self._ref_json(repo, self._refs(req, repo)[full]))

    def _delete_ref(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        full = f"refs/{ref}"
        current = self._refs(req, repo).get(full)
        if current is None:
            raise _error(422, "Reference does not exist")
        _run_git(repo.bare, "update-ref", "-d", full, current.sha)
        req.git_cache.clear()
        return _Response(204, empty=True)
