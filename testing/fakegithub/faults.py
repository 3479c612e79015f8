"""Fault injection for the fake GitHub: statuses, rate limits, dropped connections, delays."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from testing.fakegithub.state import _REASONS

# --------------------------------------------------------------------------------------------------------
# Fault injection
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """What to do to a matching request instead of (or around) answering it normally.

    Build one with :func:`status`, :func:`rate_limit`, :func:`secondary_rate_limit`,
    :func:`drop_after_effect`, :func:`drop_before_effect` or :func:`delay`.
    """

    kind: str
    code: int = 0
    retry_after: int = 0
    seconds: float = 0.0
    message: str = ""

    def describe(self) -> str:
        return {
            "status": f"status({self.code})",
            "rate_limit": f"rate_limit({self.retry_after}, status={self.code})",
            "secondary_rate_limit": f"secondary_rate_limit({self.retry_after}, status={self.code})",
            "delay": f"delay({self.seconds})",
        }.get(self.kind, f"{self.kind}()")


def status(code: int = 500, message: str | None = None) -> Fault:
    """Answer with HTTP ``code`` and a GitHub-style JSON error body, without performing the request."""
    if not 400 <= code <= 599:
        raise ValueError(f"status fault needs a 4xx/5xx code, got {code}")
    return Fault("status", code=code, message=message or _REASONS.get(code, "Error"))


def rate_limit(retry_after: int = 60, *, status: int = 403) -> Fault:
    """Primary rate limit: 403 (or 429) "API rate limit exceeded", ``X-RateLimit-Remaining: 0`` and
    ``X-RateLimit-Reset`` = now + ``retry_after``; the 429 variant also sends ``Retry-After``."""
    if status not in (403, 429):
        raise ValueError("rate limits answer 403 or 429")
    return Fault("rate_limit", code=status, retry_after=retry_after)


def secondary_rate_limit(retry_after: int = 60, *, status: int = 403) -> Fault:
    """Secondary (abuse) rate limit: 403/429 "You have exceeded a secondary rate limit" + ``Retry-After``."""
    if status not in (403, 429):
        raise ValueError("rate limits answer 403 or 429")
    return Fault("secondary_rate_limit", code=status, retry_after=retry_after)


def drop_after_effect() -> Fault:
    """Perform the request (e.g. really create the PR), then close the connection without any response."""
    return Fault("drop_after_effect")


def drop_before_effect() -> Fault:
    """Close the connection without performing the request or sending any response."""
    return Fault("drop_before_effect")


def delay(seconds: float) -> Fault:
    """Sleep ``seconds`` before handling the request normally (the effect happens even if the client has
    given up by then, like a slow GitHub)."""
    return Fault("delay", seconds=float(seconds))


def fault_from_json(spec: Mapping[str, Any]) -> Fault:
    """Build a :class:`Fault` from the admin endpoint's JSON (``{"fault": "status", "status": 502}``...)."""
    kind = str(spec.get("fault", ""))
    if kind == "status":
        return status(int(spec.get("status", 500)), spec.get("message"))
    if kind in ("rate_limit", "secondary_rate_limit"):
        maker = rate_limit if kind == "rate_limit" else secondary_rate_limit
        return maker(int(spec.get("retry_after", 60)), status=int(spec.get("status", 403)))
    if kind == "drop_after_effect":
        return drop_after_effect()
    if kind == "drop_before_effect":
        return drop_before_effect()
    if kind == "delay":
        return delay(float(spec.get("seconds", 1.0)))
    raise ValueError(f"unknown fault {kind!r}")


@dataclass
class Injection:
    """One armed fault: applies to requests whose method matches (``*`` = any) and whose percent-decoded
    path (no query string) matches ``pattern`` (``re.search``), at most ``remaining`` more times
    (``None`` = forever).  ``hits`` counts how often it fired."""

    method: str
    pattern: re.Pattern[str]
    fault: Fault
    remaining: int | None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        return self.method in ("*", method) and self.pattern.search(path) is not None


@dataclass(frozen=True)
class RecordedRequest:
    """One API request as the server saw it.  ``path`` is percent-decoded; ``status`` is ``None`` when
    the connection was dropped by a fault; ``fault`` names the fault that fired, if any."""

    method: str
    path: str
    query: dict[str, str]
    status: int | None
    body: Any = None
    fault: str | None = None
