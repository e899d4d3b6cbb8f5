"""Reads of the experience memory: lookups, approval checklists, availability and impact."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.db.models import Exists, OuterRef, Prefetch, QuerySet

from experience.cases.guards import guard_unmet
from experience.cases.models import Case, Evidence, EvidenceCheck, Skill, SkillCase
from experience.cases.prompting import prompt_tools
from experience.core import availability, domain
from experience.core.availability import Availability, CitedCase, GateFields
from experience.core.models import ReviewedItem
from experience.core.prompts import tool_problem
from experience.core.review import NO_SUCH_CASE, NO_SUCH_SKILL
from knowledge import selectors as knowledge_selectors
from knowledge.models import Document
from reviewconsole import accounts, itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.permissions import REVIEW_CASE, holds
from reviewconsole.tenancy import may_access

if TYPE_CHECKING:
    from django.contrib.auth.models import User


NO_SUCH_DOCUMENT = "no knowledge document with this id"


DOCUMENT_IN_SEVERAL_TENANTS = (
    "names a document in several tenants (each tenant has its own keys); "
    "only a user limited to one of them can review it by this id"
)


UNKNOWN_ID = "must be a case:…, skill:…, lesson:… or doc:KEY@VERSION id"


def case_get(case_id: str, *, field: str = "id", user: User | None = None) -> Case:
    """The case with this id; with ``user``, only one of a tenant the user sees: another
    tenant's case is answered exactly as an unknown id (ids never tell what exists elsewhere)."""
    case: Case | None = (
        Case.objects.select_related("submitted_by", "approved_by").filter(pk=case_id).first()
    )
    if case is None or (user is not None and not may_access(user, case.tenant)):
        raise ValidationFailure(field, f"{NO_SUCH_CASE}: {case_id}")
    return case


def skill_get(skill_id: str, *, field: str = "id", user: User | None = None) -> Skill:
    """The skill with this id, as ``case_get`` finds a case."""
    skill: Skill | None = (
        Skill.objects.select_related("submitted_by", "approved_by").filter(pk=skill_id).first()
    )
    if skill is None or (user is not None and not may_access(user, skill.tenant)):
        raise ValidationFailure(field, f"{NO_SUCH_SKILL}: {skill_id}")
    return skill


def document_get(public_id: str, *, user: User, field: str = "id") -> Document:
    """The knowledge document a ``doc:KEY@N`` id names among the tenants ``user`` sees (review
    takes documents beside items). Another tenant's document is answered as an unknown id; a
    key that a deployment-wide user sees in several tenants is refused, naming them."""
    key, version = itemids.parse(public_id, field=field, kinds=(itemids.DOCUMENT,)).key_version
    named = knowledge_selectors.documents_named(key, version, user)
    if not named:
        raise ValidationFailure(field, f"{NO_SUCH_DOCUMENT}: {public_id}")
    if len(named) > 1:
        tenants = ", ".join(document.tenant for document in named)
        raise ValidationFailure(field, f"{public_id} {DOCUMENT_IN_SEVERAL_TENANTS}: {tenants}")
    return named[0]


def case_evidence(case: Case) -> list[Evidence]:
    """The case's evidence items with their checks, each check's account and whose it is
    (``reviewconsole.accounts``) read with it."""
    checks = EvidenceCheck.objects.select_related("checked_by", "checked_by__origin")
    return list(
        case.evidence_items.prefetch_related(Prefetch("checks", queryset=checks)).order_by(
            "position"
        )
    )


def reviewer_of(user: User, *, holder: int | None = None) -> domain.Reviewer:
    """``user`` as a decider; ``holder``: whose account it is, when the caller read it already."""
    return domain.Reviewer(
        user_id=int(user.pk),
        can_review=holds(user, REVIEW_CASE),
        holder=accounts.holder_of(int(user.pk)) if holder is None else holder,
    )


def decider_and_submitter(user: User, submitted_by: int) -> tuple[domain.Reviewer, int]:
    """The decider and whose account the submitter's is, read in one query."""
    holders = accounts.holders_of([int(user.pk), submitted_by])
    return reviewer_of(user, holder=holders[int(user.pk)]), holders[submitted_by]


def case_facts(case: Case, *, submitter_holder: int | None = None) -> domain.CaseFacts:
    # domain.check_counts in SQL: a check by the submitter, or by an account of the same
    # holder (reviewconsole.accounts), does not count.
    if submitter_holder is None:
        submitter_holder = accounts.holder_of(int(case.submitted_by_id))
    counting = (
        EvidenceCheck.objects.filter(evidence=OuterRef("pk"))
        .annotate(checker_holder=accounts.holder_expression("checked_by"))
        .exclude(checker_holder=submitter_holder)
    )
    checked = (
        Evidence.objects.filter(case=case, section="diagnosis").filter(Exists(counting)).count()
    )
    with_evidence = sum(1 for entry in case.counterevidence if entry.get("evidence"))
    return domain.CaseFacts(
        status=case.status,
        submitted_by=int(case.submitted_by_id),
        valid_to=case.valid_to,
        diagnosis_statement=str(case.diagnosis.get("statement", "")),
        checked_diagnosis_evidence=checked,
        counterevidence_with_evidence=with_evidence,
        submitter_holder=submitter_holder,
    )


