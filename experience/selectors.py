"""Reads of the experience memory: lookups, approval checklists, availability and impact."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.db.models import Exists, OuterRef, QuerySet

from experience import domain
from experience.guards import guard_unmet
from experience.models import (
    Case,
    Evidence,
    EvidenceCheck,
    Lesson,
    Reference,
    RevocationImpact,
    Run,
    RunCitation,
    Skill,
    SkillCase,
)
from experience.outcome_models import RunOwner
from knowledge import selectors as knowledge_selectors
from knowledge.models import Document
from reviewconsole import clock, itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.permissions import REVIEW_CASE, holds
from reviewconsole.tenancy import may_access

if TYPE_CHECKING:
    from django.contrib.auth.models import User

NO_SUCH_CASE = "no case with this id"
NO_SUCH_SKILL = "no skill with this id"
NO_SUCH_LESSON = "no lesson with this id"
NO_SUCH_DOCUMENT = "no knowledge document with this id"
DOCUMENT_IN_SEVERAL_TENANTS = (
    "names a document in several tenants (each tenant has its own keys); "
    "only a user limited to one of them can review it by this id"
)
UNKNOWN_ID = "must be a case:…, skill:…, lesson:… or doc:KEY@VERSION id"


def case_get(case_id: str, *, field: str = "id", user: User | None = None) -> Case:
    """The case with this id; with ``user``, only one of a tenant the user sees: another
    tenant's case is answered exactly as an unknown id (ids never tell what exists elsewhere)."""
    case = Case.objects.select_related("submitted_by", "approved_by").filter(pk=case_id).first()
    if case is None or (user is not None and not may_access(user, case.tenant)):
        raise ValidationFailure(field, f"{NO_SUCH_CASE}: {case_id}")
    return case


def skill_get(skill_id: str, *, field: str = "id", user: User | None = None) -> Skill:
    """The skill with this id, as ``case_get`` finds a case."""
    skill = Skill.objects.select_related("submitted_by", "approved_by").filter(pk=skill_id).first()
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
    return list(case.evidence_items.prefetch_related("checks__checked_by").order_by("position"))


def reviewer_of(user: User) -> domain.Reviewer:
    return domain.Reviewer(
        user_id=int(user.pk),
        can_review=holds(user, REVIEW_CASE),
    )


