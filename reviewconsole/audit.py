"""Writing and verifying audit events. Write inside the transaction of the change recorded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import connection, transaction

from reviewconsole import clock
from reviewconsole.chain import GENESIS, BrokenLink, ChainedEvent, event_hash, first_broken_link
from reviewconsole.models import Action, Event

# An arbitrary constant naming the PostgreSQL advisory lock that serialises chain appends.
CHAIN_LOCK_KEY = 7_300_415_001


def _lock_chain() -> None:
    """Hold the chain's tail until commit so two writers never link to the same predecessor.

    SQLite needs nothing: its IMMEDIATE transactions already admit one writer at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])


def event_record(
    *,
    actor: User | AnonymousUser | None,
    action: Action,
    target: str,
    reason: str = "",
    details: dict[str, Any] | None = None,
) -> Event:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit events must be written inside the transaction they record")
    real_actor = actor if isinstance(actor, User) else None
    actor_name = real_actor.get_username() if real_actor is not None else "system"
    details = details or {}
    _lock_chain()
    prev_hash = Event.objects.order_by("-id").values_list("hash", flat=True).first() or GENESIS
    created_at = clock.now()
    return Event.objects.create(
        created_at=created_at,
        actor=real_actor,
        actor_name=actor_name,
        action=action,
        target=target,
        reason=reason,
        details=details,
        prev_hash=prev_hash,
        hash=event_hash(
            prev_hash=prev_hash,
            created_at=created_at,
            actor_name=actor_name,
            action=str(action),
            target=target,
            reason=reason,
            details=details,
        ),
    )


def _chained_events() -> Iterator[ChainedEvent]:
    rows = Event.objects.order_by("id").values_list(
        "id",
        "created_at",
        "actor_name",
        "action",
        "target",
        "reason",
        "details",
        "prev_hash",
        "hash",
    )
    for row in rows.iterator(chunk_size=5000):
        yield ChainedEvent(*row)


def audit_verify() -> tuple[int, BrokenLink | None]:
    """(events checked, the first broken link or None)."""
    checked = 0

    def counted() -> Iterator[ChainedEvent]:
        nonlocal checked
        for event in _chained_events():
            checked += 1
            yield event

    broken = first_broken_link(counted())
    return checked, broken
