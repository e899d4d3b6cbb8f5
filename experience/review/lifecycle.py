"""The review lifecycle, written once and described per kind.

Cases, skills and lessons go through the same states (candidate → approved or rejected;
approved → revoked or superseded; a lesson also outdated and restored, see
``experience.review.outdating``) under the same rules: four eyes and a reason to approve, a
reviewer and a reason to reject or revoke, the impact stored with a revocation. What differs per
kind is data, a :class:`ReviewKind`: the model, the approval rules (the console's live
checklist), the audit actions. Its methods make the row change and its audit event; the decision
functions (``experience.review.decisions``, ``revocation``, ``outdating``) call them and then
name every effect of the change, :func:`status_followed` among them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from django.contrib.auth.models import User

from experience.cases.models import Case, Skill
from experience.cases.selectors import (
    case_approval_checklist,
    reviewer_of,
    skill_approval_checklist,
)
from experience.core import domain
from experience.core.models import ItemType, Status
from experience.core.review import Impact, ReviewRefused, require_item_tenant
from experience.index import lesson_inputs, postings
from experience.lessons.models import Lesson
from experience.lessons.selectors import lesson_approval_checklist
from experience.review.events import ItemStatusChanged
from experience.review.impact import impact_store, revocation_impact
from reviewconsole import accounts
from reviewconsole.audit import event_record
from reviewconsole.dispatch import dispatch
from reviewconsole.models import Action

I = TypeVar("I", Case, Skill, Lesson)  # noqa: E741


@dataclass(frozen=True)
class ReviewKind(Generic[I]):
    """One kind of reviewed item, as the lifecycle needs it."""

    item_type: ItemType
    model: type[I]
    # Every unmet condition of approving the item now, by name (item, reviewer, reason, now):
    # the selector the console's live checklist shows, so the page and the decision agree.
    approval_unmet: Callable[[I, User, str, datetime], list[str]]
    approve_action: Action
    reject_action: Action
    revoke_action: Action
    # None for a kind without versions (skills).
    supersede_action: Action | None

    def locked(self, item: I) -> I:
        """The row again, locked for the decision (a concurrent decision waits, then sees it)."""
        return self.model._default_manager.select_for_update().get(pk=item.pk)

    def approved(self, item: I, *, actor: User, reason: str, now: datetime) -> I:
        """Approve a candidate of the actor's tenant (locked here) and audit it; refused with
        every unmet condition named, nothing written."""
        require_item_tenant(actor, item)
        item = self.locked(item)
        unmet = self.approval_unmet(item, actor, reason, now)
        if unmet:
            raise ReviewRefused(item.id, item.status, unmet)
        item.status = Status.APPROVED
        item.approved_by = actor
        item.approved_at = now
        item.approved_reason = reason.strip()
        item.save(update_fields=["status", "approved_by", "approved_at", "approved_reason"])
        event_record(
            actor=actor,
            action=self.approve_action,
            target=item.id,
            reason=reason.strip(),
            details=accounts.provenance(actor),
            at=now,
        )
        return item

    def rejected(self, item: I, *, actor: User, reason: str, now: datetime) -> I:
        """Reject a candidate of the actor's tenant (locked here) and audit it."""
        require_item_tenant(actor, item)
        item = self.locked(item)
        unmet = domain.rejection_unmet(
            status=item.status, reviewer=reviewer_of(actor), reason=reason
        )
        if unmet:
            raise ReviewRefused(item.id, item.status, unmet)
        item.status = Status.REJECTED
        item.rejected_by = actor
        item.rejected_at = now
        item.rejected_reason = reason.strip()
        item.save(update_fields=["status", "rejected_by", "rejected_at", "rejected_reason"])
        event_record(
            actor=actor, action=self.reject_action, target=item.id, reason=reason.strip(), at=now
        )
        return item

    def revoked(self, item: I, *, actor: User, reason: str, now: datetime) -> tuple[I, Impact]:
        """Revoke an approved (or outdated) item of the actor's tenant (locked here): what it
        reached is computed once it is revoked, stored (runs flagged for follow-up) and
        recorded in its audit event."""
        require_item_tenant(actor, item)
        item = self.locked(item)
        unmet = domain.revocation_unmet(
            status=item.status, reviewer=reviewer_of(actor), reason=reason
        )
        if unmet:
            raise ReviewRefused(item.id, item.status, unmet)
        item.status = Status.REVOKED
        item.revoked_by = actor
        item.revoked_at = now
        item.revoked_reason = reason.strip()
        item.save(update_fields=["status", "revoked_by", "revoked_at", "revoked_reason"])
        impact = revocation_impact(item.id, now=now)
        impact_store(item.id, self.item_type, impact, actor=actor, reason=reason.strip(), now=now)
        event_record(
            actor=actor,
            action=self.revoke_action,
            target=item.id,
            reason=reason.strip(),
            details={"impact": impact.as_json()},
            at=now,
        )
        return item, impact

    def superseded(self, old_id: str, *, by: I, actor: User, now: datetime) -> I | None:
        """Mark the approved (or, for a lesson, outdated) version ``old_id`` superseded by
        ``by`` and audit it; None when there is no such version. Only a version of the new
        one's tenant is ever superseded, even by a row stored before submission refused other
        tenants' ids."""
        old = (
            self.model._default_manager.select_for_update()
            .filter(pk=old_id, tenant=by.tenant, status__in=[Status.APPROVED, Status.OUTDATED])
            .first()
        )
        if old is None or self.supersede_action is None:
            return None
        old.status = Status.SUPERSEDED
        old.superseded_by = by.id
        old.superseded_at = now
        old.save(update_fields=["status", "superseded_by", "superseded_at"])
        event_record(
            actor=actor,
            action=self.supersede_action,
            target=old.pk,
            reason=f"superseded by {by.id}",
            details={"superseded_by": by.id},
            at=now,
        )
        return old


