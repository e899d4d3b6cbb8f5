"""What revoking an item reaches: the skills and lessons citing it, the lesson conflicts whose side
changes, and the runs (and context blocks) that read them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet

from experience.cases.models import Case, Skill, SkillCase
from experience.cases.selectors import UNKNOWN_ID
from experience.core import domain
from experience.core.review import Impact
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.lessons.selectors import lessons_losing_support
from experience.runs.models import RevocationImpact
from experience.runs.selectors import context_blocks_among, runs_citing_document, runs_referencing
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
    """What revoking ``item_id`` reaches: the preview, and the list a revocation stores. The
    one function every surface of impact reads (the console's preview and confirmation, the
    stored list, the revocation mail, ``review --preview``).

    A case reaches the skills citing it, the lessons it leaves without a usable supporting
    case, and the runs that read any of them; a skill or lesson, the runs that read it; a
    lesson also its open conflicts, a case those of the lessons it leaves unavailable. Of those
    runs, ``context_blocks`` names the ones whose context block carried one of the items.

    Only runs of the item's own tenant are listed: a run opened in another tenant never read it
    (``experience.runs.claims``), and its id is not for this tenant's reviewers to see. A
    document is named within its ``tenant`` (``doc:KEY@N`` may name one in several tenants), so
    its callers pass it; other items' tenants are read from their rows."""
    kind = domain.item_type(item_id)
    if kind not in ("case", "skill", "lesson", "document"):
        raise ValidationFailure("id", UNKNOWN_ID)
    if kind == "document" and tenant is None:
        raise ValueError("a document's revocation impact needs its tenant")
    tenant = tenant if tenant is not None else item_tenant(item_id)
    if kind == "document":
        return Impact(skills=[], runs=runs_citing_document(item_id, tenant))
    skills: list[str] = []
    lessons: list[str] = []
    if kind == "case":
        skills = skills_citing(item_id)
        lessons = lessons_losing_support(item_id, now or clock.now())
    # The lessons whose side of a conflict changes: the revoked lesson itself (its conflicts
    # close), or those a case revocation leaves unavailable (their conflicts stay open with a
    # side out of retrieval).
    sides = [item_id] if kind == "lesson" else lessons
    read = [item_id, *skills, *lessons]
    runs = runs_referencing(read, tenant)
    return Impact(
        skills=skills,
        lessons=lessons,
        runs=runs,
        conflicts=conflicts_with_side(sides),
        context_blocks=context_blocks_among(read, runs),
    )


def conflicts_with_side(lesson_ids: list[str]) -> list[int]:
    """The open conflicts one of whose two lessons is among ``lesson_ids``."""
    if not lesson_ids:
        return []
    return sorted(
        LessonConflict.objects.filter(status=ConflictStatus.OPEN)
        .filter(Q(lesson_a_id__in=lesson_ids) | Q(lesson_b_id__in=lesson_ids))
        .values_list("pk", flat=True)
    )


def stored_impacts(item_id: str) -> QuerySet[RevocationImpact]:
    return RevocationImpact.objects.filter(item_id=item_id).select_related("revoked_by")


def impact_stored(record: RevocationImpact) -> Impact:
    """The impact a revocation stored, in the shape :func:`revocation_impact` answers."""
    return Impact(
        skills=list(record.skills),
        runs=list(record.runs),
        lessons=list(record.lessons),
        conflicts=list(record.conflicts),
        context_blocks=list(record.context_blocks),
    )


def latest_impact(item_id: str) -> Impact | None:
    """The impact stored by the latest revocation of ``item_id``, if any."""
    record = RevocationImpact.objects.filter(item_id=item_id).first()
    return impact_stored(record) if record is not None else None


def impact_lines(impact: Impact) -> list[str]:
    """Every part of an impact, one plain line each: what ``review`` prints and the revocation
    mail says."""

    def listed(ids: Sequence[object], prefix: str = "") -> str:
        return ", ".join(f"{prefix}{i}" for i in ids) or "none"

    return [
        "skills affected: " + listed(impact.skills),
        "lessons leaving retrieval: " + listed(impact.lessons),
        "conflicts whose side changes: " + listed(impact.conflicts, "#"),
        "runs to re-check: " + listed(impact.runs),
        "of them, context blocks that carried it: " + listed(impact.context_blocks),
    ]
