"""The bus: what a write sets in motion in the apps *above* the one that makes it.

A lower app never imports a higher one (docs/architecture.md, "Dependency direction"), yet some
writes concern them: a case stored gets its near-duplicate links in ``curation``, an item that
leaves ``approved`` closes its re-review entries and, revoked, mails its approvers, a finished
skill run is reviewed after the fact. Everything a write sets in motion in its own app or below
it is called by name in the write (``experience.review.decisions`` names the index, the lesson
inputs and the impact of every decision); only these upward effects go through here.

Each event is one frozen dataclass, defined beside the writes that publish it and carrying the
write's moment (``now``); the service publishes it where it writes,
``dispatch(CaseStored(case=case, now=now))``, and each app that reacts subscribes a handler, which
takes the event and returns nothing, in its ``AppConfig.ready`` with :func:`dispatch_subscribe`.
docs/architecture.md ("Events") lists every event, the services that publish it and its
subscribers; a test holds that list to the code.

Every handler runs in the writer's transaction, at the point of publishing, in the order the
apps subscribed (``INSTALLED_APPS``): what it writes commits or rolls back with the write, and a
handler that fails fails the write. That holds for queued background work too: the task queue
is a database table (``django_tasks_db``), so a task queued by a handler exists exactly when the
write committed, where a hook run after the commit would lose it if the process stopped in
between. Publishing outside a transaction is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db import transaction

OUTSIDE_TRANSACTION = "is published outside a transaction; its handlers belong to the write's"


@dataclass(frozen=True, kw_only=True)
class Published:
    """What every event carries: the moment of the write that publishes it. Each event is a
    frozen subclass named for what happened (``CaseStored``, ``ItemStatusChanged``…)."""

    now: datetime


E = TypeVar("E", bound=Published)
Handler = Callable[[Any], None]

_subscribers: dict[type[Published], list[Handler]] = {}


class OutsideTransaction(RuntimeError):
    pass


def dispatch_subscribe(event_type: type[E], handler: Callable[[E], None]) -> None:
    """Run ``handler(event)`` whenever an event of ``event_type`` is published (once, however
    often asked)."""
    handlers = _subscribers.setdefault(event_type, [])
    if handler not in handlers:
        handlers.append(handler)


def subscribers(event_type: type[Published]) -> tuple[Handler, ...]:
    return tuple(_subscribers.get(event_type, ()))


def dispatch(event: Published) -> None:
    """Run every handler of ``event``'s type in the caller's transaction, in the order they
    subscribed. Handlers answer nothing: a write learns nothing back from the apps above it."""
    if not transaction.get_connection().in_atomic_block:
        raise OutsideTransaction(f"{type(event).__name__} {OUTSIDE_TRANSACTION}")
    for handler in _subscribers.get(type(event), ()):
        handler(event)
