"""The dashboard's counts over cases, skills, lessons and knowledge documents.

A card that links to a list counts that list's own selector (the re-review queue, the runs to
follow up), so the number on the card is the number of rows the list shows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Exists, OuterRef, Q

from curation.selectors.rereview import rereview_queue
from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from knowledge.models import Document
from reviewconsole.tenancy import tenants_of

RECENT_DAYS = 7
REVOKED_DAYS = 30


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
    approved = Q(status=Status.APPROVED)
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
    )


def dashboard_counts(
    *,
    now: datetime,
    with_documents: bool,
    user: User | AnonymousUser,
) -> DashboardCounts:
    """Counts over the tenants ``user`` may see."""
    tenants = tenants_of(user)
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
            # Submitted versions only: a draft is its author's, in no reviewer's queue.
            draft_documents=Count(
                "pk", filter=Q(approved=False, revoked=False, submitted_at__isnull=False)
            ),
            revoked_documents=Count("pk", filter=Q(revoked=True)),
        )
    return DashboardCounts(
        **{name: cases[name] + skills[name] for name in cases},
        # The re-review queue's own selector: the card shows as many as the queue lists.
        due_for_rereview=rereview_queue(user).count(),
        **documents,
        **lesson_counts,
    )
