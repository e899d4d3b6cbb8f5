"""Intake: investigation threads are imported as raw material, and candidates built from them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction

from curation.checks import BUILD_REFUSED, IMPORT_REFUSED
from curation.domain.threads import (
    CandidateDraft,
    Pick,
    candidate_case,
    parse_thread,
    require_thread_tenant,
)
from curation.models import Thread, ThreadMessage
from curation.selectors.threads import thread_units
from experience.cases.models import Case
from experience.cases.schema import parse_case
from experience.cases.services import case_submit
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import ADD_CASE, require
from reviewconsole.tenancy import require_input_tenant

if TYPE_CHECKING:
    from django.contrib.auth.models import User

THREAD_CONFLICT = "a thread with this id was imported with other content"


@transaction.atomic
def thread_import(*, data: object, actor: User, now: datetime | None = None) -> tuple[Thread, bool]:
    """Store a thread as imported. Identical content is a no-op; other content under the same
    id is refused (a thread is raw material that evidence cites, so it never changes).

    The thread's ``tenant`` must be one the actor may use (refused naming ``tenant``)."""
    require(actor, ADD_CASE, message=IMPORT_REFUSED)
    content = parse_thread(data)
    now = now or clock.now()
    require_input_tenant(actor, content.tenant, field="tenant", create=True, now=now)
    # Thread ids are per tenant: another tenant's thread of this id is not looked at, so the
    # answer is the one for an id nobody has.
    existing = Thread.objects.filter(tenant=content.tenant, thread_id=content.id).first()
    if existing is not None:
        if existing.content_hash != content.content_hash:
            raise ValidationFailure("id", f"{content.id}: {THREAD_CONFLICT}")
        return existing, False
    thread = Thread.objects.create(
        thread_id=content.id,
        tenant=content.tenant,
        title=content.title,
        source=content.source,
        scope=dict(content.scope),
        content_hash=content.content_hash,
        imported_by=actor,
        imported_at=now,
    )
    ThreadMessage.objects.bulk_create(
        ThreadMessage(
            thread=thread,
            message_id=message.id,
            position=position,
            author=message.author,
            role=message.role,
            sent_at=message.time,
            text=message.text,
            attachments=[{"name": a.name, "text": a.text} for a in message.attachments],
        )
        for position, message in enumerate(content.messages)
    )
    event_record(
        actor=actor,
        action=Action.THREAD_IMPORT,
        target=f"thread:{thread.thread_id}",
        details={
            # The audit log names the thread by its title beside its id.
            "title": content.title,
            "tenant": content.tenant,
            "messages": len(content.messages),
            "content_hash": content.content_hash,
        },
        at=now,
    )
    return thread, True


@transaction.atomic
def candidate_build(
    *,
    thread: Thread,
    picks: Sequence[Pick],
    draft: CandidateDraft,
    actor: User,
    now: datetime | None = None,
) -> tuple[Case, bool]:
    """Submit the case the operator assembled from picked messages, through the normal
    submission (console), so it lands in the review queue unchecked.

    Only a user who may see the thread builds from it, and the case's scope tenant is the
    thread's (refused naming ``scope.tenant``): evidence never moves to another tenant."""
    require(actor, ADD_CASE, thread.tenant, message=BUILD_REFUSED)
    require_thread_tenant(thread.tenant, draft.scope)
    data = candidate_case(thread_units(thread), picks, draft)
    now = now or clock.now()
    case, created = case_submit(content=parse_case(data), actor=actor, now=now)
    if created:
        event_record(
            actor=actor,
            action=Action.THREAD_BUILD,
            target=case.id,
            details={
                "thread": thread.thread_id,
                "picked": [{"unit": p.unit, "use": p.use} for p in picks],
            },
            at=now,
        )
    return case, created