def case_facts(case: Case) -> domain.CaseFacts:
    # domain.check_counts in SQL: a check by the submitter does not count.
    counting = EvidenceCheck.objects.filter(evidence=OuterRef("pk")).exclude(
        checked_by_id=case.submitted_by_id
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
    return cast(_Links, links.annotate(canonical_incident=expression(case))), "canonical_incident"


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


def cited_case(case: Case) -> domain.CitedCase:
    """``incident`` is the canonical incident when the row was loaded by ``skill_cases``."""
    return domain.CitedCase(
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


def skill_facts(skill: Skill) -> domain.SkillFacts:
    return domain.SkillFacts(
        status=skill.status,
        submitted_by=int(skill.submitted_by_id),
        scope=skill.scope,
        valid_to=skill.valid_to,
        cases=tuple(cited_case(case) for case in skill_cases(skill)),
    )


def case_approval_checklist(*, case: Case, reviewer: User, reason: str, now: datetime) -> list[str]:
    """The unmet conditions approval would report right now (the console's live checklist)."""
    unmet = domain.case_approval_unmet(
        case_facts(case), reviewer=reviewer_of(reviewer), reason=reason, now=now
    )
    return unmet + guard_unmet(case, unmet)


def skill_approval_checklist(
    *, skill: Skill, reviewer: User, reason: str, now: datetime
) -> list[str]:
    return domain.skill_approval_unmet(
        skill_facts(skill), reviewer=reviewer_of(reviewer), reason=reason, now=now
    )


def gate_fields(item: Case | Skill | Lesson) -> domain.GateFields:
    return domain.GateFields(
        status=item.status,
        scope=item.scope,
        valid_from=item.valid_from,
        valid_to=item.valid_to,
        approved_at=item.approved_at,
    )


def skill_availability(skill_id: str, now: datetime) -> tuple[Skill | None, domain.Availability]:
    """Read the skill and its cited cases afresh and say whether it may be used now."""
    skill = Skill.objects.filter(pk=skill_id).first()
    if skill is None:
        return None, domain.Availability(False, "no skill with this id")
    cases = [cited_case(case) for case in skill_cases(skill)]
    return skill, domain.skill_availability(gate_fields(skill), cases, now)


# --- revocation impact -------------------------------------------------------------------------


@dataclass(frozen=True)
class Impact:
    skills: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    # Lessons that revoking a case leaves without a usable supporting case.
    lessons: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        # ``lessons`` appears only when a revocation reaches any, so the shape callers of
        # cases, skills and documents already read stays as it was.
        shape: dict[str, Any] = {"skills": list(self.skills), "runs": list(self.runs)}
        if self.lessons:
            shape["lessons"] = list(self.lessons)
        return shape


def _claimed_elsewhere(tenant: str | None) -> QuerySet[RunOwner, Any] | None:
    """Run ids opened in a tenant other than ``tenant``: never part of its items' impact."""
    if tenant is None:
        return None
    return RunOwner.objects.exclude(tenant__in=["", tenant]).values("run_id")


def item_tenant(item_id: str) -> str | None:
    """The tenant of a case, skill, lesson or document version, or None for an unknown id."""
    kind = domain.item_type(item_id)
    if kind == "document":
        try:
            key, version = itemids.parse(item_id, kinds=(itemids.DOCUMENT,)).key_version
        except ValidationFailure:
            return None
        documents = Document.objects.filter(doc_key=key, version=version)
        return documents.values_list("tenant", flat=True).first()
    models: dict[str | None, type[Case | Skill | Lesson]] = {
        "case": Case,
        "skill": Skill,
        "lesson": Lesson,
    }
    model = models.get(kind)
    if model is None:
        return None
    return model.objects.filter(pk=item_id).values_list("tenant", flat=True).first()


def runs_referencing(item_ids: list[str], tenant: str | None = None) -> list[str]:
    """Run ids that read any of these items, leaving out runs opened in a tenant other than
    ``tenant``; answered from the (item_id, run_id) index and the run owners' unique index."""
    if not item_ids:
        return []
    reads = Reference.objects.filter(item_id__in=item_ids)
    elsewhere = _claimed_elsewhere(tenant)
    if elsewhere is not None:
        reads = reads.exclude(run_id__in=elsewhere)
    return sorted(set(reads.order_by().values_list("run_id", flat=True).distinct()))


def skills_citing(case_id: str) -> list[str]:
    return sorted(
        SkillCase.objects.filter(case_id=case_id)
        .order_by()
        .values_list("skill_id", flat=True)
        .distinct()
    )


def runs_citing_document(public_id: str, tenant: str | None = None) -> list[str]:
    """Runs whose tool results cited the document: a skill run's citations, and the reads an
    investigation records for every document its searches returned; without runs opened in a
    tenant other than ``tenant``."""
    cited = RunCitation.objects.filter(document_id=public_id)
    read = Reference.objects.filter(item_id=public_id)
    elsewhere = _claimed_elsewhere(tenant)
    if elsewhere is not None:
        cited = cited.exclude(run_id_text__in=elsewhere)
        read = read.exclude(run_id__in=elsewhere)
    # One query: UNION also removes the repeats.
    return sorted(
        cited.order_by()
        .values_list("run_id_text", flat=True)
        .union(read.order_by().values_list("run_id", flat=True))
    )


def revocation_impact(item_id: str, *, tenant: str | None = None) -> Impact:
    """What revoking ``item_id`` reaches (skills citing it, runs that read it): the preview.

    Only runs of the item's own tenant are listed: a run opened in another tenant never read it
    (``experience.run_claims``), and its id is not for this tenant's reviewers to see. A
    document is named within its ``tenant`` (``doc:KEY@N`` may name one in several tenants), so
    its callers pass it; other items' tenants are read from their rows."""
    kind = domain.item_type(item_id)
    if kind not in ("case", "skill", "lesson", "document"):
        raise ValidationFailure("id", UNKNOWN_ID)
    if kind == "document" and tenant is None:
        raise ValueError("a document's revocation impact needs its tenant")
    tenant = tenant if tenant is not None else item_tenant(item_id)
    if kind == "case":
        from experience.lesson_selectors import lessons_losing_support

        skills = skills_citing(item_id)
        lessons = lessons_losing_support(item_id, clock.now())
        return Impact(
            skills=skills,
            lessons=lessons,
            runs=runs_referencing([item_id, *skills, *lessons], tenant),
        )
    if kind in ("skill", "lesson"):
        return Impact(skills=[], runs=runs_referencing([item_id], tenant))
    if kind == "document":
        return Impact(skills=[], runs=runs_citing_document(item_id, tenant))
    raise ValidationFailure("id", UNKNOWN_ID)


def stored_impacts(item_id: str) -> QuerySet[RevocationImpact]:
    return RevocationImpact.objects.filter(item_id=item_id).select_related("revoked_by")


def runs_for(run_id: str) -> QuerySet[Run]:
    return Run.objects.filter(run_id=run_id).prefetch_related("citations")


def references_for(run_id: str) -> QuerySet[Reference]:
    return Reference.objects.filter(run_id=run_id)