# --- incident identity (extension point) ---------------------------------------------------------
# Two summaries of one incident count once, and a reviewer may later record that two incident
# ids name one incident. The app keeping those records installs, once at start-up, a factory of
# the query expression for a case's canonical incident, given the lookup path of the case row
# ("case" when loaded through SkillCase). Without one, an incident is itself. The expression is
# evaluated inside the query that loads the cases, so counting costs no extra query.
CanonicalIncidentExpression = Callable[[str], Any]


_Links = TypeVar("_Links", bound="QuerySet[Any]")


_incident_identity: dict[str, CanonicalIncidentExpression] = {}


def canonical_incident_install(expression: CanonicalIncidentExpression | None) -> None:
    _incident_identity.pop("expression", None)
    if expression is not None:
        _incident_identity["expression"] = expression


def with_canonical_incident(links: _Links, case: str = "case") -> tuple[_Links, str]:
    """``links`` (rows citing a case at ``case``) with each case's canonical incident, and the
    name to read it by: the installed expression's annotation, or the case's own incident."""
    expression = _incident_identity.get("expression")
    if expression is None:
        return links, f"{case}__incident"
    return links.annotate(canonical_incident=expression(case)), "canonical_incident"


def cited_case_columns(incident: str) -> tuple[str, ...]:
    """What a cited case's confidence reads through a link row (``SkillCase``, ``LessonCase``):
    its id, status, canonical incident (``incident``, from :func:`with_canonical_incident`),
    gate times and approval time, in that order."""
    return (
        "case_id",
        "case__status",
        incident,
        "case__valid_from",
        "case__valid_to",
        "case__approved_at",
    )


def cited_case(case: Case) -> CitedCase:
    """``incident`` is the canonical incident when the row was loaded by ``skill_cases``."""
    return CitedCase(
        case_id=case.id,
        status=case.status,
        scope=case.scope,
        incident=getattr(case, "canonical_incident", None) or case.incident,
        valid_from=case.valid_from,
        valid_to=case.valid_to,
    )


def skill_cases(skill: Skill) -> list[Case]:
    links, _ = with_canonical_incident(SkillCase.objects.filter(skill=skill).select_related("case"))
    cases = []
    for link in links:
        link.case.canonical_incident = getattr(link, "canonical_incident", link.case.incident)  # type: ignore[attr-defined]
        cases.append(link.case)
    return cases


def skill_facts(skill: Skill, *, submitter_holder: int | None = None) -> domain.SkillFacts:
    registered = prompt_tools()
    tools = (skill.prompt or {}).get("tools") or []
    return domain.SkillFacts(
        status=skill.status,
        submitted_by=int(skill.submitted_by_id),
        scope=skill.scope,
        valid_to=skill.valid_to,
        cases=tuple(cited_case(case) for case in skill_cases(skill)),
        disallowed_tools=tuple(
            str(name) for name in tools if tool_problem(str(name), registered) is not None
        ),
        submitter_holder=accounts.holder_of(int(skill.submitted_by_id))
        if submitter_holder is None
        else submitter_holder,
        has_body=bool(skill.recipe) or bool(skill.prompt),
    )


def case_approval_checklist(*, case: Case, reviewer: User, reason: str, now: datetime) -> list[str]:
    """The unmet conditions approval would report right now (the console's live checklist)."""
    decider, submitter_holder = decider_and_submitter(reviewer, int(case.submitted_by_id))
    unmet = domain.case_approval_unmet(
        case_facts(case, submitter_holder=submitter_holder),
        reviewer=decider,
        reason=reason,
        now=now,
    )
    return unmet + guard_unmet(case, unmet)


def skill_approval_checklist(
    *, skill: Skill, reviewer: User, reason: str, now: datetime
) -> list[str]:
    decider, submitter_holder = decider_and_submitter(reviewer, int(skill.submitted_by_id))
    return domain.skill_approval_unmet(
        skill_facts(skill, submitter_holder=submitter_holder),
        reviewer=decider,
        reason=reason,
        now=now,
    )


def gate_fields(item: ReviewedItem) -> GateFields:
    return GateFields(
        status=item.status,
        scope=item.scope,
        valid_from=item.valid_from,
        valid_to=item.valid_to,
        approved_at=item.approved_at,
    )


def skill_availability(skill_id: str, now: datetime) -> tuple[Skill | None, Availability]:
    """Read the skill and its cited cases afresh and say whether it may be used now."""
    skill = Skill.objects.filter(pk=skill_id).first()
    if skill is None:
        return None, Availability(False, "no skill with this id")
    cases = [cited_case(case) for case in skill_cases(skill)]
    return skill, availability.skill_availability(gate_fields(skill), cases, now)
