"""Sending a candidate back to its submitter, and the revision that answers it.

Besides approve and reject (``experience.review.decisions``), a reviewer may request changes on a
candidate case, skill or lesson: the item stays a candidate, returned to its submitter with the
reviewer's note in a thread anchored where the reviewer pointed (``reviewconsole.conversations``).
The revision is a new version, content-addressed as every submission is; the version it revises
is superseded by it (out of the queue, its threads kept as a round of the history). A revision
may come from the submitter, or from a reviewer (fix-and-accept): the reviewer is then its
submitter, so the four-eyes rule (``own_submission``) makes another reviewer approve it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from experience.cases.models import Case, Skill
from experience.cases.prompting import prompt_tools
from experience.cases.schema import parse_case, parse_skill
from experience.cases.services import case_submit, skill_submit
from experience.cases.tools import tool_specs
from experience.core.models import Status, SubmittedVia
from experience.core.review import ReviewRefused, require_item_tenant
from experience.lessons.models import Lesson
from experience.lessons.schema import parse_lesson
from experience.lessons.services import lesson_submit
from experience.review.lifecycle import CASE, LESSON, SKILL, ReviewKind, status_followed
from reviewconsole import accounts, clock
from reviewconsole.conversations import (
    Subject,
    changes_request_record,
    changes_resubmitted_record,
    require_resubmitter,
)
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import ChangeRequest
from reviewconsole.permissions import REVIEW_CASE

NOTHING_CHANGED = "the revision is identical to the version it revises"
ALREADY_STORED = "is already stored: a revision must be new content"
TENANT_KEPT = "a revision stays in the tenant of the version it revises"
NOT_CANDIDATE = "not_candidate"
OWN_SUBMISSION = "own_submission"


def subject_of(item: Case | Skill | Lesson) -> Subject:
    """What the conversations need of a case, skill or lesson."""
    return Subject(
        item_id=item.id,
        tenant=item.tenant,
        submitter_id=int(item.submitted_by_id),
        review_permission=REVIEW_CASE,
    )


def _requested(
    kind: ReviewKind[Any],
    item: Case | Skill | Lesson,
    *,
    actor: User,
    note: str,
    anchor: str,
    now: datetime | None,
) -> ChangeRequest:
    require_item_tenant(actor, item)
    item = kind.locked(item)
    unmet = []
    if item.status != Status.CANDIDATE:
        unmet.append(NOT_CANDIDATE)
    submitter = int(item.submitted_by_id)
    if submitter == actor.pk or not accounts.independent(submitter, int(actor.pk)):
        unmet.append(OWN_SUBMISSION)
    if unmet:
        raise ReviewRefused(item.id, item.status, unmet)
    return changes_request_record(
        subject=subject_of(item), note=note, anchor=anchor, actor=actor, now=now or clock.now()
    )


@transaction.atomic
def case_changes_request(
    *, case: Case, actor: User, note: str, anchor: str = "", now: datetime | None = None
) -> ChangeRequest:
    """Return a candidate case to its submitter with ``note``, anchored to ``anchor`` (an
    evidence item, a section or a field; blank for the whole case). A reviewer of its tenant,
    not its submitter; once until a revision is resubmitted."""
    return _requested(CASE, case, actor=actor, note=note, anchor=anchor, now=now)


@transaction.atomic
def skill_changes_request(
    *, skill: Skill, actor: User, note: str, anchor: str = "", now: datetime | None = None
) -> ChangeRequest:
    return _requested(SKILL, skill, actor=actor, note=note, anchor=anchor, now=now)


@transaction.atomic
def lesson_changes_request(
    *, lesson: Lesson, actor: User, note: str, anchor: str = "", now: datetime | None = None
) -> ChangeRequest:
    return _requested(LESSON, lesson, actor=actor, note=note, anchor=anchor, now=now)


def _resubmitted(
    kind: ReviewKind[Any],
    item: Case | Skill | Lesson,
    *,
    parse: Callable[[object], Any],
    submit: Callable[..., tuple[Any, bool]],
    data: object,
    actor: User,
    now: datetime | None,
) -> Any:
    """Store ``data`` (the import format of one item of ``kind``) as the revision of the
    candidate ``item`` and supersede ``item`` by it; the open change request, if any, is
    answered. The submitter or a reviewer of the item's tenant; the revision keeps the tenant
    and is new content."""
    now = now or clock.now()
    require_item_tenant(actor, item)
    old = kind.locked(item)
    subject = subject_of(old)
    require_resubmitter(subject, actor)
    if old.status != Status.CANDIDATE:
        raise ReviewRefused(old.id, old.status, [NOT_CANDIDATE])
    content = parse(data)
    if content.scope["tenant"] != old.tenant:
        raise ValidationFailure("scope.tenant", TENANT_KEPT)
    if content.id == old.id:
        raise ValidationFailure(kind.item_type.value, NOTHING_CHANGED)
    if kind.model._default_manager.filter(pk=content.id).exists():
        raise ValidationFailure(kind.item_type.value, f"{content.id} {ALREADY_STORED}")
    revision, _ = submit(content=content, actor=actor, via=SubmittedVia.CONSOLE, now=now)
    old.status = Status.SUPERSEDED
    old.superseded_by = revision.id
    old.superseded_at = now
    old.save(update_fields=["status", "superseded_by", "superseded_at"])
    changes_resubmitted_record(subject=subject, revision_id=revision.id, actor=actor, now=now)
    status_followed(old, now=now)
    return revision


@transaction.atomic
def case_resubmit(*, case: Case, data: object, actor: User, now: datetime | None = None) -> Case:
    """A case's revision (:func:`_resubmitted`)."""
    revision: Case = _resubmitted(
        CASE, case, parse=parse_case, submit=case_submit, data=data, actor=actor, now=now
    )
    return revision


@transaction.atomic
def skill_resubmit(
    *, skill: Skill, data: object, actor: User, now: datetime | None = None
) -> Skill:
    """A skill's revision, its recipe's tools checked as an import's are."""
    revision: Skill = _resubmitted(
        SKILL,
        skill,
        parse=lambda raw: parse_skill(raw, tool_specs(), prompt_tools()),
        submit=skill_submit,
        data=data,
        actor=actor,
        now=now,
    )
    return revision


@transaction.atomic
def lesson_resubmit(
    *, lesson: Lesson, data: object, actor: User, now: datetime | None = None
) -> Lesson:
    """A lesson's revision (:func:`_resubmitted`)."""
    revision: Lesson = _resubmitted(
        LESSON, lesson, parse=parse_lesson, submit=lesson_submit, data=data, actor=actor, now=now
    )
    return revision


def revision_data(item: Case | Skill | Lesson) -> dict[str, Any]:
    """The item in the import format, as the revision form starts from it."""
    data = dict(item.content)
    if not data.get("supersedes"):
        data.pop("supersedes", None)
    return data
