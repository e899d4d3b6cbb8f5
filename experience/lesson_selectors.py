"""Reads of lessons: lookups, evidence, computed confidence, availability, conflicts and merges."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet

from experience import domain, lesson_index, selectors
from experience import lesson_domain as ld
from experience.models import (
    Case,
    ConflictStatus,
    Lesson,
    LessonCase,
    LessonConflict,
    LessonRelation,
    SkillCase,
    Status,
)
from experience.outcome_selectors import NONE as NO_OUTCOMES
from experience.outcome_selectors import OutcomeBatch, Tally, aware_column, outcome_tallies
from knowledge import postings as kp
from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.statements import DATETIME, Param, Statement
from reviewconsole.tenancy import may_access, tenants_of

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from experience.postings import Candidate

NO_SUCH_LESSON = selectors.NO_SUCH_LESSON


@dataclass(frozen=True)
class ConfidenceSettings:
    z: float
    half_life_days: float
    threshold: float


def confidence_settings() -> ConfidenceSettings:
    return ConfidenceSettings(
        z=float(getattr(settings, "LESSON_CONFIDENCE_Z", ld.DEFAULT_Z)),
        half_life_days=float(getattr(settings, "LESSON_HALF_LIFE_DAYS", ld.DEFAULT_HALF_LIFE_DAYS)),
        threshold=float(getattr(settings, "LESSON_CONFIDENCE_THRESHOLD", ld.DEFAULT_THRESHOLD)),
    )


def lesson_get(lesson_id: str, *, field: str = "id", user: User | None = None) -> Lesson:
    """The lesson with this id, as ``selectors.case_get`` finds a case: with ``user``, another
    tenant's lesson is answered exactly as an unknown id."""
    lesson = (
        Lesson.objects.select_related("submitted_by", "approved_by").filter(pk=lesson_id).first()
    )
    if lesson is None or (user is not None and not may_access(user, lesson.tenant)):
        raise ValidationFailure(field, f"{NO_SUCH_LESSON}: {lesson_id}")
    return lesson


def lesson_get_visible(user: User, digest: str) -> Lesson | None:
    """The lesson with this digest as ``user`` may see it: None for another tenant's."""
    lesson = (
        Lesson.objects.select_related("submitted_by", "approved_by", "revoked_by")
        .filter(pk=str(itemids.ItemId(itemids.LESSON, digest)))
        .first()
    )
    if lesson is None:
        return None
    tenants = tenants_of(user)
    return lesson if tenants is None or lesson.tenant in tenants else None


def visible_lessons(user: User) -> QuerySet[Lesson]:
    tenants = tenants_of(user)
    lessons = Lesson.objects.all()
    return lessons if tenants is None else lessons.filter(tenant__in=tenants)


# --- evidence ---------------------------------------------------------------------------------


def _links(lesson_ids: Iterable[str]) -> QuerySet[LessonCase]:
    # Distinct incidents follow incident merges, as skills' do (experience.selectors).
    links, _ = selectors.with_canonical_incident(
        LessonCase.objects.filter(lesson_id__in=list(lesson_ids)).select_related("case")
    )
    return links


def _cited(link: LessonCase) -> domain.CitedCase:
    case = link.case
    case.canonical_incident = getattr(link, "canonical_incident", None) or case.incident  # type: ignore[attr-defined]
    return selectors.cited_case(case)


@dataclass(frozen=True)
class Evidence:
    supports: list[Case]
    contradicts: list[Case]

    def cited(self) -> tuple[tuple[domain.CitedCase, ...], tuple[domain.CitedCase, ...]]:
        return (
            tuple(selectors.cited_case(c) for c in self.supports),
            tuple(selectors.cited_case(c) for c in self.contradicts),
        )


def lesson_evidence(lesson: Lesson) -> Evidence:
    supports: list[Case] = []
    contradicts: list[Case] = []
    for link in _links([lesson.id]).order_by("relation", "position"):
        _cited(link)
        (supports if link.relation == LessonRelation.SUPPORTS else contradicts).append(link.case)
    return Evidence(supports, contradicts)


def lesson_in_open_conflict(lesson_id: str) -> bool:
    return LessonConflict.objects.filter(
        Q(lesson_a_id=lesson_id) | Q(lesson_b_id=lesson_id), status=ConflictStatus.OPEN
    ).exists()


def _replaces_conflicted(lesson: Lesson) -> bool:
    """A new version of a lesson in an open conflict waits for that conflict, unless it is the
    narrowed version the conflict's resolution asked for."""
    if not lesson.supersedes:
        return False
    return (
        LessonConflict.objects.filter(
            Q(lesson_a_id=lesson.supersedes) | Q(lesson_b_id=lesson.supersedes),
            status=ConflictStatus.OPEN,
        )
        .exclude(narrowing=lesson.id)
        .exists()
    )


