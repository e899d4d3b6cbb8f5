"""Liveness and readiness for load balancers and process managers, and the workers' heartbeat.

- ``/healthz``: the process answers. Touches no database, needs no login.
- ``/readyz``: the process can serve: the database answers, every migration the code has is
  applied, and (with the database task backend) some worker wrote its heartbeat within
  ``READY_WORKER_MAX_AGE`` seconds. 200 when all hold, 503 otherwise; the body names each check
  and its status, never an error text, host, user or migration name.

Both are answered by :class:`HealthMiddleware`, first in ``MIDDLEWARE``: before sessions (no
session row read or written), the locale, CSRF, the host check and the HTTPS redirect, so a
load balancer's probe over plain HTTP with the instance's address as host gets the answer and
not a redirect or a 400. They are exact paths, ``GET``/``HEAD`` only, and carry no rate limit.

The heartbeat: every ``manage.py worker`` writes a ``WorkerHeartbeat`` row keyed by its worker
id on each turn of its loop (at most once every ``WORKER_HEARTBEAT_SECONDS``) and, while a task
runs, from a small thread at the same pace, so a worker busy with a long task stays "recent".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, connections
from django.http import HttpRequest, HttpResponse, JsonResponse

from reviewconsole import clock

logger = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"

# Rows of workers not seen for this long are removed when a worker starts.
HEARTBEAT_PRUNE_AFTER = timedelta(days=1)

OK = "ok"
FAILING = "failing"
SKIPPED = "skipped"  # not checked because a check it depends on failed
DISABLED = "disabled"  # switched off by settings, or not applicable to this deployment


def heartbeat_interval() -> float:
    return float(getattr(settings, "WORKER_HEARTBEAT_SECONDS", 10.0))


def worker_max_age() -> float:
    return float(getattr(settings, "READY_WORKER_MAX_AGE", 120.0))


# --- the heartbeat -------------------------------------------------------------------------------


def heartbeat_beat(worker_id: str, *, started_at: datetime, now: datetime | None = None) -> None:
    """Record that worker ``worker_id`` is alive at ``now``."""
    from reviewconsole.models import WorkerHeartbeat

    moment = now or clock.now()
    updated = WorkerHeartbeat.objects.filter(worker_id=worker_id).update(last_seen=moment)
    if not updated:
        WorkerHeartbeat.objects.update_or_create(
            worker_id=worker_id, defaults={"started_at": started_at, "last_seen": moment}
        )


def heartbeat_forget(worker_id: str) -> None:
    """A worker stopping cleanly removes its row."""
    from reviewconsole.models import WorkerHeartbeat

    WorkerHeartbeat.objects.filter(worker_id=worker_id).delete()


def heartbeats_prune(*, now: datetime | None = None) -> int:
    from reviewconsole.models import WorkerHeartbeat

    cutoff = (now or clock.now()) - HEARTBEAT_PRUNE_AFTER
    deleted, _ = WorkerHeartbeat.objects.filter(last_seen__lt=cutoff).delete()
    return deleted


class Heartbeat:
    """One worker's heartbeat: :meth:`beat` from the loop, :meth:`during` around a task.

    ``beat`` writes when the last write is at least ``WORKER_HEARTBEAT_SECONDS`` old (one UPDATE
    per interval, however fast the loop turns). A failed write is logged, never raised: the
    heartbeat must not stop the worker it reports on.
    """

    def __init__(self, worker_id: str, *, monotonic: Callable[[], float] | None = None) -> None:
        import time

        self.worker_id = worker_id
        self.started_at = clock.now()
        self._monotonic = monotonic or time.monotonic
        self._last: float | None = None
        self._lock = threading.Lock()

    def beat(self, *, force: bool = False) -> bool:
        with self._lock:
            now = self._monotonic()
            if not force and self._last is not None and now - self._last < heartbeat_interval():
                return False
            try:
                heartbeat_beat(self.worker_id, started_at=self.started_at)
            except DatabaseError:
                logger.warning("Worker %s: heartbeat not written", self.worker_id, exc_info=True)
                return False
            self._last = now
            return True

    def during(self) -> _BeatWhileRunning:
        return _BeatWhileRunning(self)

    def forget(self) -> None:
        try:
            heartbeat_forget(self.worker_id)
        except DatabaseError:
            logger.warning("Worker %s: heartbeat not removed", self.worker_id, exc_info=True)


class _BeatWhileRunning:
    """A thread that beats every interval until the block it guards ends."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self.heartbeat = heartbeat
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)

    def _run(self) -> None:
        try:
            while not self.done.wait(heartbeat_interval()):
                self.heartbeat.beat(force=True)
        finally:
            connections.close_all()

    def __enter__(self) -> _BeatWhileRunning:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


