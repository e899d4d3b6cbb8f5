"""Reads that only the console pages need: the mixed review queue, version chains, run lists.

Approval rules, availability and revocation impact are not computed here: the pages call
``experience.selectors`` and ``experience.domain`` for those.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import CharField, F, Q, QuerySet, Value

from experience.models import Case, Reference, Run, Skill, SkillCase
from experience.selectors import references_for, runs_for
from reviewconsole.itemids import ItemId
from reviewconsole.tenancy import may_access, visible

QUEUE_COLUMNS = (
    "id",
    "title",
    "status",
    "tenant",
    "brand",
    "store",
    "campaign",
    "deployment",
    "submitted_at",
    "approved_at",
    "valid_to",
    "kind",
    "submitter",
    "incident_name",
)
QUEUE_SORTS = {
    "-submitted": ("-submitted_at", "id"),
    "submitted": ("submitted_at", "id"),
    "title": ("title", "id"),
    "valid_to": ("valid_to", "id"),
    "-approved": ("-approved_at", "id"),
}
DEFAULT_SORT = "-submitted"
MAX_CHAIN = 20


@dataclass(frozen=True)
class QueueFilters:
    status: str = "candidate"
    kind: str = ""
    tenant: str = ""
    brand: str = ""
    store: str = ""
    campaign: str = ""
    deployment: str = ""
    submitter: str = ""
    older_than_days: int | None = None
    sort: str = DEFAULT_SORT


def _queue_rows(
    model: type[Case] | type[Skill],
    kind: str,
    filters: QueueFilters,
    now: datetime,
    tenants: frozenset[str] | None,
) -> Any:
    rows = model.objects.order_by()  # a UNION part must not carry the model's default ordering
    if tenants is not None:
        rows = rows.filter(tenant__in=sorted(tenants))
    if filters.status:
        rows = rows.filter(status=filters.status)
    for name in ("tenant", "brand", "store", "campaign", "deployment"):
        value = getattr(filters, name)
        if value:
            rows = rows.filter(**{name: value})
    if filters.submitter:
        rows = rows.filter(submitted_by__username=filters.submitter)
    if filters.older_than_days is not None:
        rows = rows.filter(submitted_at__lte=now - timedelta(days=filters.older_than_days))
    incident = F("incident") if model is Case else Value("", output_field=CharField())
    return rows.annotate(
        kind=Value(kind, output_field=CharField()),
        submitter=F("submitted_by__username"),
        incident_name=incident,
    ).values(*QUEUE_COLUMNS)


def review_queue_rows(
    filters: QueueFilters, *, now: datetime, tenants: frozenset[str] | None = None
) -> Any:
    """Cases and skills in one sortable, countable, sliceable query (a UNION).

    ``tenants`` limits the rows to those tenants (None: every tenant).
    """
    parts = []
    if filters.kind in ("", "case"):
        parts.append(_queue_rows(Case, "case", filters, now, tenants))
    if filters.kind in ("", "skill"):
        parts.append(_queue_rows(Skill, "skill", filters, now, tenants))
    rows = parts[0] if len(parts) == 1 else parts[0].union(parts[1], all=True)
    return rows.order_by(*QUEUE_SORTS.get(filters.sort, QUEUE_SORTS[DEFAULT_SORT]))


# --- case page ---------------------------------------------------------------------------------


def case_for_page(case_id: str) -> Case | None:
    return (
        Case.objects.select_related("submitted_by", "approved_by", "rejected_by", "revoked_by")
        .filter(pk=case_id)
        .first()
    )


def case_version_chain(case: Case) -> list[Case]:
    """Every version linked to ``case`` through ``supersedes``, oldest first (``case`` included).

    Versions belong to one tenant: a link to another tenant's case (a row stored before
    submission refused it) ends the chain there."""
    fields = ("id", "title", "status", "submitted_at", "supersedes", "submitted_by__username")
    versions = Case.objects.select_related("submitted_by").only(*fields).filter(tenant=case.tenant)
    older: list[Case] = []
    cursor = case.supersedes
    while cursor and len(older) < MAX_CHAIN:
        previous = versions.filter(pk=cursor).first()
        if previous is None:
            break
        older.insert(0, previous)
        cursor = previous.supersedes
    newer: list[Case] = []
    cursor = case.id
    while len(newer) < MAX_CHAIN:
        following = versions.filter(supersedes=cursor).order_by("submitted_at", "id").first()
        if following is None:
            break
        newer.append(following)
        cursor = following.id
    return [*older, case, *newer]


def same_incident_cases(case: Case) -> QuerySet[Case]:
    return (
        Case.objects.filter(tenant=case.tenant, brand=case.brand, incident=case.incident)
        .exclude(pk=case.pk)
        .select_related("submitted_by")
        .only(
            "id", "title", "status", "store", "deployment", "submitted_at", "submitted_by__username"
        )
        .order_by("-submitted_at")
    )


def skills_citing_case(case: Case) -> list[Skill]:
    return [
        link.skill
        for link in SkillCase.objects.filter(case=case)
        .select_related("skill")
        .only("skill__id", "skill__title", "skill__status")
        .order_by("skill__title")
    ]


def skills_by_id(skill_ids: list[str]) -> dict[str, Skill]:
    return {
        skill.id: skill
        for skill in Skill.objects.filter(pk__in=skill_ids).only("id", "title", "status")
    }


def _evidence_lines(prefix: str, items: list[dict[str, Any]]) -> list[str]:
    return [f"{prefix}[{item['source_id']}] {item['excerpt']}" for item in items]


def case_lines(case: Case) -> list[str]:
    """A case's hashed content as lines of text, section by section, for a line diff."""
    content = case.content
    lines = [
        f"title: {content.get('title', '')}",
        f"incident: {content.get('incident', '')}",
        "scope: " + ", ".join(f"{k}={v}" for k, v in (content.get("scope") or {}).items()),
        f"validity: {content.get('valid_from')} → {content.get('valid_to')}",
        f"summary: {content.get('summary', '')}",
        "observations:",
        *_evidence_lines("  ", content.get("observations") or []),
    ]
    diagnosis = content.get("diagnosis") or {}
    lines += [f"diagnosis: {diagnosis.get('statement', '')}"]
    lines += _evidence_lines("  ", diagnosis.get("evidence") or [])
    lines.append("counterevidence:")
    for entry in content.get("counterevidence") or []:
        lines.append(f"  hypothesis: {entry.get('hypothesis', '')}")
        lines.append(f"  statement: {entry.get('statement', '')}")
        lines.append(f"  refutes: {entry.get('refutes', '')}")
        lines += _evidence_lines("    ", entry.get("evidence") or [])
    outcome = content.get("outcome") or {}
    lines += [f"outcome: {outcome.get('statement', '')}"]
    lines += _evidence_lines("  ", outcome.get("evidence") or [])
    return lines


