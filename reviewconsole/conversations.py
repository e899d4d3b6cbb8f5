"""Review conversations and change requests, for every kind of reviewed item.

A reviewer may send a candidate back to its submitter (a :class:`ChangeRequest`, open until a
revision is resubmitted), and anyone reviewing an item or its submitter may open a thread
anchored to one evidence item, section or field of it, answer it, resolve it and reopen it.
Items are named by their string id and tenant (``reviewconsole/itemids.py``), so cases, skills,
lessons and knowledge document versions share these tables from the core.

The kinds own their rules: the caller (``experience.review.changes``, ``knowledge.services``)
looks the item up as the actor may see it (another tenant's item is an unknown one) and passes a
:class:`Subject`, with the permission that decides items of that kind. These services check
that permission (or that the actor is the submitter) and the tenant again, on the server, and
write each change with its audit event in one transaction; refused or bad input writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import (
    Action,
    ChangeRequest,
    ReviewComment,
    ReviewThread,
    ThreadStatus,
)
from reviewconsole.permissions import holds, require
from reviewconsole.tenancy import may_access, tenants_of

MAX_COMMENT = 4000
COMMENT_REQUIRED = "write a comment"
COMMENT_TOO_LONG = f"is longer than {MAX_COMMENT} characters"
NOTE_REQUIRED = "say what should change"
ANCHOR_MALFORMED = (
    "must name an evidence item, a section or a field (evidence:KEY, section:NAME, field:NAME)"
)
NOT_A_PARTICIPANT = "only a reviewer of this item's kind or its submitter may take part"
ALREADY_RESOLVED = "is already resolved"
NOT_RESOLVED = "is not resolved"
ALREADY_RETURNED = "already waits for its submitter's revision"
NOT_RESUBMITTER = "only the submitter, or a reviewer of this item's kind, may resubmit it"
NO_SUCH_THREAD = "no thread with this number on this item"

ANCHOR = re.compile(r"(evidence|section|field):[A-Za-z0-9_./-]{1,150}")


@dataclass(frozen=True)
class Subject:
    """An item as these services need it: its id and tenant, who submitted it, and the
    permission that decides items of its kind (``REVIEW_CASE``, ``APPROVE_DOCUMENT``)."""

    item_id: str
    tenant: str
    submitter_id: int | None
    review_permission: str


def _text(value: str, field: str, required: str) -> str:
    text = (value or "").strip()
    if not text:
        raise ValidationFailure(field, required)
    if len(text) > MAX_COMMENT:
        raise ValidationFailure(field, COMMENT_TOO_LONG)
    return text


def anchor_checked(anchor: str) -> str:
    """A blank anchor (the whole item) or one part of it; a ValidationFailure on ``anchor``."""
    anchor = (anchor or "").strip()
    if anchor and not ANCHOR.fullmatch(anchor):
        raise ValidationFailure("anchor", ANCHOR_MALFORMED)
    return anchor


def is_reviewer(subject: Subject, actor: User) -> bool:
    return holds(actor, subject.review_permission) and may_access(actor, subject.tenant)


def require_participant(subject: Subject, actor: User) -> None:
    """A reviewer of the item's kind in its tenant, or its submitter (in its tenant)."""
    require(actor, None, subject.tenant)
    if subject.submitter_id is not None and actor.pk == subject.submitter_id:
        return
    require(actor, subject.review_permission, subject.tenant, message=NOT_A_PARTICIPANT)


def _thread_of(subject: Subject, number: int) -> ReviewThread:
    """The thread ``number`` of this item, locked; another item's thread is no thread of it."""
    thread = (
        ReviewThread.objects.select_for_update()
        .filter(pk=number, tenant=subject.tenant, item_id__in=round_item_ids(subject))
        .first()
    )
    if thread is None:
        raise ValidationFailure("thread", NO_SUCH_THREAD)
    return thread


def _audit(action: Action, subject: Subject, actor: User, now: datetime, **details: object) -> None:
    event_record(
        actor=actor,
        action=action,
        target=subject.item_id,
        details={"tenant": subject.tenant, **details},
        at=now,
    )


