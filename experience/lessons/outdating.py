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
the context block and the index with its status; curation puts it in the re-review queue and
tells its approvers. A reviewer restores it (a reason required), or revokes it with the
revocation impact (``experience.review.revocation.lesson_revoke``); like an approval, a
restoration is never the submitter's own (``OWN_SUBMISSION``). The checks and the restoration,
which change a lesson's status, are decisions in ``experience.review.outdating``; this module
holds the rule's inputs (the threshold, the marks, the later versions).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import Lesson

if TYPE_CHECKING:
    pass

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