# --- runs ----------------------------------------------------------------------------------------


def runs_filtered(*, status: str = "", skill_id: str = "", run_id: str = "") -> QuerySet[Run]:
    runs = Run.objects.defer("context", "steps", "observations")
    if status:
        runs = runs.filter(status=status)
    if skill_id:
        runs = runs.filter(skill_id=skill_id)
    if run_id:
        runs = runs.filter(run_id__icontains=run_id)
    return runs.order_by("-started_at", "-id")


def runs_of_skill(skill: Skill, limit: int = 20) -> list[Run]:
    return list(
        Run.objects.filter(Q(skill_id=skill.id))
        .only("run_id", "status", "reason", "started_at")
        .order_by("-started_at", "-id")[:limit]
    )


def references_visible_to(run_id: str, tenants: frozenset[str] | None) -> list[Reference]:
    """A run's references, without reads of items in tenants outside ``tenants``."""
    references = list(references_for(run_id))
    if tenants is None or not references:
        return references
    ids = {ref.item_id for ref in references}
    allowed = set(
        Case.objects.filter(pk__in=ids, tenant__in=sorted(tenants)).values_list("pk", flat=True)
    ) | set(
        Skill.objects.filter(pk__in=ids, tenant__in=sorted(tenants)).values_list("pk", flat=True)
    )
    return [ref for ref in references if ref.item_id in allowed]


# --- items as a user may see them ------------------------------------------------------------------


def case_get_visible(digest: str, user: User | AnonymousUser) -> Case | None:
    """The case whose id has this digest; None also when it is of a tenant ``user`` may not see
    (another tenant's case does not exist for them)."""
    case = case_for_page(str(ItemId.case(digest)))
    if case is None or not may_access(user, case.tenant):
        return None
    return case


def skill_get_visible(digest: str, user: User | AnonymousUser) -> Skill | None:
    skill = (
        Skill.objects.select_related("submitted_by", "approved_by", "rejected_by", "revoked_by")
        .filter(pk=str(ItemId.skill(digest)))
        .first()
    )
    if skill is None or not may_access(user, skill.tenant):
        return None
    return skill


def runs_visible(
    user: User | AnonymousUser, *, status: str = "", skill_id: str = "", run_id: str = ""
) -> QuerySet[Run]:
    return visible(runs_filtered(status=status, skill_id=skill_id, run_id=run_id), user)


def run_traces(run_id: str, user: User | AnonymousUser) -> list[Run]:
    """Every stored execution of ``run_id`` in a tenant ``user`` may see, with its citations."""
    return list(visible(runs_for(run_id), user).select_related("actor"))
