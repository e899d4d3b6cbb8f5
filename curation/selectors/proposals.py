"""Reads of skill proposals: the queue, what still supports a proposal or a skill, the cases of
check patterns, and success patterns proven often enough."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Q, QuerySet

from curation.domain.proposals import (
    DEFAULT_MIN_PROVEN_INCIDENTS,
    DEFAULT_MIN_SUCCESS_RATE,
    MIN_PROPOSAL_INCIDENTS,
    PATTERN_LESSON,
    PatternCase,
    PatternRecord,
    enough_support,
    pattern_record,
)
from curation.domain.proposals import proven as pattern_proven
from curation.domain.staleness import cited_documents
from curation.models import ProposalStatus, RunDraft, SkillProposal
from curation.selectors.incidents import (
    IncidentSupport,
    case_incident,
    incident_support,
    merge_scope_of,
    merges_by_scope,
)
from experience.cases.models import Case, Evidence, Skill, SkillCase
from experience.cases.selectors import cited_case
from experience.core.availability import case_usable
from experience.core.models import Status
from experience.lessons.models import Lesson
from experience.lessons.selectors import lesson_availability, lesson_evidence, open_conflict_ids
from experience.runs.models import Outcome, Reference, RunOutcome
from knowledge.models import Document
from reviewconsole import clock
from reviewconsole.tenancy import may_access, visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    Viewer = User | AnonymousUser | None


# --- proposals and support ---------------------------------------------------------------------


def proposal_queue(user: Viewer, *, status: str = ProposalStatus.OPEN) -> QuerySet[SkillProposal]:
    proposals = visible(SkillProposal.objects.select_related("resolved_by"), user)
    if status:
        proposals = proposals.filter(status=status)
    return proposals.order_by("-updated_at", "-id")


def proposal_get(pk: int) -> SkillProposal | None:
    return SkillProposal.objects.select_related("resolved_by").filter(pk=pk).first()


def proposal_validity(proposal: SkillProposal, now: datetime) -> tuple[datetime, datetime]:
    """From now until the first supporting case expires: the skill is unavailable after that."""
    first_end = (
        Case.objects.filter(pk__in=proposal.case_ids)
        .order_by("valid_to")
        .values_list("valid_to", flat=True)
        .first()
    )
    return now, first_end or now + timedelta(days=365)


def pattern_cases(cases: Iterable[Case]) -> list[PatternCase]:
    cases = list(cases)
    documents: dict[str, set[str]] = {c.id: set() for c in cases}
    for case_id, source_id in Evidence.objects.filter(case__in=cases).values_list(
        "case_id", "source_id"
    ):
        documents[case_id] |= {key for key, _v in cited_documents([source_id])}
    by_scope = merges_by_scope(merge_scope_of(c) for c in cases)
    return [
        PatternCase(
            case_id=c.id,
            scope=tuple(sorted(c.scope.items())),
            incident=case_incident(c, by_scope),
            title=c.title,
            documents=frozenset(documents[c.id]),
            hypotheses=tuple(str(e.get("hypothesis", "")) for e in c.counterevidence or []),
        )
        for c in cases
    ]


def covered_by_skill(scope: dict[str, str], case_ids: Sequence[str]) -> bool:
    """A candidate or approved skill of this scope already cites every supporting case."""
    skills = Skill.objects.filter(status__in=[Status.CANDIDATE, Status.APPROVED], **scope)
    for skill_id in skills.values_list("pk", flat=True):
        cited = set(SkillCase.objects.filter(skill_id=skill_id).values_list("case_id", flat=True))
        if set(case_ids) <= cited:
            return True
    return False


def latest_titles(keys: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The newest approved title of each ``(tenant, doc_key)``: keys are per tenant."""
    titles: dict[tuple[str, str], str] = {}
    wanted = Q(pk__in=[])
    for tenant in {tenant for tenant, _key in keys}:
        wanted |= Q(tenant=tenant, doc_key__in=sorted(k for t, k in keys if t == tenant))
    for tenant, key, title in (
        Document.objects.filter(wanted, approved=True, revoked=False)
        .order_by("tenant", "doc_key", "-version")
        .values_list("tenant", "doc_key", "title")
    ):
        titles.setdefault((tenant, key), title)
    return titles


def cases_by_id(case_ids: Sequence[str]) -> list[Case]:
    found = {
        c.id: c for c in Case.objects.filter(pk__in=list(case_ids)).select_related("submitted_by")
    }
    return [found[i] for i in case_ids if i in found]


@dataclass(frozen=True)
class ProposalSupport:
    """A proposal's cases and what still supports it: the distinct incidents of its usable
    cases (approved and valid now), against the minimum a proposal is drafted with."""

    cases: list[Case]
    support: IncidentSupport
    usable: frozenset[str]

    @property
    def enough(self) -> bool:
        return enough_support(self.support.incidents)

    @property
    def minimum(self) -> int:
        return MIN_PROPOSAL_INCIDENTS


def proposal_support(proposal: SkillProposal, now: datetime | None = None) -> ProposalSupport:
    """What supports ``proposal`` now: a case revoked or expired since the scan drafted it
    supports nothing, as it would support nothing in the skill (``skill_support``)."""
    now = now or clock.now()
    cases = cases_by_id(proposal.case_ids)
    usable = [c for c in cases if case_usable(cited_case(c), now)]
    return ProposalSupport(cases, incident_support(usable), frozenset(c.id for c in usable))


