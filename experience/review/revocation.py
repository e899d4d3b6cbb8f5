"""Revoking a reviewed item: the impact (skills, lessons and runs it reached) stored with it."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from experience.cases.models import Case, Skill
from experience.cases.selectors import reviewer_of
from experience.cases.services import case_locked, skill_locked
from experience.core import domain
from experience.core.models import ItemType, Status
from experience.core.review import Impact, ReviewOutcome, ReviewRefused, require_item_tenant
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import ConflictStatus, Lesson
from experience.lessons.services import conflict_close, lesson_locked
from experience.review.impact import revocation_impact
from experience.runs.followups import follow_ups_flag
from experience.runs.models import RevocationImpact
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.dispatch import Event, dispatch
from reviewconsole.models import Action


def item_revoke(
    item: Case | Skill | Lesson,
    item_type: ItemType,
    *,
    actor: User,
    reason: str,
    action: Action,
    now: datetime,
) -> ReviewOutcome:
    """Revoke a locked approved case or skill at ``now``; store and return what read or cited
    it."""
    unmet = domain.revocation_unmet(status=item.status, reviewer=reviewer_of(actor), reason=reason)
    if unmet:
        raise ReviewRefused(item.id, item.status, unmet)
    item.status = Status.REVOKED
    item.revoked_by = actor
    item.revoked_at = now
    item.revoked_reason = reason.strip()
    item.save(update_fields=["status", "revoked_by", "revoked_at", "revoked_reason"])
    impact = revocation_impact(item.id, now=now)
    impact_store(item.id, item_type, impact, actor=actor, reason=reason.strip(), now=now)
    # Published once the impact is stored: the revocation mail a subscriber queues says it.
    dispatch(Event.ITEM_STATUS_CHANGED, item=item)
    event_record(
        actor=actor,
        action=action,
        target=item.id,
        reason=reason.strip(),
        details={"impact": impact.as_json()},
        at=now,
    )
    return ReviewOutcome(item.id, item.status, impact)


def impact_store(
    item_id: str, item_type: str, impact: Impact, *, actor: User, reason: str, now: datetime
) -> None:
    RevocationImpact.objects.create(
        item_id=item_id,
        item_type=item_type,
        skills=impact.skills,
        lessons=impact.lessons,
        runs=impact.runs,
        conflicts=impact.conflicts,
        context_blocks=impact.context_blocks,
        revoked_by=actor,
        reason=reason,
        created_at=now,
    )
    # The runs that read it stay flagged on the runs pages until someone follows them up.
    follow_ups_flag(run_ids=impact.runs, item_id=item_id, at=now)


@transaction.atomic
def case_revoke(
    *, case: Case, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """Revoke an approved case; return and store the skills citing it and the runs that read them."""
    require_item_tenant(actor, case)
    return item_revoke(
        case_locked(case),
        ItemType.CASE,
        actor=actor,
        reason=reason,
        action=Action.CASE_REVOKE,
        now=now or clock.now(),
    )


@transaction.atomic
def skill_revoke(
    *, skill: Skill, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    require_item_tenant(actor, skill)
    return item_revoke(
        skill_locked(skill),
        ItemType.SKILL,
        actor=actor,
        reason=reason,
        action=Action.SKILL_REVOKE,
        now=now or clock.now(),
    )


def document_revocation_store(
    *, document_id: str, tenant: str, actor: User, reason: str, now: datetime
) -> dict[str, list[str]]:
    """``DOCUMENT_REVOKED``: store and answer the runs of ``tenant`` whose tool results cited the
    document (its revocation's audit event records the answer)."""
    impact = revocation_impact(document_id, tenant=tenant, now=now)
    impact_store(document_id, ItemType.DOCUMENT, impact, actor=actor, reason=reason, now=now)
    return impact.as_json()


@transaction.atomic
def lesson_revoke(
    *, lesson: Lesson, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """Revoke an approved lesson; store the runs that read it; its open conflicts close."""
    require_item_tenant(actor, lesson)
    now = now or clock.now()
    outcome = item_revoke(
        lesson_locked(lesson),
        ItemType.LESSON,
        actor=actor,
        reason=reason,
        action=Action.LESSON_REVOKE,
        now=now,
    )
    for conflict in lesson_selectors.conflicts_of(lesson).filter(status=ConflictStatus.OPEN):
        conflict_close(
            conflict,
            kept=conflict.other(lesson.id),
            resolution="revoked",
            actor=actor,
            reason=reason.strip(),
            now=now,
        )
    return outcome