def lesson_facts(lesson: Lesson) -> ld.LessonFacts:
    supports, contradicts = lesson_evidence(lesson).cited()
    return ld.LessonFacts(
        status=lesson.status,
        submitted_by=int(lesson.submitted_by_id),
        scope=lesson.scope,
        valid_to=lesson.valid_to,
        supports=supports,
        contradicts=contradicts,
        replaces_conflicted=_replaces_conflicted(lesson),
    )


def lesson_approval_checklist(
    *, lesson: Lesson, reviewer: User, reason: str, now: datetime
) -> list[str]:
    return ld.lesson_approval_unmet(
        lesson_facts(lesson), reviewer=selectors.reviewer_of(reviewer), reason=reason, now=now
    )


def _confidence(
    supports: Sequence[domain.CitedCase],
    contradicts: Sequence[domain.CitedCase],
    approvals: Iterable[datetime | None],
    now: datetime,
    config: ConfidenceSettings,
    outcomes: Tally = NO_OUTCOMES,
    *,
    in_open_conflict: bool = False,
) -> ld.Confidence:
    inputs = ld.evidence_inputs(
        supports,
        contradicts,
        approvals=approvals,
        now=now,
        outcomes=outcomes.counted(in_open_conflict=in_open_conflict),
    )
    return ld.confidence(inputs, now=now, z=config.z, half_life_days=config.half_life_days)


def lesson_confidence(
    lesson: Lesson, now: datetime, evidence: Evidence | None = None
) -> ld.Confidence:
    evidence = evidence or lesson_evidence(lesson)
    supports, contradicts = evidence.cited()
    approvals = [
        lesson.approved_at,
        *(c.approved_at for c in evidence.supports if c.status == Status.APPROVED),
    ]
    outcomes = outcome_tallies([lesson.id], now).get(lesson.id, NO_OUTCOMES)
    return _confidence(
        supports,
        contradicts,
        approvals,
        now,
        confidence_settings(),
        outcomes,
        in_open_conflict=lesson_in_open_conflict(lesson.id),
    )


def lesson_availability(lesson: Lesson, now: datetime) -> domain.Availability:
    supports, _ = lesson_evidence(lesson).cited()
    return ld.lesson_availability(selectors.gate_fields(lesson), supports, now)


# --- retrieval --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recallable:
    id: str
    title: str
    search_text: str
    lesson_type: str
    conclusion: str
    confidence: ld.Confidence
    conflict: bool


# --- the retrieval statements, compiled once (reviewconsole.statements) -------------------------
# Building these queries through the ORM (five scope filters, two Exists, the canonical incident
# subquery) costs several times what the database takes to answer them, on every retrieval.

_RECALL_DATETIMES = (5, 11, 12, 13)  # the columns below that hold datetimes
_SCOPE_PARAMS = [Param(name) for name in domain.SCOPE_FIELDS]


def _incident_key() -> int:
    """What the compiled statements depend on beyond their values: the incident rule."""
    return id(selectors._incident_identity.get("expression"))


def _recall_queryset(now: datetime, lesson_ids: Sequence[str] | None = None, **scope: str) -> Any:
    open_conflicts = LessonConflict.objects.filter(status=ConflictStatus.OPEN)
    links = LessonCase.objects.filter(
        lesson__status=Status.APPROVED,
        lesson__valid_from__lte=now,
        lesson__valid_to__gt=now,
        lesson__approved_at__lte=now,
        **{f"lesson__{name}": scope[name] for name in domain.SCOPE_FIELDS},
    )
    if lesson_ids is not None:
        links = links.filter(lesson_id__in=lesson_ids)
    links = links.annotate(
        in_conflict=Exists(open_conflicts.filter(lesson_a=OuterRef("lesson_id")))
        | Exists(open_conflicts.filter(lesson_b=OuterRef("lesson_id")))
    )
    links, incident = selectors.with_canonical_incident(links, "case")
    return links.order_by().values_list(
        "lesson_id",
        "lesson__title",
        "lesson__search_text",
        "lesson__lesson_type",
        "lesson__conclusion",
        "lesson__approved_at",
        "in_conflict",
        "relation",
        *selectors.cited_case_columns(incident),
    )


_RECALL_IN_SCOPE = Statement(_recall_queryset, [*_SCOPE_PARAMS, Param("now", DATETIME)])
_RECALL_AMONG = Statement(
    _recall_queryset, [*_SCOPE_PARAMS, Param("now", DATETIME), Param("lesson_ids", many=True)]
)


