"""A local, stateful fake of the GitHub REST API on 127.0.0.1, backed by real bare git repositories,
for the real PyGithub client (see :mod:`testing.fakegithub.server` for what it is faithful to).

Split by concern: ``faults`` (what can be injected), ``state`` (the data and git helpers), ``transport``
(the HTTP server), ``render`` (JSON shapes, pagination), ``serving`` (auth, faults, routing, admin),
``routes_*`` (the endpoints) and ``server`` (:class:`FakeGitHub`, its lifecycle and test-facing API).
"""

from testing.fakegithub.faults import (
    Fault,
    Injection,
    RecordedRequest,
    delay,
    drop_after_effect,
    drop_before_effect,
    rate_limit,
    secondary_rate_limit,
    status,
)
from testing.fakegithub.server import FakeGitHub

__all__ = [
    "FakeGitHub",
    "Fault",
    "Injection",
    "RecordedRequest",
    "delay",
    "drop_after_effect",
    "drop_before_effect",
    "rate_limit",
    "secondary_rate_limit",
    "status",
]