def _opened(
    subject: Subject,
    *,
    anchor: str,
    body: str,
    actor: User,
    now: datetime,
    change_request: ChangeRequest | None = None,
) -> ReviewThread:
    thread = ReviewThread.objects.create(
        tenant=subject.tenant,
        item_id=subject.item_id,
        anchor=anchor,
        opened_by=actor,
        opened_at=now,
        change_request=change_request,
    )
    ReviewComment.objects.create(thread=thread, author=actor, body=body, written_at=now)
    return thread


@transaction.atomic
def thread_open(
    *, subject: Subject, anchor: str, body: str, actor: User, now: datetime | None = None
) -> ReviewThread:
    """Open a thread on one part of the item (``anchor``) with its first comment."""
    require_participant(subject, actor)
    anchor = anchor_checked(anchor)
    body = _text(body, "body", COMMENT_REQUIRED)
    now = now or clock.now()
    thread = _opened(subject, anchor=anchor, body=body, actor=actor, now=now)
    _audit(Action.THREAD_OPEN, subject, actor, now, thread=thread.pk, anchor=anchor)
    return thread


@transaction.atomic
def thread_reply(
    *, subject: Subject, number: int, body: str, actor: User, now: datetime | None = None
) -> ReviewComment:
    """Answer thread ``number`` of the item (a resolved thread may be answered too)."""
    require_participant(subject, actor)
    thread = _thread_of(subject, number)
    body = _text(body, "body", COMMENT_REQUIRED)
    now = now or clock.now()
    comment = ReviewComment.objects.create(thread=thread, author=actor, body=body, written_at=now)
    _audit(Action.THREAD_REPLY, subject, actor, now, thread=thread.pk, comment=comment.pk)
    return comment


@transaction.atomic
def thread_resolve(
    *, subject: Subject, number: int, actor: User, now: datetime | None = None
) -> ReviewThread:
    require_participant(subject, actor)
    thread = _thread_of(subject, number)
    if thread.status == ThreadStatus.RESOLVED:
        raise ValidationFailure("thread", f"#{thread.pk} {ALREADY_RESOLVED}")
    now = now or clock.now()
    thread.status = ThreadStatus.RESOLVED
    thread.resolved_by = actor
    thread.resolved_at = now
    thread.save(update_fields=["status", "resolved_by", "resolved_at"])
    _audit(Action.THREAD_RESOLVE, subject, actor, now, thread=thread.pk)
    return thread


@transaction.atomic
def thread_reopen(
    *, subject: Subject, number: int, actor: User, now: datetime | None = None
) -> ReviewThread:
    require_participant(subject, actor)
    thread = _thread_of(subject, number)
    if thread.status != ThreadStatus.RESOLVED:
        raise ValidationFailure("thread", f"#{thread.pk} {NOT_RESOLVED}")
    now = now or clock.now()
    thread.status = ThreadStatus.OPEN
    thread.resolved_by = None
    thread.resolved_at = None
    thread.save(update_fields=["status", "resolved_by", "resolved_at"])
    _audit(Action.THREAD_REOPEN, subject, actor, now, thread=thread.pk)
    return thread


def thread_act(*, subject: Subject, op: str, data: Mapping[str, Any], actor: User) -> int:
    """One of the thread form's operations (``open``, ``reply``, ``resolve``, ``reopen``) on
    ``subject``, as every item page's form posts it; the thread's number."""
    number = int(data.get("thread") or 0)
    if op == "open":
        return thread_open(
            subject=subject, anchor=data["anchor"], body=data["body"], actor=actor
        ).pk
    if op == "reply":
        thread_reply(subject=subject, number=number, body=data["body"], actor=actor)
    elif op == "resolve":
        thread_resolve(subject=subject, number=number, actor=actor)
    else:
        thread_reopen(subject=subject, number=number, actor=actor)
    return number


