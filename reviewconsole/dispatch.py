"""Events: what a write sets in motion in the apps above the one that makes it.

A lower app never imports a higher one (docs/architecture.md, "Dependency direction"), and
inside ``experience`` a subject never imports the ones above it, yet some writes concern them:
a case approved is indexed for retrieval and closes its re-review entries, a finished skill run
is reviewed after the fact, a revoked document reaches the runs that cited it. The service that
performs such a write publishes the event by name where it writes, ``dispatch(Event.CASE_STORED,
case=case)``; each app that reacts subscribes a handler in its ``AppConfig.ready`` with
:func:`dispatch_subscribe`. docs/architecture.md ("Events") lists every event, the services that
publish it and its subscribers; a test holds that list to the subscriptions.

Every handler runs in the writer's transaction, at the point of publishing, in the order the
apps subscribed (``INSTALLED_APPS``): what it writes commits or rolls back with the write, and a
handler that fails fails the write. That holds for queued background work too: the task queue
is a database table (``django_tasks_db``), so a task queued by a handler exists exactly when the
write committed, where a hook run after the commit would lose it if the process stopped in
between. Publishing outside a transaction is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from django.db import transaction

Handler = Callable[..., object]

OUTSIDE_TRANSACTION = "is published outside a transaction; its handlers belong to the write's"


class Event(StrEnum):
    """Every event, named ``<app>.<subject>.<what happened>``; the payload in each comment."""

    # case: a new case row (submitted, proposed, imported, re-certified)
    CASE_STORED = "experience.case.stored"
    # lesson: a new candidate lesson row (submitted, proposed, imported, drafted)
    LESSON_STORED = "experience.lesson.stored"
    # item: a case, skill or lesson whose status was just saved (approved, rejected, superseded,
    # revoked)
    ITEM_STATUS_CHANGED = "experience.item.status_changed"
    # conflict: a lesson conflict just recorded
    LESSON_CONFLICT_OPENED = "experience.lesson_conflict.opened"
    # conflict: a lesson conflict just resolved
    LESSON_CONFLICT_CLOSED = "experience.lesson_conflict.closed"
    # run: a skill run just stored
    SKILL_RUN_STORED = "experience.skill_run.stored"
    # run_id, outcome, reviewed, actor, items ([(item_id, item_type)]): a run's outcome just
    # reported (or changed)
    RUN_OUTCOME_REPORTED = "experience.run_outcome.reported"
    # investigation: an investigation just stored
    INVESTIGATION_STORED = "investigations.investigation.stored"
    # no payload: a synonym set or deleted
    LEXICON_CHANGED = "knowledge.lexicon.changed"
    # document_id, tenant, actor, reason: a document version just revoked; each handler answers
    # what the revocation reached ({"skills": [...], "runs": [...]}), stored with it
    DOCUMENT_REVOKED = "knowledge.document.revoked"


_subscribers: dict[Event, list[Handler]] = {event: [] for event in Event}


class OutsideTransaction(RuntimeError):
    pass


def dispatch_subscribe(event: Event, handler: Handler) -> None:
    """Run ``handler(**payload)`` whenever ``event`` is published (once, however often asked)."""
    if handler not in _subscribers[event]:
        _subscribers[event].append(handler)


def subscribers(event: Event) -> tuple[Handler, ...]:
    return tuple(_subscribers[event])


def dispatch(event: Event, **payload: object) -> list[object]:
    """Run every handler of ``event`` with ``payload`` in the caller's transaction; returns their
    answers in the order they subscribed."""
    if not transaction.get_connection().in_atomic_block:
        raise OutsideTransaction(f"{event} {OUTSIDE_TRANSACTION}")
    return [handler(**payload) for handler in _subscribers[event]]
