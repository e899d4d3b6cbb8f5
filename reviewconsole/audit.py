"""Writing audit events. Call inside the transaction of the change being recorded."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from reviewconsole import clock
from reviewconsole.models import Action, Event


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
    return Event.objects.create(
        created_at=clock.now(),
        actor=real_actor,
        actor_name=real_actor.get_username() if real_actor is not None else "system",
        action=action,
        target=target,
        reason=reason,
        details=details or {},
    )