CASE = ReviewKind(
    item_type=ItemType.CASE,
    model=Case,
    approval_unmet=lambda case, reviewer, reason, now: case_approval_checklist(
        case=case, reviewer=reviewer, reason=reason, now=now
    ),
    approve_action=Action.CASE_APPROVE,
    reject_action=Action.CASE_REJECT,
    revoke_action=Action.CASE_REVOKE,
    supersede_action=Action.CASE_SUPERSEDE,
)

SKILL = ReviewKind(
    item_type=ItemType.SKILL,
    model=Skill,
    approval_unmet=lambda skill, reviewer, reason, now: skill_approval_checklist(
        skill=skill, reviewer=reviewer, reason=reason, now=now
    ),
    approve_action=Action.SKILL_APPROVE,
    reject_action=Action.SKILL_REJECT,
    revoke_action=Action.SKILL_REVOKE,
    supersede_action=None,
)

LESSON = ReviewKind(
    item_type=ItemType.LESSON,
    model=Lesson,
    approval_unmet=lambda lesson, reviewer, reason, now: lesson_approval_checklist(
        lesson=lesson, reviewer=reviewer, reason=reason, now=now
    ),
    approve_action=Action.LESSON_APPROVE,
    reject_action=Action.LESSON_REJECT,
    revoke_action=Action.LESSON_REVOKE,
    supersede_action=Action.LESSON_SUPERSEDE,
)


def status_followed(item: Case | Skill | Lesson, *, now: datetime) -> None:
    """Every effect of an item's new status, named, in the decision's transaction:

    - the retrieval index: an approved item is indexed, any other status takes it out
      (``experience.index.postings.item_status_followed``);
    - a case's status reaches the index entries of the lessons citing it
      (``experience.index.lesson_inputs.case_status_followed``);
    - ``curation``, above ``experience``, hears :class:`ItemStatusChanged`: the item's re-review
      entries close (or, for a lesson turned outdated, one opens and its approvers are mailed),
      and a revoked item's approvers are mailed (docs/architecture.md, "Events")."""
    postings.item_status_followed(item=item)
    if isinstance(item, Case):
        lesson_inputs.case_status_followed(item=item)
    dispatch(ItemStatusChanged(item=item, now=now))
