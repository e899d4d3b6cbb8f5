"""Resolving a conflict between two lessons: revoke one, or narrow it into a new version."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from experience.core import domain
from experience.core.models import SubmittedVia
from experience.core.review import Impact, ReviewRefused
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import (
    ConflictStatus,
    Lesson,
    LessonConflict,
)
from experience.lessons.schema import LessonContent
from experience.lessons.services import RESOLVE_REFUSED, lesson_content, lesson_store
from experience.review.revocation import lesson_revoke
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import RESOLVE_LESSON_CONFLICT, require

NOT_IN_CONFLICT = "must be one of the two lessons of this conflict"


# Nothing is chosen for the reviewer: which lesson stays, and what becomes of the other.
KEEP_REQUIRED = "choose which of the two lessons to keep"


ACTION_REQUIRED = "choose whether to revoke the other lesson or narrow it"


CONFLICT_CLOSED = "this conflict is already resolved"


RESOLUTIONS = ("revoke", "narrow")


BAD_RESOLUTION = "must be revoke or narrow"


NARROW_NEEDS_CHANGE = "a narrowed version needs a new precondition or scene tags"


NARROW_LEAVES_NO_SUPPORT = (
    "every supporting case of this lesson is one the kept lesson cites against it; "
    "revoke it instead of narrowing it"
)


@dataclass(frozen=True)
class ConflictResolution:
    conflict: int
    status: str
    kept: str
    other: str
    resolution: str
    narrowed: str = ""
    # What revoking the other lesson reached (stored with the revocation); None when narrowed.
    impact: Impact | None = None


@transaction.atomic
def conflict_resolve(
    *,
    conflict: LessonConflict,
    keep: str,
    action: str,
    actor: User,
    reason: str,
    precondition: str = "",
    tags: Sequence[str] | None = None,
    now: datetime | None = None,
) -> ConflictResolution:
    """A reviewer keeps one lesson and revokes the other, or submits a narrowed version of it.

    A narrowed version (new precondition or scene tags, ``supersedes`` the other) is a
    candidate: the conflict stays open until another reviewer approves it.
    """
    require(actor, RESOLVE_LESSON_CONFLICT, conflict.tenant, message=RESOLVE_REFUSED)
    now = now or clock.now()
    conflict = LessonConflict.objects.select_for_update().get(pk=conflict.pk)
    if conflict.status != ConflictStatus.OPEN:
        raise ValidationFailure("conflict", CONFLICT_CLOSED)
    if not keep:
        raise ValidationFailure("keep", KEEP_REQUIRED)
    if keep not in (conflict.lesson_a_id, conflict.lesson_b_id):
        raise ValidationFailure("keep", NOT_IN_CONFLICT)
    if not action:
        raise ValidationFailure("action", ACTION_REQUIRED)
    if action not in RESOLUTIONS:
        raise ValidationFailure("action", BAD_RESOLUTION)
    if not reason.strip():
        raise ReviewRefused(keep, conflict.status, [domain.REASON_REQUIRED])
    other = Lesson.objects.get(pk=conflict.other(keep))
    if action == "revoke":
        revoked = lesson_revoke(lesson=other, actor=actor, reason=reason, now=now)
        # lesson_revoke stored its impact and closed every open conflict of ``other``; this one
        # names who was kept.
        conflict.refresh_from_db()
        return ConflictResolution(
            conflict.pk, conflict.status, keep, other.id, "revoked", impact=revoked.impact
        )
    kept = Lesson.objects.get(pk=keep)
    narrowed = _narrowed_content(other, kept=kept, precondition=precondition, tags=tags)
    lesson, _ = lesson_store(narrowed, actor=actor, via=SubmittedVia.CONSOLE, now=now)
    conflict.narrowing = lesson.id
    conflict.save(update_fields=["narrowing"])
    event_record(
        actor=actor,
        action=Action.LESSON_CONFLICT_RESOLVE,
        target=conflict.lesson_a_id,
        reason=reason.strip(),
        details={
            "conflict": conflict.pk,
            "kept": keep,
            "resolution": "narrowing",
            "narrowed": lesson.id,
        },
        at=now,
    )
    return ConflictResolution(conflict.pk, conflict.status, keep, other.id, "narrowing", lesson.id)


def _narrowed_content(
    lesson: Lesson, *, kept: Lesson, precondition: str, tags: Sequence[str] | None
) -> LessonContent:
    """The narrowed version of ``lesson``: the new precondition or tags, and its links
    re-evaluated against ``kept`` (``ld.narrowed_links``), not copied: the cases the kept lesson
    cites the other way are dropped, so an explicit link does not open the conflict again."""
    base = lesson_content(lesson)
    new_tags = tuple(ld.normalise_tag(t) for t in tags if t.strip()) if tags else base.tags
    new_precondition = precondition.strip() or base.precondition
    if new_precondition == base.precondition and set(new_tags) == set(base.tags):
        raise ValidationFailure("precondition", NARROW_NEEDS_CHANGE)
    supports, contradicts = ld.narrowed_links(
        lesson_selectors.lesson_shape(lesson), lesson_selectors.lesson_shape(kept)
    )
    if not supports:
        raise ValidationFailure("action", NARROW_LEAVES_NO_SUPPORT)
    return replace(
        base,
        precondition=new_precondition,
        tags=new_tags,
        supports=tuple(c for c in base.supports if c in supports),
        contradicts=tuple(c for c in base.contradicts if c in contradicts),
        supersedes=lesson.id,
    )