def skill_support(skill: Skill, user: Viewer) -> tuple[list[Case], IncidentSupport]:
    """The cases a skill cites that ``user`` may see, and the incidents the usable ones count
    (approved and valid now: a revoked or expired case supports nothing, as the skill's own
    availability says)."""
    cases = [
        link.case
        for link in visible(SkillCase.objects.filter(skill=skill), user, "case__tenant")
        .select_related("case__submitted_by")
        .order_by("position")
    ]
    now = clock.now()
    usable = [c for c in cases if case_usable(cited_case(c), now)]
    return cases, incident_support(usable)


def proposal_get_visible(pk: int, user: Viewer) -> SkillProposal | None:
    proposal = proposal_get(pk)
    return proposal if proposal is not None and may_access(user, proposal.tenant) else None


# --- proven patterns ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProvenSettings:
    min_incidents: int
    min_rate: float


def proven_settings() -> ProvenSettings:
    """``SKILL_PROPOSAL_MIN_INCIDENTS`` and ``SKILL_PROPOSAL_MIN_SUCCESS_RATE`` (docs/operations.md)."""
    return ProvenSettings(
        min_incidents=int(
            getattr(settings, "SKILL_PROPOSAL_MIN_INCIDENTS", DEFAULT_MIN_PROVEN_INCIDENTS)
        ),
        min_rate=float(
            getattr(settings, "SKILL_PROPOSAL_MIN_SUCCESS_RATE", DEFAULT_MIN_SUCCESS_RATE)
        ),
    )


def _lineage(lesson_ids: Sequence[str]) -> dict[str, str]:
    """Every version of the lessons, earlier ones included (``superseded_by`` followed back),
    mapped to the lesson of ``lesson_ids`` it led to."""
    heir = {lesson_id: lesson_id for lesson_id in lesson_ids}
    frontier = list(lesson_ids)
    while frontier:
        earlier = list(
            Lesson.objects.filter(superseded_by__in=frontier)
            .exclude(pk__in=list(heir))
            .values_list("pk", "superseded_by")
        )
        for pk, later in earlier:
            heir[pk] = heir[later]
        frontier = [pk for pk, _ in earlier]
    return heir


def run_outcomes_of(lesson_ids: Sequence[str]) -> dict[str, tuple[set[str], set[str]]]:
    """Per lesson: the runs that read it (or an earlier version) whose latest outcome a reviewer
    reported ``resolved_by_lead``, and those a reviewer reported ``lead_was_wrong`` (an agent's
    report counts in neither direction, as for confidence)."""
    heir = _lineage(lesson_ids)
    found: dict[str, tuple[set[str], set[str]]] = {i: (set(), set()) for i in lesson_ids}
    reads = Reference.objects.filter(item_id__in=list(heir)).values_list("item_id", "run_id")
    runs_of: dict[str, set[str]] = defaultdict(set)
    for item_id, run_id in reads:
        runs_of[run_id].add(heir[item_id])
    for run_id, outcome, reviewed in RunOutcome.objects.filter(
        run_id__in=list(runs_of)
    ).values_list("run_id", "outcome", "reviewed"):
        for lesson_id in runs_of[run_id]:
            confirmed, refuted = found[lesson_id]
            if outcome == Outcome.RESOLVED_BY_LEAD and reviewed:
                confirmed.add(run_id)
            elif outcome == Outcome.LEAD_WAS_WRONG and reviewed:
                refuted.add(run_id)
    return found


@dataclass(frozen=True)
class LessonRecord:
    """A success pattern's record (``pattern_record``) and the cases a skill drafted from
    it would cite: its usable supporting cases and the approved after-action cases of the runs
    that confirmed it, all of its scope, with the distinct incidents they span."""

    record: PatternRecord
    case_ids: tuple[str, ...]
    case_incidents: tuple[str, ...]

    def proven(self, config: ProvenSettings) -> bool:
        return pattern_proven(
            self.record, min_incidents=config.min_incidents, min_rate=config.min_rate
        ) and enough_support(len(self.case_incidents))


def lesson_records(lessons: Sequence[Lesson], now: datetime) -> dict[str, LessonRecord]:
    outcomes = run_outcomes_of([lesson.id for lesson in lessons])
    confirming_cases = dict(
        RunDraft.objects.filter(
            run_id__in={run for confirmed, _ in outcomes.values() for run in confirmed}
        ).values_list("run_id", "case_id")
    )
    records = {}
    for lesson in lessons:
        supports, contradicts = lesson_evidence(lesson).cited()
        confirmed, refuted = outcomes[lesson.id]
        usable = [c for c in supports if case_usable(c, now)]
        record = pattern_record(
            supporting=[c.incident for c in usable],
            contradicting=[c.incident for c in contradicts if case_usable(c, now)],
            confirmed_runs=confirmed,
            refuted_runs=refuted,
        )
        extra = [
            cited_case(case)
            for case in Case.objects.filter(
                pk__in=[confirming_cases[r] for r in confirmed if r in confirming_cases],
                **lesson.scope,
            )
        ]
        cases = {c.case_id: c for c in [*usable, *(c for c in extra if case_usable(c, now))]}
        records[lesson.id] = LessonRecord(
            record,
            tuple(sorted(cases)),
            tuple(sorted({c.incident for c in cases.values()})),
        )
    return records


def proposal_still_proven(proposal: SkillProposal, now: datetime) -> bool:
    """A proposal drafted from a success pattern still stands on it: the lesson is approved,
    available, in no open conflict, and its record still clears the bar (other kinds: True)."""
    if proposal.pattern_kind != PATTERN_LESSON:
        return True
    lesson = Lesson.objects.filter(
        pk=proposal.pattern, status=Status.APPROVED, tenant=proposal.tenant
    ).first()
    if (
        lesson is None
        or not lesson_availability(lesson, now).available
        or open_conflict_ids([lesson.id])
    ):
        return False
    return lesson_records([lesson], now)[lesson.id].proven(proven_settings())
