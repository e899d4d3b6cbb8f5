"""Reads of the console shell: the audit log (the filtered listing and its CSV export) and the
users an admin manages.

The log spans every tenant, so both are for users whom no tenant limits and who hold the
permission to view it; they refuse anyone else (``permissions.require``) before reading. The
users are those ``reviewconsole.services.users_manageable_by`` lets the viewer manage.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Prefetch, QuerySet

from reviewconsole.models import Event, SignOnIdentity, TenantMembership
from reviewconsole.permissions import VIEW_EVENT, require
from reviewconsole.roles import Role
from reviewconsole.services import users_manageable_by

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


@dataclass(frozen=True)
class UserRow:
    """A user as the console's user list shows it: its role (a superuser's is none, being made
    on the shell) and its tenants (none: deployment-wide)."""

    user: User
    role: str
    tenants: list[str]


def user_rows(viewer: User) -> list[UserRow]:
    """The users ``viewer`` manages, by username, with their role and tenants in three queries."""
    users = (
        users_manageable_by(viewer)
        .prefetch_related(
            "groups",
            Prefetch("tenant_memberships", queryset=TenantMembership.objects.order_by("tenant")),
        )
        .order_by("username")
    )
    rows = []
    for user in users:
        names = {group.name for group in user.groups.all()}
        role = next((r for r in Role.values if r in names), "")
        rows.append(UserRow(user, role, [m.tenant for m in user.tenant_memberships.all()]))
    return rows


def user_signs_on(user: User) -> bool:
    """Whether ``user`` logs in through the provider (its role and tenants come from there)."""
    return SignOnIdentity.objects.filter(user=user).exists()


def user_visible(viewer: User, username: str) -> User | None:
    """The user named ``username`` if ``viewer`` manages it, else None (answered as not found)."""
    return users_manageable_by(viewer).filter(username=username).first()
