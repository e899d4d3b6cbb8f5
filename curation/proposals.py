"""Skill proposal decisions: a proposal is adopted as a candidate skill, or dismissed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction

from curation.checks import ADOPT_REFUSED, REVIEW_REFUSED, reason_given
from curation.models import ProposalStatus, SkillProposal
from curation.selectors.proposals import proposal_still_proven, proposal_support, proposal_validity
from experience.cases.models import Skill
from experience.cases.schema import parse_skill
from experience.cases.services import skill_submit
from experience.cases.tools import tool_specs
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import ADD_SKILL, REVIEW_CASE, require
from reviewconsole.timeparse import to_utc_iso

if TYPE_CHECKING:
    from django.contrib.auth.models import User

PROPOSAL_CLOSED = "this proposal is not open"
NO_LONGER_PROVEN = (
    "the success pattern it was drafted from is no longer approved, available and confirmed "
    "often enough"
)
SUPPORT_TOO_LOW = (
    "its cases that are still approved and current span fewer distinct incidents than a "
    "proposal needs"
)


@transaction.atomic
def proposal_adopt(
    *,
    proposal: SkillProposal,
    actor: User,
    title: str,
    when: str,
    queries: Sequence[str],
    now: datetime | None = None,
) -> Skill:
    """Turn a proposal into a candidate skill with ``actor`` as its submitter, so someone else
    must approve it (four eyes); the recipe is validated like any other."""
    require(actor, ADD_SKILL, proposal.tenant, message=ADOPT_REFUSED)
    proposal = SkillProposal.objects.select_for_update().get(pk=proposal.pk)
    if proposal.status != ProposalStatus.OPEN:
        raise ValidationFailure("proposal", PROPOSAL_CLOSED)
    now = now or clock.now()
    if not proposal_support(proposal, now).enough:
        raise ValidationFailure("proposal", SUPPORT_TOO_LOW)
    if not proposal_still_proven(proposal, now):
        raise ValidationFailure("proposal", NO_LONGER_PROVEN)
    valid_from, valid_to = proposal_validity(proposal, now)
    recipe = [{"tool": "search_knowledge", "arguments": {"query": q}} for q in queries if q.strip()]
    data = {
        "type": "skill",
        "scope": proposal.scope,
        "title": title,
        "when": when,
        "recipe": recipe,
        "cases": list(proposal.case_ids),
        "valid_from": to_utc_iso(valid_from),
        "valid_to": to_utc_iso(valid_to),
    }
    skill, _created = skill_submit(content=parse_skill(data, tool_specs()), actor=actor, now=now)
    proposal.status = ProposalStatus.ADOPTED
    proposal.skill_id = skill.id
    proposal.resolved_by = actor
    proposal.resolved_at = now
    proposal.save(update_fields=["status", "skill_id", "resolved_by", "resolved_at"])
    event_record(
        actor=actor,
        action=Action.PROPOSAL_ADOPT,
        target=skill.id,
        details={"proposal": proposal.pk, "pattern": [proposal.pattern_kind, proposal.pattern]},
        at=now,
    )
    return skill


@transaction.atomic
def proposal_dismiss(
    *, proposal: SkillProposal, actor: User, reason: str, now: datetime | None = None
) -> SkillProposal:
    require(actor, REVIEW_CASE, proposal.tenant, message=REVIEW_REFUSED)
    reason = reason_given(reason)
    proposal = SkillProposal.objects.select_for_update().get(pk=proposal.pk)
    if proposal.status != ProposalStatus.OPEN:
        raise ValidationFailure("proposal", PROPOSAL_CLOSED)
    proposal.status = ProposalStatus.DISMISSED
    proposal.resolved_by = actor
    now = now or clock.now()
    proposal.resolved_at = now
    proposal.reason = reason
    proposal.save(update_fields=["status", "resolved_by", "resolved_at", "reason"])
    event_record(
        actor=actor,
        action=Action.PROPOSAL_DISMISS,
        target=f"proposal:{proposal.pk}",
        reason=reason,
        details={"pattern": [proposal.pattern_kind, proposal.pattern]},
        at=now,
    )
    return proposal
