"""The conditions of a review decision as checklist lines: what each unmet name asks for, the
conditions each kind's approval lists, and a refused write's unmet conditions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.utils.translation import gettext_lazy as _

from experience.core import domain
from experience.core.review import ReviewRefused
from experience.lessons import domain as lesson_domain
from reviewconsole.claims import CLAIMED_BY_OTHER
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.tenancy import NOT_IN_TENANT
from reviewconsole.views import Checklist, Condition, checklist_of

# What each unmet condition asks for, phrased so it reads as a checklist line (the names are in
# docs/contracts.md, Unmet conditions).
CONDITION_LABELS = {
    domain.NOT_REVIEWER: _("You hold the reviewer permission"),
    domain.REASON_REQUIRED: _("A reason is written"),
    domain.NOT_CANDIDATE: _("It is still a candidate"),
    domain.NOT_APPROVED: _("It is approved"),
    domain.EXPIRED: _("Its validity has not ended"),
    domain.OWN_SUBMISSION: _("Someone other than the submitter approves it (four eyes)"),
    domain.NOT_INDEPENDENT: _(
        "The approver's account and the submitter's are not one person's (neither created the "
        "other with a password, nor did one admin create both)"
    ),
    domain.NO_DIAGNOSIS: _(
        "The diagnosis states a cause (empty, “unknown” or “not yet determined” does not count)"
    ),
    domain.NO_CHECKED_DIAGNOSIS_EVIDENCE: _(
        "Someone other than the submitter checked at least one diagnosis evidence item"
    ),
    domain.NO_COUNTEREVIDENCE: _("At least one counterevidence entry cites evidence"),
    domain.TOO_FEW_INCIDENTS: _("Usable cited cases come from at least two distinct incidents"),
    domain.CASE_UNAVAILABLE: _("Every cited case is approved and within its validity"),
    domain.SCOPE_MISMATCH: _("Every cited case has exactly the skill's scope"),
    domain.CITES_HELDOUT_TICKET: _("Its evidence cites no held-out evaluation ticket"),
    domain.PROMPT_TOOL_NOT_ALLOWED: _(
        "Every tool its prompt declares is a registered read-only investigation tool"
    ),
    domain.NO_RECIPE: _("It has a recipe with steps or a prompt"),
    lesson_domain.NO_SUPPORTING_CASE: _(
        "A supporting case is approved, unexpired and of the lesson's scope"
    ),
    lesson_domain.CONFLICT_UNRESOLVED: _("The lesson it replaces is in no unresolved conflict"),
    NOT_IN_TENANT: _("You are a member of the item's tenant"),
    CLAIMED_BY_OTHER: _("Nobody else holds an unlapsed claim on it, or you take their claim over"),
    "not_permitted": _("You hold the permission this needs"),
}
# A lesson's cited cases share the lesson's scope (not a skill's).
LESSON_LABELS = {
    **CONDITION_LABELS,
    domain.SCOPE_MISMATCH: _("Every cited case has exactly the lesson's scope"),
}
CASE_CONDITIONS = (
    domain.NOT_REVIEWER,
    domain.REASON_REQUIRED,
    domain.NOT_CANDIDATE,
    domain.EXPIRED,
    domain.OWN_SUBMISSION,
    domain.NO_DIAGNOSIS,
    domain.NO_CHECKED_DIAGNOSIS_EVIDENCE,
    domain.NO_COUNTEREVIDENCE,
)
LESSON_CONDITIONS = (
    domain.NOT_REVIEWER,
    domain.REASON_REQUIRED,
    domain.NOT_CANDIDATE,
    domain.EXPIRED,
    domain.OWN_SUBMISSION,
    lesson_domain.NO_SUPPORTING_CASE,
    domain.SCOPE_MISMATCH,
    lesson_domain.CONFLICT_UNRESOLVED,
)
SKILL_CONDITIONS = (
    domain.NOT_REVIEWER,
    domain.REASON_REQUIRED,
    domain.NOT_CANDIDATE,
    domain.EXPIRED,
    domain.OWN_SUBMISSION,
    domain.CASE_UNAVAILABLE,
    domain.SCOPE_MISMATCH,
    domain.TOO_FEW_INCIDENTS,
)
# A prompt-form skill's checklist adds its tools: each still a registered read-only one.
PROMPT_SKILL_CONDITIONS = (*SKILL_CONDITIONS, domain.PROMPT_TOOL_NOT_ALLOWED)


def conditions(
    universe: Sequence[str], unmet: Iterable[str], labels: Mapping[str, Any] = CONDITION_LABELS
) -> Checklist:
    """Every condition of ``universe`` marked met or not, plus any other unmet name reported."""
    return checklist_of(universe, unmet, labels)


def refusal(unmet: Iterable[str], labels: Mapping[str, Any] = CONDITION_LABELS) -> list[Condition]:
    return [Condition(name, str(labels.get(name, name)), False) for name in unmet]


# What a write may be refused with: a review's unmet conditions, the permission or tenant, a value.
Refused = ReviewRefused | PermissionRefused | ValidationFailure
REFUSED = (ReviewRefused, PermissionRefused, ValidationFailure)


def refusal_of(error: Refused, labels: Mapping[str, Any] = CONDITION_LABELS) -> list[Condition]:
    """What a refused write left unmet, as checklist lines: a review's unmet conditions, the
    permission or tenant refused, or the value refused in its field."""
    if isinstance(error, ReviewRefused):
        return refusal(error.unmet, labels)
    if isinstance(error, PermissionRefused):
        return refusal([error.unmet], labels)
    return [Condition(error.field, error.message, False)]
