"""The HTTP layer under PyGithub: retries that never re-send a write, rate-limit waits, call counting."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

import github
import github.Auth
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.util.retry import Retry

if TYPE_CHECKING:
    from types import TracebackType

    from urllib3.connectionpool import ConnectionPool
    from urllib3.response import BaseHTTPResponse


SAFE_METHODS = frozenset({"GET", "HEAD"})
RETRY_STATUSES = frozenset({403, 429, 500, 502, 503, 504})

# -- transport --------------------------------------------------------------------------------------------


@dataclass
class ApiCalls:
    """HTTP exchanges with GitHub, retries included (one per request actually sent)."""

    by_method: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    failures: int = 0  # exchanges that got no HTTP answer (connection error, timeout)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def total(self) -> int:
        return sum(self.by_method.values())

    @property
    def reads(self) -> int:
        return sum(n for m, n in self.by_method.items() if m in SAFE_METHODS)

    @property
    def writes(self) -> int:
        return self.total - self.reads

    def record(self, method: str | None, answered: bool = True) -> None:
        with self._lock:
            self.by_method[(method or "?").upper()] += 1
            if not answered:
                self.failures += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "reads": self.reads,
            "writes": self.writes,
            "retries": self.retries,
            "by_method": dict(sorted(self.by_method.items())),
        }


def _header(response: BaseHTTPResponse, name: str) -> str | None:
    value = response.headers.get(name)
    return str(value).strip() if value is not None else None


def rate_limit_wait(response: BaseHTTPResponse, now: float | None = None) -> float | None:
    """Seconds GitHub asks us to wait before retrying this answer, or None when it asks for nothing.

    ``Retry-After`` (seconds or an HTTP date) wins; otherwise an exhausted primary limit
    (``X-RateLimit-Remaining: 0``) waits until ``X-RateLimit-Reset`` (epoch seconds).
    """
    now = time.time() if now is None else now
    retry_after = _header(response, "Retry-After")
    if retry_after:
        if retry_after.isdigit():
            return float(retry_after)
        import email.utils

        parsed = email.utils.parsedate_tz(retry_after)
        if parsed is not None:
            return max(0.0, email.utils.mktime_tz(parsed) - now)
    if _header(response, "X-RateLimit-Remaining") == "0":
        reset = _header(response, "X-RateLimit-Reset") or ""
        try:
            return max(0.0, float(reset) - now) + 0.5  # the reset happens somewhere in that second
        except ValueError:
            return None
    return None


class SafeRetry(Retry):
    """urllib3 retries that re-send only reads, wait as GitHub asks, stay within a budget, and count.

    urllib3 calls :meth:`is_retry` once for every HTTP answer it gets and :meth:`increment` for every
    attempt that failed (a retryable status or no answer at all), which is where exchanges are counted.
    ``raise_on_status`` is off, so when the retries run out PyGithub sees the last real answer (a 500, a
    rate-limited 403) and raises its usual exception for it.
    """

    def __init__(
        self,
        *args: Any,
        calls: ApiCalls | None = None,
        backoff: float = 1.0,
        max_wait: float = 60.0,
        waited: float = 0.0,
        next_wait: float = 0.0,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("raise_on_status", False)
        kwargs.setdefault("respect_retry_after_header", False)  # honoured by sleep() below
        kwargs.setdefault("backoff_factor", 0)
        kwargs.setdefault("allowed_methods", SAFE_METHODS)
        kwargs.setdefault("status_forcelist", RETRY_STATUSES)
        super().__init__(*args, **kwargs)
        self.calls = calls if calls is not None else ApiCalls()
        self.backoff = backoff
        self.max_wait = max_wait
        self.waited = waited
        self.next_wait = next_wait

    def new(self, **kw: Any) -> Self:
        kw.setdefault("calls", self.calls)
        kw.setdefault("backoff", self.backoff)
        kw.setdefault("max_wait", self.max_wait)
        kw.setdefault("waited", self.waited)
        kw.setdefault("next_wait", 0.0)
        return super().new(**kw)

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        self.calls.record(method)
        return method.upper() in SAFE_METHODS and status_code in RETRY_STATUSES

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        safe = (method or "").upper() in SAFE_METHODS
        if error is not None:
            self.calls.record(method, answered=False)
            if not safe and not self._is_connection_error(error):
                raise error.with_traceback(_stacktrace)  # a write that may have reached GitHub: unknown
        wait = self._wait_for(response)
        if wait is None or self.waited + wait > self.max_wait:
            # not retryable (a 403 that is no rate limit) or over budget: hand back what we have
            if error is not None:
                raise MaxRetryError(_pool, url or "", error) from error  # type: ignore[arg-type]
            raise MaxRetryError(_pool, url or "", ResponseError("retry budget exhausted"))  # type: ignore[arg-type]
        retry = super().increment(method, url, response, error, _pool, _stacktrace)
        retry.waited = self.waited + wait
        retry.next_wait = wait
        self.calls.retries += 1
        return retry

    def _wait_for(self, response: BaseHTTPResponse | None) -> float | None:
        attempt = len(self.history) + 1
        backoff = self.backoff * 2.0 ** (attempt - 1)
        if response is None:
            return backoff
        asked = rate_limit_wait(response)
        if response.status == 403 and asked is None:
            return None  # forbidden for a reason a retry cannot fix
        return max(backoff if response.status != 403 else 0.0, asked or 0.0)

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        if self.next_wait > 0:
            time.sleep(self.next_wait)


class NoCacheToken(github.Auth.Token):
    """Token auth that also asks every cache on the way not to answer from a stored copy."""

    def authentication(self, headers: dict[str, Any]) -> None:
        super().authentication(headers)
        headers["Cache-Control"] = "no-cache"


__all__ = ["ApiCalls", "NoCacheToken", "SafeRetry", "rate_limit_wait"]
