"""Prometheus metrics (the official ``prometheus_client``), served at ``/metrics`` to allowed callers.

Measured in the processes that serve requests:

- ``console_http_request_duration_seconds{view, method, status}``: every request but the probes,
  by the name of the view that answered (``api-v1:knowledge_search``, ``experience:queue``;
  ``unresolved`` when no URL matched), so the label's values are the URL names and no path.
- ``console_search_duration_seconds{service, status}``: knowledge search (``service="knowledge"``)
  and experience retrieval (``"experience"``), whoever calls them (console, API, MCP, skills,
  investigations), by the answer's status (``error`` when it raised).

Read from the database at each scrape (so every instance answers the same, and a worker need
not serve anything):

- ``console_tasks{status}``: background task rows by status (``READY``, ``RUNNING``,
  ``FAILED``, ``SUCCESSFUL``; ``prune_db_task_results`` removes old ones);
  ``console_tasks_due``: tasks ready to run now (the queue depth);
  ``console_tasks_oldest_due_age_seconds``: how long the oldest of them has been due (since it
  was enqueued, or since the time it was deferred to);
- ``console_workers_alive``: workers whose heartbeat is within ``READY_WORKER_MAX_AGE``;
- what apps register with :func:`scrape_gauge_register` (investigations by status).

Several processes (gunicorn workers): set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory
writable by all of them, before they start; each process then writes its samples there and a
scrape of any of them adds up all (``prometheus_client.multiprocess``). Without it, each process
answers its own samples only.

Access (``metrics_allowed``): a scrape is answered when it carries ``Authorization: Bearer
METRICS_TOKEN`` (compared in constant time), or when it comes, not through a proxy, from an
address in ``METRICS_ALLOWED_NETWORKS``; anything else is a 404, as if there were no such page.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reviewconsole import clock

METRICS_PATH = "/metrics"

# Requests: from a millisecond to half a minute (a page, an API call, an export).
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Searches: finer at the low end, where the index answers.
SEARCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

REQUEST_DURATION = Histogram(
    "console_http_request_duration_seconds",
    "Time to answer a request, by the view that answered it, the method and the status code.",
    ["view", "method", "status"],
    buckets=REQUEST_BUCKETS,
)
SEARCH_DURATION = Histogram(
    "console_search_duration_seconds",
    "Time of one knowledge search or experience retrieval, by service and answer status.",
    ["service", "status"],
    buckets=SEARCH_BUCKETS,
)

P = ParamSpec("P")
R = TypeVar("R")


def search_timed(service: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Time the decorated search of ``service``; its answer's ``status`` labels the sample."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @wraps(function)
        def timed(*args: P.args, **kwargs: P.kwargs) -> R:
            started = time.perf_counter()
            status = "error"
            try:
                answer = function(*args, **kwargs)
                if isinstance(answer, Mapping):
                    status = str(answer.get("status", "ok"))
                return answer
            finally:
                SEARCH_DURATION.labels(service, status).observe(time.perf_counter() - started)

        return timed

    return decorate


# --- gauges read from the database at each scrape ------------------------------------------------


@dataclass(frozen=True)
class ScrapeGauge:
    name: str
    documentation: str
    labels: tuple[str, ...]
    read: Callable[[], Iterable[tuple[tuple[str, ...], float]]]


_scrape_gauges: list[ScrapeGauge] = []


def scrape_gauge_register(gauge: ScrapeGauge) -> None:
    """Add a gauge read at each scrape (apps register theirs in ``ready``)."""
    if all(existing.name != gauge.name for existing in _scrape_gauges):
        _scrape_gauges.append(gauge)


def _task_gauges() -> Iterator[GaugeMetricFamily]:
    from django.db.models import Case, Count, F, Min, When
    from django.db.models.functions import Greatest
    from django_tasks_db.models import DBTaskResult, get_date_max

    by_status = GaugeMetricFamily(
        "console_tasks", "Background task rows by status.", labels=["status"]
    )
    counts = dict(
        DBTaskResult.objects.order_by()
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    for status in ("READY", "RUNNING", "FAILED", "SUCCESSFUL"):
        by_status.add_metric([status], counts.get(status, 0))
    yield by_status

    now = clock.now()
    # A task is due from when it was enqueued, or from the time it was deferred to.
    due_since = Case(
        When(run_after=get_date_max(), then=F("enqueued_at")),
        default=Greatest("run_after", "enqueued_at"),
    )
    due = DBTaskResult.objects.ready().order_by().aggregate(n=Count("id"), oldest=Min(due_since))
    yield GaugeMetricFamily(
        "console_tasks_due", "Tasks ready to run now (the queue's depth).", value=due["n"]
    )
    oldest = due["oldest"]
    age = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
    yield GaugeMetricFamily(
        "console_tasks_oldest_due_age_seconds",
        "How long the oldest task ready to run has been due (0: none).",
        value=age,
    )


def _worker_gauge() -> GaugeMetricFamily:
    from reviewconsole.models import WorkerHeartbeat

    max_age = float(getattr(settings, "READY_WORKER_MAX_AGE", 120.0))
    limit = clock.now() - timedelta(seconds=max_age if max_age > 0 else 120.0)
    alive = WorkerHeartbeat.objects.filter(last_seen__gte=limit).count()
    return GaugeMetricFamily(
        "console_workers_alive", "Workers whose heartbeat is recent.", value=alive
    )


class DatabaseCollector(Collector):
    """The gauges the database answers, read at each scrape."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from _task_gauges()
        yield _worker_gauge()
        for gauge in _scrape_gauges:
            family = GaugeMetricFamily(gauge.name, gauge.documentation, labels=list(gauge.labels))
            for labels, value in gauge.read():
                family.add_metric(list(labels), value)
            yield family


def exposition() -> bytes:
    """Every metric, in Prometheus' text format."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        processes = CollectorRegistry()
        multiprocess.MultiProcessCollector(processes)  # type: ignore[no-untyped-call]
        measured = generate_latest(processes)
    else:
        measured = generate_latest(REGISTRY)
    database = CollectorRegistry(auto_describe=False)
    database.register(DatabaseCollector())
    return measured + generate_latest(database)


# --- access --------------------------------------------------------------------------------------

PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def _networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    given = getattr(settings, "METRICS_ALLOWED_NETWORKS", ())
    return [ipaddress.ip_network(value, strict=False) for value in given]


def metrics_allowed(request: HttpRequest) -> bool:
    token = str(getattr(settings, "METRICS_TOKEN", "") or "")
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header.removeprefix("Bearer ").encode(), token.encode())
    # An address is trusted only when it is the caller's own: a request that came through a
    # proxy (the load balancer, on this host or not) carries the proxy's address.
    if any(request.META.get(name) for name in PROXY_HEADERS):
        return False
    try:
        address = ipaddress.ip_address(str(request.META.get("REMOTE_ADDR", "")))
    except ValueError:
        return False
    return any(address in network for network in _networks())


def metrics_answer(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD") or not metrics_allowed(request):
        return HttpResponse(status=404, content_type="text/plain; charset=utf-8")
    response = HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


# --- request latency -----------------------------------------------------------------------------


def _view_name(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unresolved"
    return str(match.view_name or match.route or "unnamed")


class RequestMetricsMiddleware:
    """Times every request it sees and labels it with the view that answered."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        REQUEST_DURATION.labels(
            _view_name(request), _method(request.method), str(response.status_code)
        ).observe(time.perf_counter() - started)
        return response


KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _method(method: str | None) -> str:
    # A label value per method a client invents would grow the series without bound.
    return method if method in KNOWN_METHODS else "other"
