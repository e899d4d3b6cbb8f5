"""Review decisions on cases, skills and lessons: approve, reject, merge. One function per
action, each the whole of it: the row change and its audit event (``experience.review.lifecycle``
for the kind), then every effect named, in the decision's transaction, with the clock read once.

Revocation is in ``experience.review.revocation``, a lesson's outdating and restoration in
``experience.review.outdating``, conflicts in ``experience.review.lesson_conflicts`` and
``conflicts``, a knowledge document's revocation in ``experience.review.documents``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from experience.cases.models import Case, Skill
from experience.core.models import Status, SubmittedVia
from experience.core.review import ReviewOutcome, ReviewRefused
from experience.lessons import outdating
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.lessons.services import lesson_content, lesson_store
from experience.review.lesson_conflicts import conflict_close, conflicts_detect
from experience.review.lifecycle import (
    CASE,
    LESSON,
    SKILL,
    approval,
    rejection,
    status_followed,
)
from reviewconsole import claims, clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import REVIEW_CASE, require

MERGE_REFUSED = "accepting a merge needs the reviewer role"


NOT_A_MERGE = "is not a proposed merge of this candidate"


@transaction.atomic
def case_approve(
    *,
    case: Case,
    actor: User,
    reason: str,
    now: datetime | None = None,
    take_over: bool = False,
) -> ReviewOutcome:
    """Approve a candidate case under four eyes: the row and its audit event, then its effects
    (``lifecycle.status_followed``: it enters the retrieval index and the index entries of the
    lessons citing it see it usable). The version it supersedes, if any, is marked so and
    audited, leaves the index and closes its re-review entries (curation)."""
    now = now or clock.now()
    case = CASE.approved(case, actor=actor, reason=reason, now=now, take_over=take_over)
    status_followed(case, now=now)
    if case.supersedes:
        old = CASE.superseded(case.supersedes, by=case, actor=actor, now=now)
        if old is not None:
            status_followed(old, now=now)
    return ReviewOutcome(case.id, case.status)


@transaction.atomic
def case_reject(
    *,
    case: Case,
    actor: User,
    reason: str,
    now: datetime | None = None,
    take_over: bool = False,
) -> ReviewOutcome:
    return rejection(
        CASE, case, actor=actor, reason=reason, now=now or clock.now(), take_over=take_over
    )


@transaction.atomic
def skill_approve(
    *,
    skill: Skill,
    actor: User,
    reason: str,
    now: datetime | None = None,
    take_over: bool = False,
) -> ReviewOutcome:
    """Approve a candidate skill under four eyes: the row and its audit event, then its effects
    (``lifecycle.status_followed``: it enters the retrieval index)."""
    skill = approval(
        SKILL, skill, actor=actor, reason=reason, now=now or clock.now(), take_over=take_over
    )
    return ReviewOutcome(skill.id, skill.status)


@transaction.atomic
def skill_reject(
    *,
    skill: Skill,
    actor: User,
    reason: str,
    now: datetime | None = None,
    take_over: bool = False,
) -> ReviewOutcome:
    return rejection(
        SKILL, skill, actor=actor, reason=reason, now=now or clock.now(), take_over=take_over
    )


@dataclass(frozen=True)
class LessonReview(ReviewOutcome):
    conflicts: tuple[int, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {**super().as_json(), "conflicts": list(self.conflicts)}


@transaction.atomic
def lesson_approve(
    *,
    lesson: Lesson,
    actor: User,
    reason: str,
    now: datetime | None = None,
    take_over: bool = False,
) -> LessonReview:
    """Approve a candidate lesson under four eyes. Effects: it enters the retrieval index; the
    version it supersedes leaves it, and the conflicts that asked for this narrowed version
    close; the outdated rule's marks are set from the evidence this reviewer saw; the
    conflicts it makes are recorded (each flagged in the index and mailed by curation)."""
    now = now or clock.now()
    lesson = LESSON.approved(lesson, actor=actor, reason=reason, now=now, take_over=take_over)
    status_followed(lesson, now=now)
    if lesson.supersedes:
        _lesson_superseded(lesson.supersedes, by=lesson, actor=actor, now=now)
    # What the outdated rule measures later evidence against: what this reviewer saw.
    outdating.lesson_marks_set(lesson, now=now)
    opened = conflicts_detect(lesson, actor=actor, now=now, on="approval")
    return LessonReview(lesson.id, lesson.status, conflicts=tuple(c.pk for c in opened))


def _lesson_superseded(old_id: str, *, by: Lesson, actor: User, now: datetime) -> None:
    old = LESSON.superseded(old_id, by=by, actor=actor, now=now)
    if old is None:
        return
    status_followed(old, now=now)
    # The version that narrows a lesson settles the conflicts that asked for it; whether the
    # narrowed version still conflicts is detected afresh on its approval.
    for conflict in LessonConflict.objects.select_for_update().filter(
        narrowing=by.id, status=ConflictStatus.OPEN
    ):
        conflict_close(
            conflict,
            kept=conflict.other(old.id),
            resolution="narrowed",
            actor=actor,
            reason=f"narrowed by {by.id}",
            now=now,
        )


@transaction.atomic
def lesson_reject(
    *,
    lesson: Lesson,
    actor: User,
    reason: str,
    now: datetime | None = None,
    take_over: bool = False,
) -> ReviewOutcome:
    return rejection(
        LESSON, lesson, actor=actor, reason=reason, now=now or clock.now(), take_over=take_over
    )


@dataclass(frozen=True)
class MergeOutcome:
    merged: str
    candidate: str
    target: str

    def as_json(self) -> dict[str, Any]:
        return {"ok": True, "id": self.merged, "candidate": self.candidate, "target": self.target}


@transaction.atomic
def merge_accept(
    *,
    candidate: Lesson,
    target: Lesson,
    actor: User,
    reason: str,
    now: datetime | None = None,
    take_over: bool = False,
) -> MergeOutcome:
    """Accept a proposed merge: a new version of ``target`` that adds the candidate's evidence.

    The new version keeps the target's wording and adds the candidate's cases and tags; it is
    submitted in the candidate submitter's name and approved by ``actor`` under the approval
    rules (four eyes included, :func:`lesson_approve` with all its effects), which supersedes
    the target. The candidate is superseded by the new version too (out of the index, its
    re-review entries closed). Nothing is edited in place: both old rows stay, so the diff
    stays visible.

    Accepting decides on the candidate: another reviewer's unlapsed claim on it refuses the
    merge (``claimed_by_other``) unless the actor takes it over (``take_over``, audited), and
    the merge ends the claim (``reviewconsole.claims``).
    """
    require(actor, REVIEW_CASE, candidate.tenant, message=MERGE_REFUSED)
    now = now or clock.now()
    candidate = LESSON.locked(candidate)
    target = LESSON.locked(target)
    if target.id not in {p.target for p in lesson_selectors.merge_proposals(candidate)}:
        raise ValidationFailure("target", f"{target.id} {NOT_A_MERGE}")
    claimed = claims.decision_unmet(
        actor=actor, item_id=candidate.id, tenant=candidate.tenant, take_over=take_over, now=now
    )
    if claimed:
        raise ReviewRefused(candidate.id, candidate.status, claimed)
    claims.decision_settle(actor=actor, item_id=candidate.id, tenant=candidate.tenant, now=now)
    base = lesson_content(target)
    extra = lesson_content(candidate)
    supports = tuple(dict.fromkeys((*base.supports, *extra.supports)))
    contradicts = tuple(
        c for c in dict.fromkeys((*base.contradicts, *extra.contradicts)) if c not in supports
    )
    merged_content = replace(
        base,
        supports=supports,
        contradicts=contradicts,
        tags=tuple(dict.fromkeys((*base.tags, *extra.tags))),
        supersedes=target.id,
    )
    merged, _ = lesson_store(
        merged_content, actor=candidate.submitted_by, via=SubmittedVia.CONSOLE, now=now
    )
    lesson_approve(lesson=merged, actor=actor, reason=reason, now=now)
    candidate.status = Status.SUPERSEDED
    candidate.superseded_by = merged.id
    candidate.superseded_at = now
    candidate.save(update_fields=["status", "superseded_by", "superseded_at"])
    status_followed(candidate, now=now)
    event_record(
        actor=actor,
        action=Action.LESSON_MERGE,
        target=merged.id,
        reason=reason.strip(),
        details={"candidate": candidate.id, "target": target.id},
        at=now,
    )
    return MergeOutcome(merged.id, candidate.id, target.id)
