"""Revoking a reviewed item: the impact (skills, lessons and runs it reached) stored with it.

One function per kind; each is the whole decision: the row revoked with its impact stored and
audited (``experience.review.lifecycle``), then every effect named. A knowledge document's
revocation is in ``experience.review.documents``.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from experience.cases.models import Case, Skill
from experience.core.review import ReviewOutcome
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import ConflictStatus, Lesson
from experience.review.lesson_conflicts import conflict_close
from experience.review.lifecycle import CASE, LESSON, SKILL, revocation


@transaction.atomic
def case_revoke(
    *, case: Case, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """Revoke an approved case. Effects: the skills citing it, the lessons it leaves without
    support and the runs that read any of them are stored as its impact (the runs flagged for
    follow-up); it leaves the retrieval index and the lessons citing it see it gone; curation
    closes its re-review entries and mails whoever approved it (the mail says the impact)."""
    _, outcome = revocation(CASE, case, actor=actor, reason=reason, now=now)
    return outcome


@transaction.atomic
def skill_revoke(
    *, skill: Skill, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """Revoke an approved skill: its impact (the runs that read it) stored, out of the index,
    its re-review entries closed and its approvers mailed."""
    _, outcome = revocation(SKILL, skill, actor=actor, reason=reason, now=now)
    return outcome


@transaction.atomic
def lesson_revoke(
    *, lesson: Lesson, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """Revoke an approved (or outdated) lesson: its impact (the runs that read it, its open
    conflicts) stored, out of the index, its re-review entries closed, its approvers mailed,
    and its open conflicts closed keeping the other side."""
    lesson, outcome = revocation(LESSON, lesson, actor=actor, reason=reason, now=now)
    assert lesson.revoked_at is not None  # set by the revocation, at its moment
    for conflict in lesson_selectors.conflicts_of(lesson).filter(status=ConflictStatus.OPEN):
        conflict_close(
            conflict,
            kept=conflict.other(lesson.id),
            resolution="revoked",
            actor=actor,
            reason=reason.strip(),
            now=lesson.revoked_at,
        )
    return outcome