def _recall_rows(
    scope: Mapping[str, str], now: datetime, among: Collection[str] | None
) -> list[tuple[Any, ...]]:
    if among is None:
        rows = _RECALL_IN_SCOPE.rows(_incident_key(), now=now, **scope)
    elif among:
        rows = _RECALL_AMONG.rows(_incident_key(), now=now, lesson_ids=sorted(among), **scope)
    else:
        return []
    converted = []
    for row in rows:
        values = list(row)
        for index in _RECALL_DATETIMES:
            values[index] = aware_column(values[index])
        values[6] = bool(values[6])
        converted.append(tuple(values))
    return converted


@dataclass
class _Inputs:
    """One lesson's recall inputs, from the tables or from its index entry."""

    title: str
    search_text: str
    lesson_type: str
    conclusion: str
    approved_at: datetime | None
    conflict: bool
    supports: list[domain.CitedCase] = field(default_factory=list)
    contradicts: list[domain.CitedCase] = field(default_factory=list)
    # The times its supporting approved cases were approved.
    approvals: list[datetime | None] = field(default_factory=list)

    def cite(self, relation: str, case: domain.CitedCase, approved: datetime | None) -> None:
        if relation == LessonRelation.SUPPORTS:
            self.supports.append(case)
            if case.status == Status.APPROVED:
                self.approvals.append(approved)
        else:
            self.contradicts.append(case)


def _inputs_from_rows(rows: list[tuple[Any, ...]], scope: Mapping[str, str]) -> dict[str, _Inputs]:
    inputs: dict[str, _Inputs] = {}
    for lesson_id, *fields, relation, case_id, status, inc, valid_from, valid_to, approved in rows:
        lesson = inputs.get(lesson_id)
        if lesson is None:
            lesson = inputs[lesson_id] = _Inputs(*fields)
        # Cited cases share the lesson's scope: approval and submission refuse any other.
        case = domain.CitedCase(case_id, status, scope, inc or "", valid_from, valid_to)
        lesson.cite(relation, case, approved)
    return inputs


def _inputs_from_entry(entry: Candidate, scope: dict[str, str]) -> _Inputs:
    evidence = lesson_index.decode(entry.evidence or "", scope)
    lesson = _Inputs(
        title=entry.title,
        search_text="",  # ranked from the index: the text is not read
        lesson_type=evidence.lesson_type,
        conclusion=evidence.conclusion,
        approved_at=kp.moment(entry.approved_at),
        conflict=evidence.conflict,
    )
    for relation, case, approved in evidence.cases:
        lesson.cite(relation, case, approved)
    return lesson


def recallable_lessons(
    scope: Mapping[str, str],
    now: datetime,
    outcomes: OutcomeBatch | None = None,
    among: Mapping[str, Candidate] | None = None,
) -> dict[str, Recallable]:
    """Lessons retrieval may return: past the gate, available, and at or above the confidence
    threshold, or below it but in an unresolved conflict (returned flagged, never settled).

    ``among``: only the lessons the index found for the query are asked about, each scored from
    the confidence inputs its entry keeps (``experience.lesson_index``); those whose entry has
    none yet, and every lesson of the scope when ``among`` is None, are read in one query: the
    cited cases of the gated lessons, each row with its lesson's fields and whether it is in an
    open conflict. Outcomes come through ``outcomes`` when the caller batches them with the
    items it will ask about next.
    """
    if among is None:
        inputs = _inputs_from_rows(_recall_rows(scope, now, None), scope)
    else:
        exact = dict(scope)
        inputs = {i: _inputs_from_entry(c, exact) for i, c in among.items() if c.evidence}
        unread = [i for i, c in among.items() if not c.evidence]
        if unread:
            inputs.update(_inputs_from_rows(_recall_rows(scope, now, unread), scope))
    config = confidence_settings()
    batch = outcomes or OutcomeBatch(now)
    tallies = batch.tallies(inputs)
    found = {}
    for lesson_id, lesson in sorted(inputs.items()):
        if not any(domain.case_usable(case, now) for case in lesson.supports):
            continue
        score = _confidence(
            lesson.supports,
            lesson.contradicts,
            [lesson.approved_at, *lesson.approvals],
            now,
            config,
            tallies.get(lesson_id, NO_OUTCOMES),
            in_open_conflict=lesson.conflict,
        )
        if score.value < config.threshold and not lesson.conflict:
            continue
        found[lesson_id] = Recallable(
            lesson_id,
            lesson.title,
            lesson.search_text,
            lesson.lesson_type,
            lesson.conclusion,
            score,
            lesson.conflict,
        )
    return found


