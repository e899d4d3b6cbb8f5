"""How much one agent account may ask of the API: a request rate, and live investigations at once.

Both answer ``429 Too Many Requests`` with ``Retry-After`` (seconds); an MCP tool call over the
rate is refused with ``rate_limited`` and ``retry_after`` (``account_rate_wait``, one count with
the API's). Both are counted in the database, so they hold across every web instance of a deployment: the rate per account in fixed
windows (``RateCount``, one row per account, counted by one atomic statement), the live
investigations in flight from their rows (the worker's ``InvestigationRequest``, the MCP calls'
``LiveRun``), counted and written under the account's lock. Defaults and settings: docs/contracts.md, Limits.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.http import HttpRequest
from ninja.throttling import BaseThrottle

from agentapi.models import LiveRun, RateCount
from investigations.models import InvestigationRequest, RequestState
from reviewconsole import clock

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


PERIODS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"N/s"``, ``"N/m"``, ``"N/h"``, ``"N/d"`` (or ``sec``/``min``/``hour``/``day``) →
    (N, seconds)."""
    count, _, period = rate.partition("/")
    if not count.strip().isdigit() or int(count) < 1 or period.strip() not in PERIODS:
        raise ImproperlyConfigured(
            f"CONSOLE_API_RATE must be N/s, N/m, N/h or N/d with N at least 1, not {rate!r}"
        )
    return int(count), PERIODS[period.strip()]


def _upsert_sql() -> str:
    q = connection.ops.quote_name
    table = q(RateCount._meta.db_table)
    key, seconds, index, hits = (
        q(name) for name in ("key", "period_seconds", "period_index", "hits")
    )
    greatest = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    # One statement: the row's count in the window of ``now``, one more. A row of an older window
    # (or another period length) starts again at 1; a row some instance whose clock runs a little
    # ahead already moved to the next window keeps counting there, so windows never go back.
    return (
        f"INSERT INTO {table} ({key}, {seconds}, {index}, {hits})"  # noqa: S608
        " VALUES (%s, %s, %s, 1)"
        f" ON CONFLICT ({key}) DO UPDATE SET"
        f" {hits} = CASE WHEN {table}.{seconds} = excluded.{seconds}"
        f" AND {table}.{index} >= excluded.{index} THEN {table}.{hits} + 1 ELSE 1 END,"
        f" {index} = CASE WHEN {table}.{seconds} = excluded.{seconds}"
        f" THEN {greatest}({table}.{index}, excluded.{index}) ELSE excluded.{index} END,"
        f" {seconds} = excluded.{seconds}"
        f" RETURNING {hits}, {index}"
    )


def count_hit(key: str, *, seconds: int, now: float) -> tuple[int, int]:
    """Count one request of ``key`` in the fixed window of ``seconds`` holding ``now`` (seconds
    since the epoch); returns (requests in that window so far, this one included; the window)."""
    params: list[str | int] = [key, seconds, int(now // seconds)]
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        # A count is worth no disk flush: losing the last few to a crash of the database only
        # forgives a few requests. Without this every API request waited for one.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
            cursor.execute(_upsert_sql(), params)
            hits, index = cursor.fetchone()
    else:
        with connection.cursor() as cursor:
            cursor.execute(_upsert_sql(), params)
            hits, index = cursor.fetchone()
    return int(hits), int(index)


class AccountRateThrottle(BaseThrottle):
    """``CONSOLE_API_RATE`` requests per account (e.g. ``600/m``) in fixed windows (each clock
    minute for ``/m``), counted in the database; read at each request so a changed setting
    applies without a restart; ``None`` or an empty value switches it off. A refused request is
    told to retry when its window ends."""

    scope = "agent-account"

    def __init__(self) -> None:
        # One throttle serves every request of the API: the wait belongs to the thread's request.
        self._local = threading.local()

    def allow_request(self, request: HttpRequest) -> bool:
        self._local.wait = None
        rate = getattr(settings, "CONSOLE_API_RATE", DEFAULT_RATE) or None
        if rate is None:
            return True
        user = getattr(request, "auth", None)
        if user is None or getattr(user, "pk", None) is None:
            return True  # unauthenticated requests are answered 401 before any work
        limit, seconds = parse_rate(rate)
        now = clock.now().timestamp()
        hits, index = count_hit(f"{self.scope}:{user.pk}", seconds=seconds, now=now)
        if hits <= limit:
            return True
        self._local.wait = max(1, math.ceil((index + 1) * seconds - now))
        return False

    def wait(self) -> float | None:
        return getattr(self._local, "wait", None)


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
    return max(1, math.ceil(wait)) if wait is not None else 1


class TooBusy(Exception):
    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


def live_investigations_limit() -> int:
    return int(getattr(settings, "CONSOLE_API_LIVE_INVESTIGATIONS", DEFAULT_LIVE_INVESTIGATIONS))


def live_run_stale_after() -> timedelta:
    """How long a run held within an MCP call can last at most: its wall time, one model
    call's wait past it, and a minute more. A row older than that was left by a process that
    died during the call and no longer counts."""
    seconds = float(getattr(settings, "INVESTIGATION_MAX_SECONDS", 60))
    seconds += float(getattr(settings, "LLM_TIMEOUT_SECONDS", 60)) + 60
    return timedelta(seconds=seconds)


def _live_runs(user: User) -> int:
    """Every live investigation of ``user`` in flight, whatever started it: queued or running
    for the worker (the API, the console), or held within an MCP call on any instance."""
    queued = InvestigationRequest.objects.filter(
        actor=user, state__in=[RequestState.QUEUED, RequestState.RUNNING]
    ).count()
    held = LiveRun.objects.filter(
        actor=user, started_at__gt=clock.now() - live_run_stale_after()
    ).count()
    return queued + held


def _account_locked(user: User) -> None:
    """Take the account's lock until the current transaction ends: one live-run count and its
    insert at a time per account, on every instance. PostgreSQL locks the account's row (``FOR
    NO KEY UPDATE``: rows that merely point at the account are not held up); SQLite's
    transactions take the database's write lock when they begin (``transaction_mode``
    ``IMMEDIATE``), which already serialises them."""
    if not connection.in_atomic_block:
        raise RuntimeError("the account's lock is held by a transaction: call within one")
    model = type(user)
    list(model._default_manager.select_for_update(no_key=True).filter(pk=user.pk).values("pk"))


def require_live_capacity(user: User) -> None:
    """Refuse another live investigation while the account has its limit in flight.

    Call within the transaction that then writes the run's row (``live_capacity_taken``): the
    count and the insert hold the account's lock together, so simultaneous requests of one
    account, over any transport and on any instance, cannot all see a free place."""
    _account_locked(user)
    limit = live_investigations_limit()
    if _live_runs(user) >= limit:
        raise TooBusy(TOO_MANY_LIVE.format(limit=limit), LIVE_RETRY_AFTER_SECONDS)


@contextmanager
def live_run_held(user: User) -> Iterator[None]:
    """Hold one of ``user``'s live places for a run answered within this call (the MCP tool
    ``investigate``), refused with ``TooBusy`` when none is free; freed when the call ends."""
    with transaction.atomic():
        require_live_capacity(user)
        now = clock.now()
        # Rows left by processes that died during their calls go once they no longer count.
        LiveRun.objects.filter(actor=user, started_at__lte=now - live_run_stale_after()).delete()
        held = LiveRun.objects.create(actor=user, started_at=now)
    try:
        yield
    finally:
        LiveRun.objects.filter(pk=held.pk).delete()
