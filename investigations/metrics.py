"""What ``/metrics`` reads of investigations at each scrape (``reviewconsole.metrics``)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count

from investigations.models import (
    Investigation,
    InvestigationRequest,
    InvestigationStatus,
    RequestState,
)
from reviewconsole.metrics import ScrapeGauge, scrape_gauge_register


def investigations_by_status() -> Iterator[tuple[tuple[str, ...], float]]:
    counts = dict(Investigation.objects.order_by().values_list("status").annotate(n=Count("id")))
    for status in InvestigationStatus.values:
        yield (status,), counts.get(status, 0)


def requests_by_state() -> Iterator[tuple[tuple[str, ...], float]]:
    counts = dict(
        InvestigationRequest.objects.order_by().values_list("state").annotate(n=Count("id"))
    )
    for state in RequestState.values:
        yield (state,), counts.get(state, 0)


def gauges_register() -> None:
    scrape_gauge_register(
        ScrapeGauge(
            "console_investigations",
            "Investigations recorded, by status.",
            ("status",),
            investigations_by_status,
        )
    )
    scrape_gauge_register(
        ScrapeGauge(
            "console_investigation_requests",
            "Investigations asked for in the background (API, console), by state.",
            ("state",),
            requests_by_state,
        )
    )