# ``(valid_from, valid_to, approved_at)`` of an approved case, as the retrieval index holds them.
CaseTimes = tuple[datetime, datetime, datetime | None]


def with_confidence(
    items: list[dict[str, Any]],
    lessons: Mapping[str, Recallable],
    now: datetime,
    outcomes: OutcomeBatch | None = None,
    approved_cases: Mapping[str, CaseTimes] | None = None,
) -> list[dict[str, Any]]:
    """Retrieval items with ``confidence``, ``why`` and ``conflict``; lessons also with
    ``lesson_type`` and ``conclusion``. Cases count their own incident; skills their cited
    cases' distinct incidents (docs/contracts.md, Lessons). ``approved_cases``: cases whose gate
    times the caller read already (from the retrieval index), which are not read again."""
    case_ids = [item["id"] for item in items if item["type"] == "case"]
    skill_ids = [item["id"] for item in items if item["type"] == "skill"]
    scores = item_confidences(case_ids, skill_ids, now, outcomes, approved_cases)
    out = []
    for item in items:
        lesson = lessons.get(item["id"])
        score = lesson.confidence if lesson else scores.get(item["id"])
        extra: dict[str, Any] = {
            "confidence": score.value if score else None,
            "why": score.why() if score else "",
            "conflict": bool(lesson and lesson.conflict),
        }
        if lesson:
            extra["lesson_type"] = lesson.lesson_type
            extra["conclusion"] = lesson.conclusion
        out.append({**item, **extra})
    return out


def _case_confidence(
    case_id: str,
    status: str,
    times: CaseTimes,
    now: datetime,
    config: ConfidenceSettings,
    outcomes: Tally,
) -> ld.Confidence:
    valid_from, valid_to, approved_at = times
    # A case is one incident whatever incident merges say, so its own id stands for it.
    cited = domain.CitedCase(case_id, status, {}, case_id, valid_from, valid_to)
    return _confidence([cited], [], [approved_at], now, config, outcomes)


def _skill_evidence_queryset(skill_ids: Sequence[str]) -> Any:
    links, incident = selectors.with_canonical_incident(
        SkillCase.objects.filter(skill_id__in=skill_ids), "case"
    )
    # Distinct incidents follow incident merges, as skill approval counts them.
    return links.order_by().values_list(
        "skill_id", "skill__approved_at", *selectors.cited_case_columns(incident)
    )


_SKILL_EVIDENCE = Statement(_skill_evidence_queryset, [Param("skill_ids", many=True)])
_SKILL_EVIDENCE_DATETIMES = (1, 5, 6, 7)


