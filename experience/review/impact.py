"""What revoking an item reaches: the skills and lessons citing it and the runs that read them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import QuerySet

from experience.cases.models import Case, Skill, SkillCase
from experience.cases.selectors import UNKNOWN_ID
from experience.core import domain
from experience.core.review import Impact
from experience.lessons.models import Lesson
from experience.lessons.selectors import lessons_losing_support
from experience.runs.models import RevocationImpact
from experience.runs.selectors import runs_citing_document, runs_referencing
from knowledge.models import Document
from reviewconsole import clock, itemids
from reviewconsole.errors import ValidationFailure

if TYPE_CHECKING:
    pass


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


def skills_citing(case_id: str) -> list[str]:
    return sorted(
        SkillCase.objects.filter(case_id=case_id)
        .order_by()
        .values_list("skill_id", flat=True)
        .distinct()
    )


def revocation_impact(
    item_id: str, *, tenant: str | None = None, now: datetime | None = None
) -> Impact:
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
        skills = skills_citing(item_id)
        lessons = lessons_losing_support(item_id, now or clock.now())
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
