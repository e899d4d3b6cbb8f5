"""Reads of the audit log: the filtered listing and its CSV export."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from reviewconsole.models import Event
from reviewconsole.timeparse import to_utc_iso


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
