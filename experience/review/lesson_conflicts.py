"""Lesson conflicts recorded and closed, with what each sets in motion named.

A conflict opens when a lesson's approval (or the curation scan) finds two approved lessons of
one scope that tell opposite things (``experience.lessons.domain.conflict_reason``); it closes
when a reviewer revokes one of them or an approved narrowed version supersedes one. Either way
both lessons' index entries follow (``experience.index.lesson_inputs.conflict_followed``) and
curation, above, hears of it (``LessonConflictOpened``, ``LessonConflictClosed``).
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User

from experience.core.models import Status
from experience.index import lesson_inputs
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.review.events import LessonConflictClosed, LessonConflictOpened
from reviewconsole.audit import event_record
from reviewconsole.dispatch import dispatch
from reviewconsole.models import Action
from reviewconsole.scopes import SCOPE_FIELDS


def conflict_open(
    a: str, b: str, *, tenant: str, found_by: str, actor: User | None, now: datetime, on: str
) -> LessonConflict | None:
    """Record the conflict between lessons ``a`` and ``b`` (None when it is recorded already):
    the better supported side is noted, both index entries flag it, curation mails both
    lessons' approvers and queues the other side for re-review."""
    first, second = sorted((a, b))
    if LessonConflict.objects.filter(lesson_a_id=first, lesson_b_id=second).exists():
        return None
    lessons = {lesson.id: lesson for lesson in Lesson.objects.filter(pk__in=[first, second])}
    favoured = ld.favoured_side(
        lesson_selectors.conflict_side(lessons[first], now),
        lesson_selectors.conflict_side(lessons[second], now),
    )
    conflict = LessonConflict.objects.create(
        lesson_a_id=first,
        lesson_b_id=second,
        tenant=tenant,
        found_by=found_by,
        detected_at=now,
        detected_on=on,
        favoured=favoured,
    )
    lesson_inputs.conflict_followed(conflict=conflict)
    dispatch(LessonConflictOpened(conflict=conflict, now=now))
    event_record(
        actor=actor,
        action=Action.LESSON_CONFLICT_OPEN,
        target=first,
        details={
            "conflict": conflict.pk,
            "lessons": [first, second],
            "found_by": found_by,
            "detected_on": on,
            "favoured": favoured or None,
        },
        at=now,
    )
    return conflict


def conflicts_detect(
    lesson: Lesson, *, actor: User, now: datetime, on: str
) -> list[LessonConflict]:
    """The conflicts ``lesson`` (just approved) makes with the approved lessons of its scope,
    recorded."""
    mine = lesson_selectors.lesson_shape(lesson)
    apart = lesson_selectors.NarrowedApart()
    opened = []
    for other in lesson_selectors.shapes_in_scope(lesson.scope):
        if other.id == lesson.id:
            continue
        reason = ld.conflict_reason(mine, other, narrowed_apart=apart(lesson.id, other.id))
        if reason is None:
            continue
        conflict = conflict_open(
            lesson.id, other.id, tenant=lesson.tenant, found_by=reason, actor=actor, now=now, on=on
        )
        if conflict is not None:
            opened.append(conflict)
    return opened


def conflicts_scan(*, actor: User | None, now: datetime) -> list[LessonConflict]:
    """Every pair of approved lessons of one scope that conflicts and has no conflict record.

    The curation scan calls this (as no one, ``actor`` None); pairs are compared within a scope
    only.
    """
    by_scope: dict[tuple[str, ...], list[ld.LessonShape]] = {}
    for lesson in Lesson.objects.filter(status=Status.APPROVED).only(*SCOPE_FIELDS):
        by_scope.setdefault(tuple(lesson.scope.values()), [])
    opened = []
    apart = lesson_selectors.NarrowedApart()
    for key in sorted(by_scope):
        scope = dict(zip(SCOPE_FIELDS, key, strict=True))
        shapes = lesson_selectors.shapes_in_scope(scope)
        for i, a in enumerate(shapes):
            for b in shapes[i + 1 :]:
                reason = ld.conflict_reason(a, b, narrowed_apart=apart(a.id, b.id))
                if reason is None:
                    continue
                conflict = conflict_open(
                    a.id,
                    b.id,
                    tenant=scope["tenant"],
                    found_by=reason,
                    actor=actor,
                    now=now,
                    on="scan",
                )
                if conflict is not None:
                    opened.append(conflict)
    return opened


def conflict_close(
    conflict: LessonConflict, *, kept: str, resolution: str, actor: User, reason: str, now: datetime
) -> None:
    """Close ``conflict`` keeping ``kept``: both index entries lose the flag and curation
    settles the re-review entry it opened."""
    conflict.status = ConflictStatus.RESOLVED
    conflict.kept = kept
    conflict.resolution = resolution
    conflict.resolved_by = actor
    conflict.resolved_at = now
    conflict.resolved_reason = reason
    conflict.save(
        update_fields=[
            "status",
            "kept",
            "resolution",
            "resolved_by",
            "resolved_at",
            "resolved_reason",
        ]
    )
    lesson_inputs.conflict_followed(conflict=conflict)
    dispatch(LessonConflictClosed(conflict=conflict, now=now))
    event_record(
        actor=actor,
        action=Action.LESSON_CONFLICT_RESOLVE,
        target=conflict.lesson_a_id,
        reason=reason,
        details={
            "conflict": conflict.pk,
            "lessons": [conflict.lesson_a_id, conflict.lesson_b_id],
            "kept": kept,
            "resolution": resolution,
        },
        at=now,
    )
