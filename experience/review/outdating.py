"""A lesson's outdating and restoration: the decisions the outdated rule and a reviewer make.

The rule and its inputs are in ``experience.lessons.domain`` (``outdated_cause``) and
``experience.lessons.outdating`` (the threshold, the marks, the later versions). Here the rule's
verdict changes a lesson's status, with every effect named: a lesson turned outdated leaves the
retrieval index, and curation queues it for re-review and mails its approvers; a restored one
comes back, and curation closes its re-review entries.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from experience.cases.selectors import reviewer_of
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewOutcome, ReviewRefused, require_item_tenant
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import Lesson
from experience.lessons.outdating import (
    CAUSE_TEXT,
    lesson_marks_set,
    marks_of,
    threshold,
)
from experience.review.lifecycle import LESSON, status_followed
from reviewconsole import accounts, clock
from reviewconsole.audit import event_record
from reviewconsole.models import Action


def lessons_outdated_check(
    lesson_ids: Iterable[str], *, now: datetime | None = None, on: str, detail: str = ""
) -> list[Lesson]:
    """Check the approved lessons among ``lesson_ids`` against the rule; those it finds outdated
    turn outdated (audited, as no one: the evidence did it; ``on`` says which check found it:
    ``outcome`` or ``scan``). Returns them. Must run inside the caller's transaction."""
    ids = sorted(set(lesson_ids))
    if not ids:
        return []
    now = now or clock.now()
    limit = threshold()
    turned: list[Lesson] = []
    locked = list(
        Lesson.objects.select_for_update().filter(pk__in=ids, status=Status.APPROVED).order_by("pk")
    )
    scores = lesson_selectors.lesson_confidences(locked, now, conflict_aware=False)
    for lesson in locked:
        score = scores[lesson.id]
        cause = ld.outdated_cause(score, marks_of(lesson), threshold=limit)
        if cause is None:
            if lesson.confident_at is None and ld.is_confident(score, threshold=limit):
                lesson.confident_at = now
                lesson.save(update_fields=["confident_at"])
            continue
        lesson.status = Status.OUTDATED
        lesson.outdated_at = now
        lesson.outdated_cause = cause
        lesson.confident_at = None
        lesson.save(update_fields=["status", "outdated_at", "outdated_cause", "confident_at"])
        status_followed(lesson, now=now)
        event_record(
            actor=None,
            action=Action.LESSON_OUTDATE,
            target=lesson.id,
            reason=CAUSE_TEXT[cause],
            details={
                "cause": cause,
                "on": on,
                "detail": detail or None,
                "threshold": limit,
                "successes": score.successes,
                "failures": score.failures,
                "confidence": score.as_json(),
            },
            at=now,
        )
        turned.append(lesson)
    return turned


def lessons_outdated_scan(*, now: datetime) -> list[Lesson]:
    """The curation scan's check: every approved lesson."""
    ids = Lesson.objects.filter(status=Status.APPROVED).values_list("pk", flat=True)
    return lessons_outdated_check(list(ids), now=now, on="scan")


@transaction.atomic
def lesson_restore(
    *, lesson: Lesson, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """A reviewer other than its submitter judges an outdated lesson still holds: it is approved
    again, back in retrieval, and the evidence it has now is what the rule measures later
    evidence against."""
    require_item_tenant(actor, lesson)
    lesson = LESSON.locked(lesson)
    unmet = []
    reviewer = reviewer_of(actor)
    if not reviewer.can_review:
        unmet.append(domain.NOT_REVIEWER)
    if not reason.strip():
        unmet.append(domain.REASON_REQUIRED)
    if lesson.status != Status.OUTDATED:
        unmet.append(ld.NOT_OUTDATED)
    # Restore, like approve, is another person's decision (four eyes across accounts).
    submitted_by = int(lesson.submitted_by_id)
    unmet += domain.four_eyes_unmet(
        reviewer, submitted_by=submitted_by, submitter_holder=accounts.holder_of(submitted_by)
    )
    if unmet:
        raise ReviewRefused(lesson.id, lesson.status, unmet)
    now = now or clock.now()
    cause = lesson.outdated_cause
    lesson.status = Status.APPROVED
    lesson.outdated_at = None
    lesson.outdated_cause = ""
    lesson.save(update_fields=["status", "outdated_at", "outdated_cause"])
    score = lesson_marks_set(lesson, now=now)
    status_followed(lesson, now=now)
    event_record(
        actor=actor,
        action=Action.LESSON_RESTORE,
        target=lesson.id,
        reason=reason.strip(),
        details={
            **accounts.provenance(actor),
            "cause": cause,
            "successes": score.successes,
            "failures": score.failures,
            "confidence": score.as_json(),
        },
        at=now,
    )
    return ReviewOutcome(lesson.id, lesson.status)
