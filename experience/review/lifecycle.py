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
from functools import partial
from typing import Any, Generic, TypeVar

from django.contrib.auth.models import User

from experience.cases.models import Case, Skill
from experience.cases.selectors import (
    case_approval_checklist,
    reviewer_of,
    skill_approval_checklist,
)
from experience.core import domain
from experience.core.models import ItemType, Status
from experience.core.review import Impact, ReviewOutcome, ReviewRefused, require_item_tenant
from experience.index import lesson_inputs, postings
from experience.lessons.models import Lesson
from experience.lessons.selectors import lesson_approval_checklist
from experience.review.events import ItemStatusChanged
from experience.review.impact import impact_store, revocation_impact
from reviewconsole import accounts, claims, clock
from reviewconsole.audit import event_record
from reviewconsole.conversations import Subject, open_threads_count
from reviewconsole.dispatch import dispatch
from reviewconsole.models import Action
from reviewconsole.permissions import REVIEW_CASE

I = TypeVar("I", Case, Skill, Lesson)  # noqa: E741


@dataclass(frozen=True)
class ReviewKind(Generic[I]):
    """One kind of reviewed item, as the lifecycle needs it."""

    item_type: ItemType
    model: type[I]
    # Every unmet condition of approving the item now, by name (``item``, then keywords
    # ``reviewer``, ``reason``, ``now``): the selector the console's live checklist shows, so the
    # page and the decision agree.
    approval_unmet: Callable[..., list[str]]
    approve_action: Action
    reject_action: Action
    revoke_action: Action
    # None for a kind without versions (skills).
    supersede_action: Action | None

    def locked(self, item: I) -> I:
        """The row again, locked for the decision (a concurrent decision waits, then sees it)."""
        row: I = self.model._default_manager.select_for_update().get(pk=item.pk)
        return row

    def _decided(
        self,
        item: I,
        actor: User,
        reason: str,
        now: datetime,
        status: Status,
        unmet: Callable[[I], list[str]],
        take_over: bool = False,
    ) -> I:
        """Lock an item of the actor's tenant and refuse with every unmet condition named
        (nothing written); else give it ``status`` with who decided, when and why (the fields
        named after the status: ``approved_by``, ``approved_at``, ``approved_reason``…).

        Another reviewer's unlapsed claim on the item refuses the decision
        (``claimed_by_other``) unless the actor takes it over (``take_over``, audited); the
        decision ends the item's claim (``reviewconsole.claims``)."""
        require_item_tenant(actor, item)
        item = self.locked(item)
        refused = unmet(item) + claims.decision_unmet(
            actor=actor, item_id=item.id, tenant=item.tenant, take_over=take_over, now=now
        )
        if refused:
            raise ReviewRefused(item.id, item.status, refused)
        claims.decision_settle(actor=actor, item_id=item.id, tenant=item.tenant, now=now)
        item.status = status
        decided: dict[str, object] = {
            f"{status.value}_by": actor,
            f"{status.value}_at": now,
            f"{status.value}_reason": reason.strip(),
        }
        for name, value in decided.items():
            setattr(item, name, value)
        item.save(update_fields=["status", *decided])
        return item

    def approved(
        self, item: I, *, actor: User, reason: str, now: datetime, take_over: bool = False
    ) -> I:
        """Approve a candidate under its kind's rules and audit it."""
        rules = partial(self.approval_unmet, reviewer=actor, reason=reason, now=now)
        item = self._decided(item, actor, reason, now, Status.APPROVED, rules, take_over)
        details: dict[str, Any] = dict(accounts.provenance(actor))
        # Open threads warn, they do not block (docs/architecture.md, "The review lifecycle"):
        # the approval records how many it went through with.
        open_threads = open_threads_count(
            Subject(item.id, item.tenant, int(item.submitted_by_id), REVIEW_CASE)
        )
        if open_threads:
            details["open_threads"] = open_threads
        _audited(self.approve_action, item, actor, reason, now, details)
        return item

    def rejected(
        self, item: I, *, actor: User, reason: str, now: datetime, take_over: bool = False
    ) -> I:
        """Reject a candidate (a reviewer, a reason) and audit it."""
        rules = partial(_status_unmet, domain.rejection_unmet, actor=actor, reason=reason)
        item = self._decided(item, actor, reason, now, Status.REJECTED, rules, take_over)
        _audited(self.reject_action, item, actor, reason, now)
        return item

    def revoked(self, item: I, *, actor: User, reason: str, now: datetime) -> tuple[I, Impact]:
        """Revoke an approved (or outdated) item (a reviewer, a reason): what it reached is
        computed once it is revoked, stored (its runs flagged for follow-up) and recorded in its
        audit event."""
        rules = partial(_status_unmet, domain.revocation_unmet, actor=actor, reason=reason)
        item = self._decided(item, actor, reason, now, Status.REVOKED, rules)
        impact = revocation_impact(item.id, now=now)
        impact_store(item.id, self.item_type, impact, actor=actor, reason=reason.strip(), now=now)
        _audited(self.revoke_action, item, actor, reason, now, {"impact": impact.as_json()})
        return item, impact

    def superseded(self, old_id: str, *, by: I, actor: User, now: datetime) -> I | None:
        """Mark the approved (or, for a lesson, outdated) version ``old_id`` superseded by
        ``by`` and audit it; None when there is no such version. Only a version of the new
        one's tenant is ever superseded, even by a row stored before submission refused other
        tenants' ids."""
        old: I | None = (
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


def _status_unmet(
    rule: Callable[..., list[str]], item: Case | Skill | Lesson, *, actor: User, reason: str
) -> list[str]:
    """A rejection's or revocation's rule (``experience.core.domain``) asked of ``item``."""
    return rule(status=item.status, reviewer=reviewer_of(actor), reason=reason)


def _audited(
    action: Action,
    item: Case | Skill | Lesson,
    actor: User,
    reason: str,
    now: datetime,
    details: dict[str, Any] | None = None,
) -> None:
    event_record(
        actor=actor, action=action, target=item.id, reason=reason.strip(), details=details, at=now
    )


CASE = ReviewKind(
    item_type=ItemType.CASE,
    model=Case,
    approval_unmet=lambda case, **rest: case_approval_checklist(case=case, **rest),
    approve_action=Action.CASE_APPROVE,
    reject_action=Action.CASE_REJECT,
    revoke_action=Action.CASE_REVOKE,
    supersede_action=Action.CASE_SUPERSEDE,
)

SKILL = ReviewKind(
    item_type=ItemType.SKILL,
    model=Skill,
    approval_unmet=lambda skill, **rest: skill_approval_checklist(skill=skill, **rest),
    approve_action=Action.SKILL_APPROVE,
    reject_action=Action.SKILL_REJECT,
    revoke_action=Action.SKILL_REVOKE,
    supersede_action=None,
)

LESSON = ReviewKind(
    item_type=ItemType.LESSON,
    model=Lesson,
    approval_unmet=lambda lesson, **rest: lesson_approval_checklist(lesson=lesson, **rest),
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


def approval(
    kind: ReviewKind[I],
    item: I,
    *,
    actor: User,
    reason: str,
    now: datetime,
    take_over: bool = False,
) -> I:
    """An approval with nothing more to it than the row and its effects (a skill's)."""
    item = kind.approved(item, actor=actor, reason=reason, now=now, take_over=take_over)
    status_followed(item, now=now)
    return item


def rejection(
    kind: ReviewKind[I],
    item: I,
    *,
    actor: User,
    reason: str,
    now: datetime,
    take_over: bool = False,
) -> ReviewOutcome:
    """A rejection, the same for every kind: the row and its audit event, then its effects (an
    item never approved is in no index; curation closes what it had opened for it)."""
    item = kind.rejected(item, actor=actor, reason=reason, now=now, take_over=take_over)
    status_followed(item, now=now)
    return ReviewOutcome(item.id, item.status)


def revocation(
    kind: ReviewKind[I], item: I, *, actor: User, reason: str, now: datetime | None = None
) -> tuple[I, ReviewOutcome]:
    """A revocation: the row, its impact stored and its audit event, then its effects (out of
    the index; curation closes its re-review entries and mails whoever approved it, the impact
    in the mail).

    Its moment, unless given, is read once the row is held: a skill run's finish holds the rows
    it cites until it commits, so a run that committed first also finished before the
    revocation's ``revoked_at``, and every run finished after it saw it."""
    require_item_tenant(actor, item)
    item = kind.locked(item)
    now = now or clock.now()
    item, impact = kind.revoked(item, actor=actor, reason=reason, now=now)
    status_followed(item, now=now)
    return item, ReviewOutcome(item.id, item.status, impact)