def changes_request_record(
    *, subject: Subject, note: str, anchor: str, actor: User, now: datetime
) -> ChangeRequest:
    """The core's part of sending an item back (the kind's decision locks the item and checks
    its state first, in its transaction): the request, a thread anchored where the reviewer
    pointed holding the note, and the audit event. Only a reviewer of the kind in the item's
    tenant, not its submitter, and only once until a revision is resubmitted."""
    require(actor, subject.review_permission, subject.tenant)
    anchor = anchor_checked(anchor)
    note = _text(note, "note", NOTE_REQUIRED)
    if subject.submitter_id is None:
        raise ValidationFailure("id", "has no submitter to return it to")
    if open_change_request(subject) is not None:
        raise ValidationFailure("id", f"{subject.item_id} {ALREADY_RETURNED}")
    request = ChangeRequest.objects.create(
        tenant=subject.tenant,
        item_id=subject.item_id,
        note=note,
        requested_by=actor,
        requested_at=now,
        returned_to_id=subject.submitter_id,
    )
    thread = _opened(
        subject, anchor=anchor, body=note, actor=actor, now=now, change_request=request
    )
    _audit(
        Action.CHANGES_REQUEST,
        subject,
        actor,
        now,
        change_request=request.pk,
        thread=thread.pk,
        anchor=anchor,
        returned_to=subject.submitter_id,
    )
    return request


def require_resubmitter(subject: Subject, actor: User) -> None:
    """Who may resubmit a revision: the submitter, or a reviewer of the kind in the item's
    tenant (fix-and-accept: the reviewer's version is theirs, so another reviewer approves it)."""
    require(actor, None, subject.tenant)
    if subject.submitter_id is not None and actor.pk == subject.submitter_id:
        return
    if not is_reviewer(subject, actor):
        raise PermissionRefused(NOT_RESUBMITTER)


def changes_resubmitted_record(
    *, subject: Subject, revision_id: str, actor: User, now: datetime
) -> ChangeRequest | None:
    """The core's part of a resubmission (the kind stored the revision): the open change
    request, if any, answered by ``revision_id``, and the audit event."""
    request = (
        ChangeRequest.objects.select_for_update()
        .filter(tenant=subject.tenant, item_id=subject.item_id, resubmitted_as="")
        .first()
    )
    if request is not None:
        request.resubmitted_as = revision_id
        request.resubmitted_by = actor
        request.resubmitted_at = now
        request.save(update_fields=["resubmitted_as", "resubmitted_by", "resubmitted_at"])
    _audit(
        Action.CHANGES_RESUBMIT,
        subject,
        actor,
        now,
        revision=revision_id,
        change_request=request.pk if request is not None else None,
    )
    return request


# Names of the parts a thread may be anchored to, as pages show them.
PART_NAMES = {
    "observations": _("Observations"),
    "diagnosis": _("Diagnosis"),
    "counterevidence": _("Counterevidence"),
    "outcome": _("Outcome"),
}


def anchor_label(anchor: str) -> str:
    """How a thread's anchor reads on a page (``{{ anchor|anchor_label }}``)."""
    kind, _sep, rest = (anchor or "").partition(":")
    if kind == "evidence":
        return gettext("evidence %(key)s") % {"key": rest}
    if kind == "section":
        return gettext("section: %(name)s") % {"name": PART_NAMES.get(rest, rest)}
    if kind == "field":
        return gettext("field: %(name)s") % {"name": PART_NAMES.get(rest, rest)}
    return gettext("the whole item")


# --- reads --------------------------------------------------------------------------------------


def open_change_request(subject: Subject) -> ChangeRequest | None:
    return (
        ChangeRequest.objects.filter(
            tenant=subject.tenant, item_id=subject.item_id, resubmitted_as=""
        )
        .select_related("requested_by", "returned_to")
        .first()
    )


