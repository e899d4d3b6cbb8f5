"""Reads that only the console pages need: the mixed review queue, version chains, run lists.

Approval rules, availability and revocation impact are not computed here: the pages call
``experience.cases.selectors``, ``experience.core.domain`` and ``experience.core.availability``
for those.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import CharField, F, Q, QuerySet, Value

from experience.cases.models import Case, Skill, SkillCase
from experience.core import availability, domain
from experience.core.availability import Availability, CitedCase, GateFields
from experience.lessons.models import Lesson, LessonCase, LessonRelation
from experience.runs.claims import run_owner
from experience.runs.models import Reference, Run
from experience.runs.selectors import references_for, runs_for
from knowledge.models import Document
from reviewconsole import itemids
from reviewconsole.display import local_text
from reviewconsole.itemids import ItemId
from reviewconsole.scopes import SCOPE_FIELDS
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
# How far "next" looks into a queue: the ids of at most this many items are read.
MAX_QUEUE_WALK = 2_000


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
    # Approved (revoked) within this many days before now: the dashboard's "recently" cards.
    approved_within_days: int | None = None
    revoked_within_days: int | None = None
    sort: str = DEFAULT_SORT
    # Words in the title, or a piece of the id (or, for a case, of its incident).
    text: str = ""


QUEUE_KINDS = ("case", "skill", "lesson")


def _queue_rows(
    model: type[Case] | type[Skill] | type[Lesson],
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
    for name in SCOPE_FIELDS:
        value = getattr(filters, name)
        if value:
            rows = rows.filter(**{name: value})
    if filters.submitter:
        rows = rows.filter(submitted_by__username=filters.submitter)
    if filters.older_than_days is not None:
        rows = rows.filter(submitted_at__lte=now - timedelta(days=filters.older_than_days))
    if filters.approved_within_days is not None:
        rows = rows.filter(approved_at__gte=now - timedelta(days=filters.approved_within_days))
    if filters.revoked_within_days is not None:
        rows = rows.filter(revoked_at__gte=now - timedelta(days=filters.revoked_within_days))
    if filters.text:
        matches = Q(title__icontains=filters.text) | Q(pk__icontains=filters.text)
        if model is Case:
            matches |= Q(incident__icontains=filters.text)
        rows = rows.filter(matches)
    incident = F("incident") if model is Case else Value("", output_field=CharField())
    return rows.annotate(
        kind=Value(kind, output_field=CharField()),
        submitter=F("submitted_by__username"),
        incident_name=incident,
    ).values(*QUEUE_COLUMNS)


def review_queue_rows(
    filters: QueueFilters,
    *,
    now: datetime,
    tenants: frozenset[str] | None = None,
    lessons: bool = True,
) -> Any:
    """Cases, skills and lessons in one sortable, countable, sliceable query (a UNION).

    ``tenants`` limits the rows to those tenants (None: every tenant); ``lessons=False`` leaves
    lessons out (for a user who may not see them).
    """
    models: dict[str, type[Case] | type[Skill] | type[Lesson]] = {
        "case": Case,
        "skill": Skill,
        "lesson": Lesson,
    }
    kinds = [filters.kind] if filters.kind in models else list(QUEUE_KINDS)
    if not lessons:
        kinds = [kind for kind in kinds if kind != "lesson"] or ["case"]
    parts = [_queue_rows(models[kind], kind, filters, now, tenants) for kind in kinds]
    rows = parts[0] if len(parts) == 1 else parts[0].union(*parts[1:], all=True)
    return rows.order_by(*QUEUE_SORTS.get(filters.sort, QUEUE_SORTS[DEFAULT_SORT]))


def queue_neighbours(
    filters: QueueFilters,
    item_id: str,
    *,
    now: datetime,
    tenants: frozenset[str] | None = None,
    lessons: bool = True,
) -> tuple[str | None, str | None]:
    """The ids before and after ``item_id`` in the queue these filters show; when the item is
    not in that queue, no previous one and the queue's first as the next.

    One query reading the ids of the filtered queue (the waiting candidates, a short list)."""
    rows = review_queue_rows(filters, now=now, tenants=tenants, lessons=lessons)[:MAX_QUEUE_WALK]
    ids = [row["id"] for row in rows]
    if item_id not in ids:
        return None, (ids[0] if ids else None)
    index = ids.index(item_id)
    return (ids[index - 1] if index > 0 else None), (
        ids[index + 1] if index + 1 < len(ids) else None
    )


# --- availability: one state for every kind, read in bulk -----------------------------------------

_CASE_GATE = ("status", *domain.SCOPE_FIELDS, "valid_from", "valid_to", "approved_at")


def _gate(row: dict[str, Any], prefix: str = "") -> GateFields:
    return GateFields(
        status=row[prefix + "status"],
        scope={name: row[prefix + name] for name in domain.SCOPE_FIELDS},
        valid_from=row[prefix + "valid_from"],
        valid_to=row[prefix + "valid_to"],
        approved_at=row[prefix + "approved_at"],
    )


def _cited(row: dict[str, Any]) -> CitedCase:
    return CitedCase(
        case_id=row["case_id"],
        status=row["case__status"],
        scope={},
        incident=row["case__incident"],
        valid_from=row["case__valid_from"],
        valid_to=row["case__valid_to"],
    )


_CITED = ("case_id", "case__status", "case__incident", "case__valid_from", "case__valid_to")


def availabilities(item_ids: Iterable[str], now: datetime) -> dict[str, Availability]:
    """Whether each case, skill and lesson of ``item_ids`` may be reused now, and why not: the
    rules of ``experience.core.availability``, their inputs read in at most five queries
    whatever the number of items (ids of other kinds are left out)."""
    by_kind: dict[str, list[str]] = defaultdict(list)
    for item_id in item_ids:
        kind = itemids.kind_of(item_id)
        if kind is not None:
            by_kind[kind.name].append(item_id)
    out: dict[str, Availability] = {}
    if by_kind["case"]:
        for row in Case.objects.filter(pk__in=by_kind["case"]).values("id", *_CASE_GATE):
            out[row["id"]] = availability.case_availability(_gate(row), now)
    if by_kind["skill"]:
        cited: dict[str, list[CitedCase]] = defaultdict(list)
        for row in SkillCase.objects.filter(skill_id__in=by_kind["skill"]).values(
            "skill_id", *_CITED
        ):
            cited[row["skill_id"]].append(_cited(row))
        for row in Skill.objects.filter(pk__in=by_kind["skill"]).values("id", *_CASE_GATE):
            out[row["id"]] = availability.skill_availability(_gate(row), cited[row["id"]], now)
    if by_kind["lesson"]:
        supports: dict[str, list[CitedCase]] = defaultdict(list)
        for row in LessonCase.objects.filter(
            lesson_id__in=by_kind["lesson"], relation=LessonRelation.SUPPORTS
        ).values("lesson_id", *_CITED):
            supports[row["lesson_id"]].append(_cited(row))
        for row in Lesson.objects.filter(pk__in=by_kind["lesson"]).values("id", *_CASE_GATE):
            out[row["id"]] = availability.lesson_availability(_gate(row), supports[row["id"]], now)
    return out


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
        # In the viewer's zone, like every time on the page (the content holds UTC).
        f"validity: {local_text(content.get('valid_from'))} → {local_text(content.get('valid_to'))}",
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
    """A run's references, without reads of items (cases, skills, lessons, documents) in
    tenants outside ``tenants`` (runs recorded before runs had owners may mix tenants)."""
    references = list(references_for(run_id))
    if tenants is None or not references:
        return references
    allowed = sorted(tenants)
    ids = {ref.item_id for ref in references}
    shown: set[str] = set()
    for model in (Case, Skill, Lesson):
        shown |= set(
            model.objects.filter(pk__in=ids, tenant__in=allowed).values_list("pk", flat=True)
        )
    documents = Q()
    for item_id in ids:
        if itemids.kind_of(item_id) is itemids.DOCUMENT:
            key, version = itemids.parse(item_id).key_version
            documents |= Q(doc_key=key, version=version)
    if documents:
        shown |= {
            str(ItemId.document(key, version))
            for key, version in Document.objects.filter(documents, tenant__in=allowed).values_list(
                "doc_key", "version"
            )
        }
    return [ref for ref in references if ref.item_id in shown]


def run_visible(
    run_id: str, user: User | AnonymousUser, runs: list[Run], references: list[Reference]
) -> bool:
    """Whether ``user`` may open the run: one of a tenant they may see, whatever it read
    (documents and lessons too); another tenant's run is answered like an unknown id. A run
    nobody opened (recorded before runs had owners) shows when any of it is visible."""
    claim = run_owner(run_id)
    if claim is None:
        return bool(runs or references)
    return may_access(user, claim.tenant)


# --- items as a user may see them ------------------------------------------------------------------


def case_get_visible(digest: str, user: User | AnonymousUser) -> Case | None:
    """The case whose id has this digest; None also when it is of a tenant ``user`` may not see
    (another tenant's case does not exist for them)."""
    case = case_for_page(str(ItemId.case(digest)))
    if case is None or not may_access(user, case.tenant):
        return None
    return case


def skill_get_visible(digest: str, user: User | AnonymousUser) -> Skill | None:
    skill: Skill | None = (
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


def skill_runs_by_id(run_ids: Iterable[str], user: User | AnonymousUser) -> dict[str, list[Run]]:
    """The skill runs stored under each of ``run_ids`` that ``user`` may see (one query)."""
    found: dict[str, list[Run]] = {}
    for run in visible(runs_filtered(), user).filter(run_id__in=sorted(set(run_ids))):
        found.setdefault(run.run_id, []).append(run)
    return found


def run_traces(run_id: str, user: User | AnonymousUser) -> list[Run]:
    """Every stored execution of ``run_id`` in a tenant ``user`` may see, with its citations."""
    return list(visible(runs_for(run_id), user).select_related("actor"))