# --- readiness -----------------------------------------------------------------------------------


@cache
def _code_migrations() -> tuple[tuple[tuple[str, str], tuple[tuple[str, str], ...]], ...]:
    """Every migration of the installed apps, with what it replaces: read from disk once."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    return tuple((key, tuple(loader.graph.nodes[key].replaces or ())) for key in loader.graph.nodes)


def unapplied_migrations_count() -> int:
    from django.db.migrations.recorder import MigrationRecorder

    applied = set(MigrationRecorder(connection).applied_migrations())
    return sum(
        1
        for key, replaces in _code_migrations()
        if key not in applied and not (replaces and all(r in applied for r in replaces))
    )


def _database_check() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"status": OK}


def _migrations_check() -> dict[str, Any]:
    unapplied = unapplied_migrations_count()
    return {"status": OK if unapplied == 0 else FAILING, "unapplied": unapplied}


def _tasks_use_database() -> bool:
    backend = str(settings.TASKS.get("default", {}).get("BACKEND", ""))
    return backend.startswith("django_tasks_db.")


def _workers_check() -> dict[str, Any]:
    from reviewconsole.models import WorkerHeartbeat

    max_age = worker_max_age()
    if max_age <= 0 or not _tasks_use_database():
        return {"status": DISABLED}
    now = clock.now()
    recent = WorkerHeartbeat.objects.filter(last_seen__gte=now - timedelta(seconds=max_age))
    alive = recent.count()
    newest = WorkerHeartbeat.objects.order_by("-last_seen").values_list("last_seen", flat=True)
    last_seen = newest.first()
    answer: dict[str, Any] = {"status": OK if alive else FAILING, "alive": alive}
    answer["last_seen_seconds"] = (
        None if last_seen is None else max(0, round((now - last_seen).total_seconds()))
    )
    return answer


def readiness() -> tuple[bool, dict[str, Any]]:
    """Each check's status; ready when none is failing or skipped."""
    checks: dict[str, Any] = {}
    try:
        checks["database"] = _database_check()
    except DatabaseError:
        logger.warning("Readiness: the database does not answer", exc_info=True)
        checks["database"] = {"status": FAILING}
        checks["migrations"] = {"status": SKIPPED}
        checks["workers"] = {"status": SKIPPED}
    else:
        for name, check in (("migrations", _migrations_check), ("workers", _workers_check)):
            try:
                checks[name] = check()
            except DatabaseError:
                logger.warning("Readiness: the %s check failed", name, exc_info=True)
                checks[name] = {"status": FAILING}
    ready = all(check["status"] in (OK, DISABLED) for check in checks.values())
    return ready, checks


# --- the endpoints -------------------------------------------------------------------------------


def _answer(body: dict[str, Any], status: int) -> HttpResponse:
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def healthz() -> HttpResponse:
    return _answer({"status": OK}, 200)


def readyz() -> HttpResponse:
    ready, checks = readiness()
    body = {"status": "ready" if ready else "not_ready", "checks": checks}
    return _answer(body, 200 if ready else 503)


class HealthMiddleware:
    """Answers ``/healthz`` and ``/readyz`` before any other middleware runs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info in (HEALTH_PATH, READY_PATH):
            if request.method not in ("GET", "HEAD"):
                response = _answer({"status": "method_not_allowed"}, 405)
                response["Allow"] = "GET, HEAD"
                return response
            return healthz() if request.path_info == HEALTH_PATH else readyz()
        return self.get_response(request)
