"""Reads of lessons: lookups, evidence, computed confidence, availability, conflicts and merges."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import Q, QuerySet

from experience.cases import selectors
from experience.cases.models import Case, SkillCase
from experience.core import availability, domain, review
from experience.core.availability import Availability, CitedCase
from experience.core.gate import usable_case_q
from experience.core.models import Status
from experience.lessons import domain as ld
from experience.lessons.models import (
    ConflictStatus,
    Lesson,
    LessonCase,
    LessonConflict,
    LessonMergeProposal,
    LessonRelation,
)
from experience.lessons.outcome_tallies import NONE as NO_OUTCOMES
from experience.lessons.outcome_tallies import OutcomeBatch, Tally, aware_column, outcome_tallies
from reviewconsole import accounts, itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.statements import Param, Statement
from reviewconsole.tenancy import may_access, tenants_of

if TYPE_CHECKING:
    from django.contrib.auth.models import User


NO_SUCH_LESSON = review.NO_SUCH_LESSON


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
    lesson: Lesson | None = (
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


def _links(lesson_ids: Iterable[str]) -> QuerySet[LessonCase]:
    # Distinct incidents follow incident merges, as skills' do (experience.cases.selectors).
    links, _ = selectors.with_canonical_incident(
        LessonCase.objects.filter(lesson_id__in=list(lesson_ids)).select_related("case")
    )
    return links


def _cited(link: LessonCase) -> CitedCase:
    case = link.case
    case.canonical_incident = getattr(link, "canonical_incident", None) or case.incident  # type: ignore[attr-defined]
    return selectors.cited_case(case)


@dataclass(frozen=True)
class Evidence:
    supports: list[Case]
    contradicts: list[Case]

    def cited(self) -> tuple[tuple[CitedCase, ...], tuple[CitedCase, ...]]:
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


def open_conflict_ids(lesson_ids: Sequence[str]) -> set[str]:
    """The lessons in an open conflict with any of ``lesson_ids`` (those among them included)."""
    pairs = LessonConflict.objects.filter(
        Q(lesson_a_id__in=lesson_ids) | Q(lesson_b_id__in=lesson_ids), status=ConflictStatus.OPEN
    ).values_list("lesson_a_id", "lesson_b_id")
    return {lesson_id for pair in pairs for lesson_id in pair}


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


def lesson_facts(lesson: Lesson, *, submitter_holder: int | None = None) -> ld.LessonFacts:
    supports, contradicts = lesson_evidence(lesson).cited()
    return ld.LessonFacts(
        status=lesson.status,
        submitted_by=int(lesson.submitted_by_id),
        scope=lesson.scope,
        valid_to=lesson.valid_to,
        supports=supports,
        contradicts=contradicts,
        replaces_conflicted=_replaces_conflicted(lesson),
        submitter_holder=accounts.holder_of(int(lesson.submitted_by_id))
        if submitter_holder is None
        else submitter_holder,
    )


def lesson_approval_checklist(
    *, lesson: Lesson, reviewer: User, reason: str, now: datetime
) -> list[str]:
    decider, submitter_holder = selectors.decider_and_submitter(
        reviewer, int(lesson.submitted_by_id)
    )
    return ld.lesson_approval_unmet(
        lesson_facts(lesson, submitter_holder=submitter_holder),
        reviewer=decider,
        reason=reason,
        now=now,
    )


def confidence_of(
    supports: Sequence[CitedCase],
    contradicts: Sequence[CitedCase],
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
    lesson: Lesson,
    now: datetime,
    evidence: Evidence | None = None,
    *,
    conflict_aware: bool = True,
) -> ld.Confidence:
    """The lesson's confidence at ``now``. ``conflict_aware=False`` counts reviewers'
    confirmations even while the lesson is in an open conflict: what the outdated rule reads, so
    that a conflict opening never makes a lesson outdated by itself (the conflict has its own
    resolution)."""
    evidence = evidence or lesson_evidence(lesson)
    supports, contradicts = evidence.cited()
    approvals = [
        lesson.approved_at,
        *(c.approved_at for c in evidence.supports if c.status == Status.APPROVED),
    ]
    outcomes = outcome_tallies([lesson.id], now).get(lesson.id, NO_OUTCOMES)
    return confidence_of(
        supports,
        contradicts,
        approvals,
        now,
        confidence_settings(),
        outcomes,
        in_open_conflict=conflict_aware and lesson.id in open_conflict_ids([lesson.id]),
    )


def lesson_confidences(
    lessons: Sequence[Lesson], now: datetime, *, conflict_aware: bool = True
) -> dict[str, ld.Confidence]:
    """:func:`lesson_confidence` of many lessons in a constant number of statements (their
    links, their outcome tallies, their open conflicts): what a check of every approved lesson
    reads. ``tests/experience/lessons/test_outdated_lessons.py`` holds the two equal."""
    ids = [lesson.id for lesson in lessons]
    if not ids:
        return {}
    supports: dict[str, list[CitedCase]] = defaultdict(list)
    contradicts: dict[str, list[CitedCase]] = defaultdict(list)
    approvals: dict[str, list[datetime | None]] = defaultdict(list)
    for link in _links(ids).order_by("lesson_id", "relation", "position"):
        cited = _cited(link)
        if link.relation == LessonRelation.SUPPORTS:
            supports[link.lesson_id].append(cited)
            if link.case.status == Status.APPROVED:
                approvals[link.lesson_id].append(link.case.approved_at)
        else:
            contradicts[link.lesson_id].append(cited)
    tallies = outcome_tallies(ids, now)
    conflicted = open_conflict_ids(ids) if conflict_aware else set()
    config = confidence_settings()
    return {
        lesson.id: confidence_of(
            supports[lesson.id],
            contradicts[lesson.id],
            [lesson.approved_at, *approvals[lesson.id]],
            now,
            config,
            tallies.get(lesson.id, NO_OUTCOMES),
            in_open_conflict=lesson.id in conflicted,
        )
        for lesson in lessons
    }


def lesson_availability(lesson: Lesson, now: datetime) -> Availability:
    supports, _ = lesson_evidence(lesson).cited()
    return availability.lesson_availability(selectors.gate_fields(lesson), supports, now)


# ``(valid_from, valid_to, approved_at)`` of an approved case, as the retrieval index holds them.
CaseTimes = tuple[datetime, datetime, datetime | None]


def incident_key() -> int:
    """What the compiled statements depend on beyond their values: the incident rule."""
    return id(selectors._incident_identity.get("expression"))


def _case_confidence(
    status: str,
    times: CaseTimes,
    now: datetime,
    config: ConfidenceSettings,
    outcomes: Tally,
) -> ld.Confidence:
    valid_from, valid_to, approved_at = times
    # A case is one incident whatever incident merges say: one supporting incident while it is
    # usable (ld.case_confidence is confidence_of for that one case, without its lists).
    usable = availability.case_usable_values(
        status=status, valid_from=valid_from, valid_to=valid_to, now=now
    )
    return ld.case_confidence(
        usable=usable,
        approved_at=approved_at,
        now=now,
        outcomes=outcomes.counted(),
        z=config.z,
        half_life_days=config.half_life_days,
    )


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


# A skill's rows of ``skill_evidence_rows`` by skill id (a skill citing no case: none).
SkillEvidence = Mapping[str, Sequence[tuple[Any, ...]]]


def skill_evidence_rows(skill_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """``(skill, skill approved_at, case, status, canonical incident, valid_from, valid_to,
    case approved_at)`` of every case the skills cite."""
    rows = []
    for row in _SKILL_EVIDENCE.rows(incident_key(), skill_ids=skill_ids):
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
    skill_evidence: SkillEvidence | None = None,
) -> dict[str, ld.Confidence]:
    """The confidence of each case and skill (the console shows it with its inputs); the cases
    in ``approved_cases`` from the times given there instead of their rows, the skills in
    ``skill_evidence`` from the rows given there (read by the same call a moment before, to
    decide whether the skill may be returned) instead of reading them again."""
    config = confidence_settings()
    scores: dict[str, ld.Confidence] = {}
    outcomes = (batch or OutcomeBatch(now)).tallies([*case_ids, *skill_ids])
    known = approved_cases or {}
    for case_id in case_ids:
        if case_id in known:
            tally = outcomes.get(case_id, NO_OUTCOMES)
            scores[case_id] = _case_confidence(Status.APPROVED, known[case_id], now, config, tally)
    unknown = [case_id for case_id in case_ids if case_id not in known]
    for case_id, status, valid_from, valid_to, approved_at in (
        Case.objects.filter(pk__in=unknown)
        .order_by()
        .values_list("id", "status", "valid_from", "valid_to", "approved_at")
        if unknown
        else ()
    ):
        scores[case_id] = _case_confidence(
            status,
            (valid_from, valid_to, approved_at),
            now,
            config,
            outcomes.get(case_id, NO_OUTCOMES),
        )
    if skill_ids:
        by_skill: dict[str, list[CitedCase]] = defaultdict(list)
        approvals: dict[str, list[datetime | None]] = defaultdict(list)
        given = skill_evidence or {}
        rows = [row for skill_id in skill_ids for row in given.get(skill_id, ())]
        unread = [skill_id for skill_id in skill_ids if skill_id not in given]
        if unread:
            rows += skill_evidence_rows(unread)
        for (
            skill_id,
            skill_approved,
            case_id,
            status,
            inc,
            valid_from,
            valid_to,
            approved,
        ) in rows:
            # A skill cites only cases of its own scope (approval refuses any other).
            by_skill[skill_id].append(
                CitedCase(case_id, status, {}, inc or "", valid_from, valid_to)
            )
            approvals[skill_id] += [skill_approved, approved]
        for skill_id in skill_ids:
            scores[skill_id] = confidence_of(
                by_skill[skill_id],
                [],
                approvals[skill_id],
                now,
                config,
                outcomes.get(skill_id, NO_OUTCOMES),
            )
    return scores


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
            usable_case_q(now, "case__"), lesson_id__in=citing, relation=LessonRelation.SUPPORTS
        )
        .exclude(case_id=case_id)
        .values_list("lesson_id", flat=True)
    )
    return sorted(set(citing) - kept)


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


class NarrowedApart:
    """The pairs of lessons a reviewer's narrowing set apart (``ld.conflict_reason``): each
    conflict resolved as ``narrowed`` names the kept lesson and the narrowed version; later
    versions of either inherit the settlement. Read once per check (approval, scan)."""

    def __init__(self) -> None:
        self._pairs = {
            frozenset(pair)
            for pair in LessonConflict.objects.filter(
                status=ConflictStatus.RESOLVED, resolution="narrowed"
            )
            .exclude(narrowing="")
            .exclude(kept="")
            .values_list("kept", "narrowing")
        }
        self._lineages: dict[str, set[str]] = {}

    def _lineage(self, lesson_id: str) -> set[str]:
        """The lesson and every version it replaced (following ``supersedes``)."""
        if lesson_id not in self._lineages:
            found: set[str] = set()
            current = lesson_id
            while current and current not in found:
                found.add(current)
                current = (
                    Lesson.objects.filter(pk=current).values_list("supersedes", flat=True).first()
                    or ""
                )
            self._lineages[lesson_id] = found
        return self._lineages[lesson_id]

    def __call__(self, a: str, b: str) -> bool:
        if not self._pairs:
            return False
        mine, theirs = self._lineage(a), self._lineage(b)
        return any(frozenset((x, y)) in self._pairs for x in mine for y in theirs)


def conflict_side(lesson: Lesson, now: datetime) -> ld.ConflictSide:
    """How the design's rule weighs one lesson of a conflict: its usable support and its
    confidence (reviewers' confirmations counted, as before the conflict opened)."""
    evidence = lesson_evidence(lesson)
    supports, _ = evidence.cited()
    score = lesson_confidence(lesson, now, evidence, conflict_aware=False)
    return ld.ConflictSide(
        lesson.id, any(availability.case_usable(c, now) for c in supports), score.value
    )


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


WORDS = "words"
MEANING = "meaning"


@dataclass(frozen=True)
class MergeProposal:
    candidate: str
    target: str
    similarity: float
    # How the two were found alike: ``words`` (the merge rule) or ``meaning`` (the vector branch).
    found_by: str = WORDS


def merge_proposals(lesson: Lesson) -> list[MergeProposal]:
    """Approved lessons of the candidate's type and scope that it near-duplicates: in words
    (``is_merge_candidate``), and those the vector branch found alike in meaning when the
    candidate was drafted (``LessonMergeProposal``) while they are still approved and alike in
    type and scope."""
    if lesson.status != Status.CANDIDATE:
        return []
    mine = lesson_shape(lesson)
    approved = {other.id: other for other in shapes_in_scope(lesson.scope)}
    found = {
        other.id: MergeProposal(lesson.id, other.id, float(ld.merge_similarity(mine, other)))
        for other in approved.values()
        if ld.is_merge_candidate(mine, other)
    }
    for target_id, similarity in LessonMergeProposal.objects.filter(candidate=lesson).values_list(
        "target_id", "similarity"
    ):
        target = approved.get(target_id)
        if target is not None and target_id not in found and target.lesson_type == mine.lesson_type:
            found[target_id] = MergeProposal(lesson.id, target_id, similarity, MEANING)
    return sorted(found.values(), key=lambda p: (p.found_by != WORDS, -p.similarity, p.target))
