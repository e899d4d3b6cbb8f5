"""Reads of the audit log: the filtered listing and its CSV export.

The log spans every tenant, so both are for users whom no tenant limits and who hold the
permission to view it; they refuse anyone else (``permissions.require``) before reading.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from reviewconsole.models import Event
from reviewconsole.permissions import VIEW_EVENT, require

AUDIT_LOG_REFUSED = "the audit log spans every tenant: reading it needs an admin no tenant limits"


def events_filtered(
    *,
    viewer: User | AnonymousUser | None,
    actor: str = "",
    action: str = "",
    target: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[Event]:
    """Events newest first, as ``viewer`` may read them; ``since`` inclusive, ``until``
    exclusive. ``actor`` filters by the acting user's name."""
    require(viewer, VIEW_EVENT, deployment_wide=True, message=AUDIT_LOG_REFUSED)
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


def events_csv_rows(
    *, viewer: User | AnonymousUser | None, zone: str = "UTC", **filters: Any
) -> Iterator[str]:
    """CSV lines of the filtered audit log, produced row by row for a streaming response; the
    viewer is refused here, before the response starts. Times are in ``zone`` (the viewer's, as
    on the page), which the time column's header names; each keeps its offset."""
    rows = events_filtered(viewer=viewer, **filters).values_list(
        "created_at", "actor_name", "action", "target", "reason", "details"
    )
    return _csv_lines(rows, ZoneInfo(zone))


def _csv_lines(rows: Any, zone: ZoneInfo) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow((f"{CSV_HEADER[0]} ({zone.key})", *CSV_HEADER[1:]))
    for created_at, actor_name, action, target, reason, details in rows.iterator(chunk_size=2000):
        yield writer.writerow(
            (
                created_at.astimezone(zone).isoformat(),
                _cell(actor_name),
                action,
                _cell(target),
                _cell(reason),
                _cell(json.dumps(details, ensure_ascii=False, sort_keys=True)),
            )
        )
