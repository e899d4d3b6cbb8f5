"""How much one agent account may ask of the API: a request rate, and live investigations at once.

Both answer ``429 Too Many Requests`` with ``Retry-After`` (seconds); an MCP tool call over the
rate is refused with ``rate_limited`` and ``retry_after`` (``account_rate_wait``, one count with
the API's). The rate is counted per
account by django-ninja's throttling in the Django cache (``CACHES["default"]``: per process with
the default local-memory cache, shared between processes with a shared cache); the live
investigations in flight are counted in the database, so the limit holds across web processes.
Defaults and settings: docs/contracts.md, Limits.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from django.conf import settings
from django.http import HttpRequest
from ninja.throttling import SimpleRateThrottle

from investigations.models import InvestigationRequest, RequestState

if TYPE_CHECKING:
    from django.contrib.auth.models import User

DEFAULT_RATE = "600/m"
DEFAULT_LIVE_INVESTIGATIONS = 2
# What a caller refused for too many live investigations is told to wait: about one live run.
LIVE_RETRY_AFTER_SECONDS = 15
TOO_MANY_LIVE = (
    "this account already has {limit} live investigation(s) queued or running; "
    "poll them and retry when one has finished"
)


class AccountRateThrottle(SimpleRateThrottle):
    """``CONSOLE_API_RATE`` requests per account (e.g. ``600/m``), read at each request so a
    changed setting applies without a restart; ``None`` or an empty value switches it off."""

    scope = "agent-account"

    def __init__(self) -> None:
        super().__init__(rate=DEFAULT_RATE)

    def allow_request(self, request: HttpRequest) -> bool:
        self.rate = getattr(settings, "CONSOLE_API_RATE", DEFAULT_RATE) or None
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request)

    def get_cache_key(self, request: HttpRequest) -> str | None:
        user = getattr(request, "auth", None)
        if user is None or getattr(user, "pk", None) is None:
            return None  # unauthenticated requests are answered 401 before any work
        return self.cache_format % {"scope": self.scope, "ident": user.pk}


def account_rate_wait(user: User) -> int | None:
    """Count one request of ``user`` against ``CONSOLE_API_RATE``, in the same count as the
    HTTP API's: None when it is allowed, else the whole seconds to wait (the API's
    ``Retry-After``)."""
    throttle = AccountRateThrottle()
    request = HttpRequest()
    request.auth = user  # type: ignore[attr-defined]
    if throttle.allow_request(request):
        return None
    wait = throttle.wait()
    return max(1, math.ceil(wait)) if wait is not None else throttle.duration or 1


class TooBusy(Exception):
    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


def live_investigations_limit() -> int:
    return int(getattr(settings, "CONSOLE_API_LIVE_INVESTIGATIONS", DEFAULT_LIVE_INVESTIGATIONS))


def _queued_or_running(user: User) -> int:
    return InvestigationRequest.objects.filter(
        actor=user, state__in=[RequestState.QUEUED, RequestState.RUNNING]
    ).count()


def require_live_capacity(user: User, *, also_running: int = 0) -> None:
    """Refuse another live investigation while the account has its limit queued or running
    (``also_running``: the ones this process runs itself, which have no queued row)."""
    limit = live_investigations_limit()
    if _queued_or_running(user) + also_running >= limit:
        raise TooBusy(TOO_MANY_LIVE.format(limit=limit), LIVE_RETRY_AFTER_SECONDS)


class LiveRunsHere:
    """Live investigations this process runs within a call (the MCP tool ``investigate``), per
    account. Each counts with the account's queued and running ones against
    ``CONSOLE_API_LIVE_INVESTIGATIONS``, so one token cannot hold every thread of a remote MCP
    server with model calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Counter[int] = Counter()

    @contextmanager
    def held(self, user: User) -> Iterator[None]:
        with self._lock:
            require_live_capacity(user, also_running=self._running[user.pk])
            self._running[user.pk] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[user.pk] -= 1
                if self._running[user.pk] <= 0:
                    del self._running[user.pk]


LIVE_RUNS_HERE = LiveRunsHere()
