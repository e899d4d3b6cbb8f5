"""The dashboard's counts over cases, skills, lessons and knowledge documents."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q

from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.runs.models import Reference
from knowledge.models import Document

RECENT_DAYS = 7
REVOKED_DAYS = 30
EXPIRING_DAYS = 30
UNUSED_DAYS = 90


@dataclass(frozen=True)
class DashboardCounts:
    candidates: int
    recently_approved: int
    recently_revoked: int
    due_for_rereview: int
    draft_documents: int | None = None
    revoked_documents: int | None = None
    lesson_candidates: int = 0
    lessons_in_conflict: int = 0


def _lifecycle_counts(
    model: type[Case] | type[Skill], now: datetime, tenants: frozenset[str] | None
) -> dict[str, int]:
    # Approved items that expire soon, or that no run has read for a long time, go back to a
    # reviewer: a memory nobody uses is one nobody has recently seen hold up.
    recently_read = Reference.objects.filter(
        item_id=OuterRef("pk"), read_at__gte=now - timedelta(days=UNUSED_DAYS)
    )
    approved = Q(status=Status.APPROVED)
    stale = approved & (
        Q(valid_to__lt=now + timedelta(days=EXPIRING_DAYS))
        | (Q(approved_at__lt=now - timedelta(days=UNUSED_DAYS)) & ~Q(Exists(recently_read)))
    )
    rows = model.objects.all()
    if tenants is not None:
        rows = rows.filter(tenant__in=sorted(tenants))
    return rows.aggregate(
        candidates=Count("pk", filter=Q(status=Status.CANDIDATE)),
        recently_approved=Count(
            "pk", filter=approved & Q(approved_at__gte=now - timedelta(days=RECENT_DAYS))
        ),
        recently_revoked=Count(
            "pk",
            filter=Q(status=Status.REVOKED, revoked_at__gte=now - timedelta(days=REVOKED_DAYS)),
        ),
        due_for_rereview=Count("pk", filter=stale),
    )


def dashboard_counts(
    *, now: datetime, with_documents: bool, tenants: frozenset[str] | None = None
) -> DashboardCounts:
    """Counts over every tenant, or over ``tenants`` only."""
    cases = _lifecycle_counts(Case, now, tenants)
    skills = _lifecycle_counts(Skill, now, tenants)
    lessons = Lesson.objects.all()
    if tenants is not None:
        lessons = lessons.filter(tenant__in=sorted(tenants))
    conflicts = LessonConflict.objects.filter(status=ConflictStatus.OPEN)
    lesson_counts = lessons.aggregate(
        lesson_candidates=Count("pk", filter=Q(status=Status.CANDIDATE)),
        lessons_in_conflict=Count(
            "pk",
            filter=Q(Exists(conflicts.filter(lesson_a=OuterRef("pk"))))
            | Q(Exists(conflicts.filter(lesson_b=OuterRef("pk")))),
        ),
    )
    documents: dict[str, Any] = {}
    if with_documents:
        rows = Document.objects.all()
        if tenants is not None:
            rows = rows.filter(tenant__in=sorted(tenants))
        documents = rows.aggregate(
            draft_documents=Count("pk", filter=Q(approved=False, revoked=False)),
            revoked_documents=Count("pk", filter=Q(revoked=True)),
        )
    return DashboardCounts(
        **{name: cases[name] + skills[name] for name in cases},
        **documents,
        **lesson_counts,
    )
