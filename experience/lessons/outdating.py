"""Outdated lessons: the rule checked where the evidence moves, and a reviewer's restoration.

The rule is ``experience.lessons.domain.outdated_cause``. It is checked

- when a lesson is approved (or restored): only its marks are set, the evidence its reviewer
  had before them and whether that evidence is at or above the threshold;
- when a run's outcome is reported, for the lessons the run read and the versions that
  inherited their outcomes (``experience.review.outcomes``);
- on every curation scan, for every approved lesson (``curation.scan``): what changed by other
  means (a cited case revoked or expired, incidents merged) is caught there.

Each check locks the lessons it looks at and is idempotent: a lesson already outdated is not
looked at again, and one the rule leaves alone is only armed (``confident_at``) the first time
its evidence is seen at or above the threshold. A lesson that turns outdated leaves retrieval,
the context block and the index with its status (``ITEM_STATUS_CHANGED``); curation puts it in
the re-review queue and tells its approvers. A reviewer restores it (a reason required), or
revokes it with the revocation impact (``experience.review.revocation.lesson_revoke``); like an
approval, a restoration is never the submitter's own (``OWN_SUBMISSION``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction

from experience.cases.selectors import reviewer_of
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewOutcome, ReviewRefused, require_item_tenant
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import Lesson
from reviewconsole import accounts, clock
from reviewconsole.audit import event_record
from reviewconsole.dispatch import Event, dispatch
from reviewconsole.models import Action

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MARK_FIELDS = ["confident_at", "seen_successes", "seen_failures"]

# The English sentence of each cause, in the audit event's reason and the notification.
CAUSE_TEXT = {
    ld.CONTRADICTED: "its counterexamples reach its support",
    ld.CONFIDENCE_FELL: "its confidence fell below the threshold after having been above it",
}


def threshold() -> float:
    """``LESSON_CONFIDENCE_THRESHOLD``: what recall requires of a lesson, and what the outdated
    rule's ``confidence_fell`` compares with (docs/operations.md)."""
    return lesson_selectors.confidence_settings().threshold


def _rule_score(lesson: Lesson, now: datetime) -> ld.Confidence:
    return lesson_selectors.lesson_confidence(lesson, now, conflict_aware=False)


def marks_of(lesson: Lesson) -> ld.OutdatedMarks:
    return ld.OutdatedMarks(
        was_confident=lesson.confident_at is not None,
        seen_successes=lesson.seen_successes,
        seen_failures=lesson.seen_failures,
    )


def lesson_marks_set(lesson: Lesson, *, now: datetime) -> ld.Confidence:
    """A reviewer just approved or restored ``lesson`` (locked): the evidence they had before
    them is what the rule measures later evidence against; it is armed if that evidence is at or
    above the threshold."""
    score = _rule_score(lesson, now)
    lesson.confident_at = now if ld.is_confident(score, threshold=threshold()) else None
    lesson.seen_successes = score.successes
    lesson.seen_failures = score.failures
    lesson.save(update_fields=MARK_FIELDS)
    return score


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
        dispatch(Event.ITEM_STATUS_CHANGED, item=lesson)
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


def lesson_heirs(lesson_ids: Iterable[str]) -> set[str]:
    """The lessons and every later version of each (following ``superseded_by``): a version
    inherits the outcomes of the versions it replaced (``outcome_tallies``)."""
    found = set(lesson_ids)
    frontier = set(found)
    while frontier:
        later = set(
            Lesson.objects.filter(pk__in=frontier)
            .exclude(superseded_by="")
            .values_list("superseded_by", flat=True)
        )
        frontier = later - found
        found |= frontier
    return found


@transaction.atomic
def lesson_restore(
    *, lesson: Lesson, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """A reviewer other than its submitter judges an outdated lesson still holds: it is approved
    again, back in retrieval, and the evidence it has now is what the rule measures later
    evidence against."""
    require_item_tenant(actor, lesson)
    lesson = Lesson.objects.select_for_update().get(pk=lesson.pk)
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
    dispatch(Event.ITEM_STATUS_CHANGED, item=lesson)
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
