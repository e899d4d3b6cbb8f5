"""Reads of imported threads: the threads a user sees, their messages as pickable units, the
cases citing them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Count, QuerySet

from curation.domain.threads import Attachment, Message, Unit
from curation.domain.threads import thread_units as message_units
from curation.models import Thread, ThreadMessage
from experience.cases.models import Case
from reviewconsole.tenancy import visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    Viewer = User | AnonymousUser | None


# --- threads -----------------------------------------------------------------------------------


def thread_list(user: Viewer) -> QuerySet[Thread]:
    """The threads of the tenants ``user`` may see."""
    return (
        visible(Thread.objects.select_related("imported_by"), user)
        .annotate(message_count=Count("messages"))
        .order_by("-imported_at", "-id")
    )


def threads_named(thread_id: str, user: Viewer, tenant: str | None = None) -> list[Thread]:
    """The threads ``thread_id`` names among the tenants ``user`` sees (only ``tenant``'s when
    given): thread ids are chosen per tenant, so a deployment-wide user may see several."""
    threads = visible(Thread.objects.select_related("imported_by"), user).filter(
        thread_id=thread_id
    )
    if tenant is not None:
        threads = threads.filter(tenant=tenant)
    return list(threads.order_by("tenant"))


def thread_get(thread_id: str, user: Viewer, tenant: str | None = None) -> Thread | None:
    """The thread, or None when there is none, it is of a tenant ``user`` may not see, or
    ``user`` sees that id in several tenants and none was named."""
    named = threads_named(thread_id, user, tenant)
    return named[0] if len(named) == 1 else None


def thread_messages(thread: Thread) -> list[ThreadMessage]:
    return list(thread.messages.order_by("position"))


def thread_units(thread: Thread) -> list[Unit]:
    messages = [
        Message(
            id=m.message_id,
            author=m.author,
            role=m.role,
            time=m.sent_at,
            text=m.text,
            attachments=tuple(Attachment(a["name"], a["text"]) for a in m.attachments),
        )
        for m in thread.messages.order_by("position")
    ]
    return message_units(thread.thread_id, messages)


def cases_citing_thread(thread: Thread, user: Viewer) -> QuerySet[Case]:
    """Cases of the thread's tenant citing it (``thread:ID`` names a thread within a tenant)."""
    prefix = f"thread:{thread.thread_id}#"
    return (
        visible(Case.objects.filter(tenant=thread.tenant), user)
        .filter(evidence_items__source_id__startswith=prefix)
        .distinct()
        .select_related("submitted_by")
        .order_by("-submitted_at", "id")
    )


def thread_first_sent_at(thread: Thread) -> datetime | None:
    """When the thread's first message was sent: where a candidate's validity usually starts."""
    return thread.messages.order_by("sent_at").values_list("sent_at", flat=True).first()
