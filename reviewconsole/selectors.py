"""Reads for the console shell: dashboard counts and the audit log (listing and CSV export)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from experience.models import Case, Reference, Skill, Status
from knowledge.models import Document
from reviewconsole.models import Event
from reviewconsole.timeparse import to_utc_iso

RECENT_DAYS = 7
REVOKED_DAYS = 30
EXPIRING_DAYS = 30
UNUSED_DAYS = 90


@dataclass(frozen=True)
class DashboardCounts:
    candidates: int
    recently_approved: int
    recently_revoked: int
    due_for_rereview: int
    draft_documents: int | None = None
    revoked_documents: int | None = None


def _lifecycle_counts(
    model: type[Case] | type[Skill], now: datetime, tenants: frozenset[str] | None
) -> dict[str, int]:
    # Approved items that expire soon, or that no run has read for a long time, go back to a
    # reviewer: a memory nobody uses is one nobody has recently seen hold up.
    recently_read = Reference.objects.filter(
        item_id=OuterRef("pk"), read_at__gte=now - timedelta(days=UNUSED_DAYS)
    )
    approved = Q(status=Status.APPROVED)
    stale = approved & (
        Q(valid_to__lt=now + timedelta(days=EXPIRING_DAYS))
        | (Q(approved_at__lt=now - timedelta(days=UNUSED_DAYS)) & ~Q(Exists(recently_read)))
    )
    rows = model.objects.all()
    if tenants is not None:
        rows = rows.filter(tenant__in=sorted(tenants))
    return rows.aggregate(
        candidates=Count("pk", filter=Q(status=Status.CANDIDATE)),
        recently_approved=Count(
            "pk", filter=approved & Q(approved_at__gte=now - timedelta(days=RECENT_DAYS))
        ),
        recently_revoked=Count(
            "pk",
            filter=Q(status=Status.REVOKED, revoked_at__gte=now - timedelta(days=REVOKED_DAYS)),
        ),
        due_for_rereview=Count("pk", filter=stale),
    )


def dashboard_counts(
    *, now: datetime, with_documents: bool, tenants: frozenset[str] | None = None
) -> DashboardCounts:
    """Counts over every tenant, or over ``tenants`` only."""
    cases = _lifecycle_counts(Case, now, tenants)
    skills = _lifecycle_counts(Skill, now, tenants)
    documents: dict[str, Any] = {}
    if with_documents:
        rows = Document.objects.all()
        if tenants is not None:
            rows = rows.filter(tenant__in=sorted(tenants))
        documents = rows.aggregate(
            draft_documents=Count("pk", filter=Q(approved=False, revoked=False)),
            revoked_documents=Count("pk", filter=Q(revoked=True)),
        )
    return DashboardCounts(
        **{name: cases[name] + skills[name] for name in cases},
        **documents,
    )


# --- audit log ------------------------------------------------------------------------------


def events_filtered(
    *,
    actor: str = "",
    action: str = "",
    target: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[Event]:
    """Events newest first; ``since`` inclusive, ``until`` exclusive."""
    events = Event.objects.all()
    if actor:
        events = events.filter(actor_name=actor)
    if action:
        events = events.filter(action=action)
    if target:
        events = events.filter(target__icontains=target)
    if since is not None:
        events = events.filter(created_at__gte=since)
    if until is not None:
        events = events.filter(created_at__lt=until)
    return events.order_by("-created_at", "-id")


CSV_HEADER = ("time", "actor", "action", "target", "reason", "details")
# A spreadsheet runs a cell that starts with one of these as a formula; reasons are user text.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: str) -> str:
    return f"'{value}" if value.startswith(FORMULA_PREFIXES) else value


class _Echo:
    def write(self, value: str) -> str:
        return value


def events_csv_rows(**filters: Any) -> Iterator[str]:
    """CSV lines of the filtered audit log, produced row by row for a streaming response."""
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_HEADER)
    rows = events_filtered(**filters).values_list(
        "created_at", "actor_name", "action", "target", "reason", "details"
    )
    for created_at, actor_name, action, target, reason, details in rows.iterator(chunk_size=2000):
        yield writer.writerow(
            (
                to_utc_iso(created_at),
                _cell(actor_name),
                action,
                _cell(target),
                _cell(reason),
                _cell(json.dumps(details, ensure_ascii=False, sort_keys=True)),
            )
        )