def _linked(subject: Subject) -> tuple[list[str], list[ChangeRequest]]:
    """The item's versions linked by resubmissions, oldest first, with every change request on
    them: one query per step of the chain, one in all for an item never sent back."""
    ids = {subject.item_id}
    frontier = {subject.item_id}
    found: dict[int, ChangeRequest] = {}
    while frontier:
        step = [
            r
            for r in ChangeRequest.objects.filter(tenant=subject.tenant)
            .filter(Q(item_id__in=frontier) | Q(resubmitted_as__in=frontier))
            .select_related("requested_by", "returned_to", "resubmitted_by")
            if r.pk not in found
        ]
        found.update((r.pk, r) for r in step)
        reached = {r.item_id for r in step} | {r.resubmitted_as for r in step if r.resubmitted_as}
        frontier = reached - ids
        ids |= reached
    requests = sorted(found.values(), key=lambda r: (r.requested_at, r.pk))
    revised = {r.item_id: r.resubmitted_as for r in requests if r.resubmitted_as}
    earlier = {new: old for old, new in revised.items()}
    first = subject.item_id
    while first in earlier and earlier[first] != subject.item_id:
        first = earlier[first]
    order = [first]
    while order[-1] in revised and revised[order[-1]] not in order:
        order.append(revised[order[-1]])
    return order, requests


def round_item_ids(subject: Subject) -> list[str]:
    """The item's versions linked by resubmissions, oldest first, ``subject``'s own among them:
    the rounds of its review."""
    return _linked(subject)[0]


@dataclass(frozen=True)
class Round:
    """One round of an item's review: a version, what was asked of it, and the threads on it."""

    item_id: str
    requests: Sequence[ChangeRequest]
    threads: Sequence[ReviewThread]


@dataclass(frozen=True)
class Conversation:
    rounds: list[Round]
    # The change request the item itself waits on, if any.
    open_request: ChangeRequest | None


@dataclass(frozen=True)
class ThreadView:
    thread: ReviewThread
    # The version it was written on, when that is an earlier round's.
    earlier_version: str

    @property
    def open(self) -> bool:
        return self.thread.status == ThreadStatus.OPEN

    @property
    def target(self) -> str:
        """The page anchor of what the thread is about (an evidence item's element id)."""
        kind, _, rest = self.thread.anchor.partition(":")
        if kind == "evidence":
            return "ev-" + rest.replace("/", "-")
        if kind == "section":
            return "h-" + rest
        return ""


def thread_views(conversation: Conversation, item_id: str) -> list[ThreadView]:
    """Every thread of the item's rounds as a page lists them."""
    return [
        ThreadView(t, "" if r.item_id == item_id else r.item_id)
        for r in conversation.rounds
        for t in r.threads
    ]


def conversation_of(subject: Subject) -> Conversation:
    """Every round of the item's review, oldest first, and the request it waits on (a query per
    step of the chain, one for the threads and one for their comments)."""
    ids, requests = _linked(subject)
    threads = list(threads_on(subject.tenant, ids))
    rounds = [
        Round(
            item_id,
            [r for r in requests if r.item_id == item_id],
            [t for t in threads if t.item_id == item_id],
        )
        for item_id in ids
    ]
    waiting = next(
        (r for r in requests if r.item_id == subject.item_id and not r.resubmitted_as), None
    )
    return Conversation(rounds, waiting)


def thread_views_of(item_id: str, tenant: str) -> list[ThreadView]:
    """The threads on an item and its earlier versions, as a page beside it lists them (the
    compare page)."""
    return thread_views(conversation_of(Subject(item_id, tenant, None, "")), item_id)


def rounds_of(subject: Subject) -> list[Round]:
    return conversation_of(subject).rounds


def threads_on(tenant: str, item_ids: Iterable[str]) -> QuerySet[ReviewThread]:
    return (
        ReviewThread.objects.filter(tenant=tenant, item_id__in=list(item_ids))
        .select_related("opened_by", "resolved_by")
        .prefetch_related("comments__author")
    )


def open_threads_count(subject: Subject) -> int:
    """Open threads on the item and on the earlier versions it revises."""
    return ReviewThread.objects.filter(
        tenant=subject.tenant, item_id__in=round_item_ids(subject), status=ThreadStatus.OPEN
    ).count()


def changes_requested_of(user: User) -> QuerySet[ChangeRequest]:
    """Items returned to ``user`` and not yet resubmitted, oldest first, in the tenants the user
    may see (for the dashboard's "waiting on you")."""
    requests = ChangeRequest.objects.filter(returned_to=user, resubmitted_as="").select_related(
        "requested_by"
    )
    tenants = tenants_of(user)
    if tenants is not None:
        requests = requests.filter(tenant__in=tenants)
    return requests.order_by("requested_at", "pk")