def skill_evidence_rows(skill_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """``(skill, skill approved_at, case, status, canonical incident, valid_from, valid_to,
    case approved_at)`` of every case the skills cite."""
    rows = []
    for row in _SKILL_EVIDENCE.rows(_incident_key(), skill_ids=skill_ids):
        values = list(row)
        for index in _SKILL_EVIDENCE_DATETIMES:
            values[index] = aware_column(values[index])
        rows.append(tuple(values))
    return rows


def item_confidences(
    case_ids: list[str],
    skill_ids: list[str],
    now: datetime,
    batch: OutcomeBatch | None = None,
    approved_cases: Mapping[str, CaseTimes] | None = None,
) -> dict[str, ld.Confidence]:
    """The confidence of each case and skill (the console shows it with its inputs); the cases
    in ``approved_cases`` from the times given there instead of their rows."""
    config = confidence_settings()
    scores: dict[str, ld.Confidence] = {}
    outcomes = (batch or OutcomeBatch(now)).tallies([*case_ids, *skill_ids])
    known = approved_cases or {}
    for case_id in case_ids:
        if case_id in known:
            tally = outcomes.get(case_id, NO_OUTCOMES)
            scores[case_id] = _case_confidence(
                case_id, Status.APPROVED, known[case_id], now, config, tally
            )
    unknown = [case_id for case_id in case_ids if case_id not in known]
    for case_id, status, valid_from, valid_to, approved_at in (
        Case.objects.filter(pk__in=unknown)
        .order_by()
        .values_list("id", "status", "valid_from", "valid_to", "approved_at")
        if unknown
        else ()
    ):
        scores[case_id] = _case_confidence(
            case_id,
            status,
            (valid_from, valid_to, approved_at),
            now,
            config,
            outcomes.get(case_id, NO_OUTCOMES),
        )
    if skill_ids:
        by_skill: dict[str, list[domain.CitedCase]] = defaultdict(list)
        approvals: dict[str, list[datetime | None]] = defaultdict(list)
        for (
            skill_id,
            skill_approved,
            case_id,
            status,
            inc,
            valid_from,
            valid_to,
            approved,
        ) in skill_evidence_rows(skill_ids):
            # A skill cites only cases of its own scope (approval refuses any other).
            by_skill[skill_id].append(
                domain.CitedCase(case_id, status, {}, inc or "", valid_from, valid_to)
            )
            approvals[skill_id] += [skill_approved, approved]
        for skill_id in skill_ids:
            scores[skill_id] = _confidence(
                by_skill[skill_id],
                [],
                approvals[skill_id],
                now,
                config,
                outcomes.get(skill_id, NO_OUTCOMES),
            )
    return scores


# --- revocation impact ------------------------------------------------------------------------


def lessons_losing_support(case_id: str, now: datetime) -> list[str]:
    """Approved lessons citing ``case_id`` as support that no other supporting case keeps usable:
    revoking the case makes them unavailable (the rule skills follow)."""
    citing = list(
        LessonCase.objects.filter(
            case_id=case_id, relation=LessonRelation.SUPPORTS, lesson__status=Status.APPROVED
        ).values_list("lesson_id", flat=True)
    )
    if not citing:
        return []
    kept = set(
        LessonCase.objects.filter(
            lesson_id__in=citing,
            relation=LessonRelation.SUPPORTS,
            case__status=Status.APPROVED,
            case__valid_from__lte=now,
            case__valid_to__gt=now,
        )
        .exclude(case_id=case_id)
        .values_list("lesson_id", flat=True)
    )
    return sorted(set(citing) - kept)


# --- conflicts and merges ---------------------------------------------------------------------


def lesson_shape(lesson: Lesson, links: Iterable[LessonCase] | None = None) -> ld.LessonShape:
    rows = list(links) if links is not None else list(LessonCase.objects.filter(lesson=lesson))
    return ld.LessonShape(
        id=lesson.id,
        lesson_type=lesson.lesson_type,
        scope=lesson.scope,
        tags=frozenset(lesson.scene_tags),
        description=lesson.scene_description,
        conclusion=lesson.conclusion,
        supports=frozenset(r.case_id for r in rows if r.relation == LessonRelation.SUPPORTS),
        contradicts=frozenset(r.case_id for r in rows if r.relation == LessonRelation.CONTRADICTS),
    )


def shapes_in_scope(
    scope: Mapping[str, str], *, status: str = Status.APPROVED
) -> list[ld.LessonShape]:
    lessons = list(
        Lesson.objects.filter(status=status, **{n: scope[n] for n in domain.SCOPE_FIELDS})
    )
    links: dict[str, list[LessonCase]] = defaultdict(list)
    for link in LessonCase.objects.filter(lesson_id__in=[lesson.id for lesson in lessons]):
        links[link.lesson_id].append(link)
    return [lesson_shape(lesson, links[lesson.id]) for lesson in lessons]


def conflicts_of(lesson: Lesson) -> QuerySet[LessonConflict]:
    return LessonConflict.objects.filter(Q(lesson_a=lesson) | Q(lesson_b=lesson)).select_related(
        "lesson_a", "lesson_b", "resolved_by"
    )


def open_conflicts(user: User) -> QuerySet[LessonConflict]:
    tenants = tenants_of(user)
    conflicts = LessonConflict.objects.filter(status=ConflictStatus.OPEN).select_related(
        "lesson_a", "lesson_b"
    )
    return conflicts if tenants is None else conflicts.filter(tenant__in=tenants)


def conflict_get_visible(user: User, pk: int) -> LessonConflict | None:
    conflict = (
        LessonConflict.objects.select_related("lesson_a", "lesson_b", "resolved_by")
        .filter(pk=pk)
        .first()
    )
    tenants = tenants_of(user)
    if conflict is None or (tenants is not None and conflict.tenant not in tenants):
        return None
    return conflict


@dataclass(frozen=True)
class MergeProposal:
    candidate: str
    target: str
    similarity: float


def merge_proposals(lesson: Lesson) -> list[MergeProposal]:
    """Approved lessons of the candidate's type and scope that it near-duplicates."""
    if lesson.status != Status.CANDIDATE:
        return []
    mine = lesson_shape(lesson)
    return sorted(
        (
            MergeProposal(lesson.id, other.id, float(ld.merge_similarity(mine, other)))
            for other in shapes_in_scope(lesson.scope)
            if ld.is_merge_candidate(mine, other)
        ),
        key=lambda p: (-p.similarity, p.target),
    )
