"""Reads of intake and curation: threads, similarity links, incidents and confidence, queues."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from curation import domain
from curation.models import (
    IncidentMerge,
    LinkStatus,
    NearDuplicate,
    ProposalStatus,
    ReReview,
    ReReviewResolution,
    ReReviewStatus,
    RunDraft,
    SkillProposal,
    Thread,
    ThreadMessage,
)
from experience.cases.models import Case, Evidence, Skill, SkillCase
from experience.cases.selectors import cited_case
from experience.core.availability import case_usable
from experience.core.models import Status
from experience.lessons.models import Lesson
from experience.lessons.selectors import lesson_availability, lesson_evidence, open_conflict_ids
from experience.runs.models import Outcome, Reference, Run, RunCitation, RunOutcome
from knowledge.models import Document
from reviewconsole import clock
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.tenancy import may_access, visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    Viewer = User | AnonymousUser | None


def scope_key(scope: Mapping[str, str]) -> str:
    joined = "\x1f".join(scope[name] for name in SCOPE_FIELDS)
    return hashlib.sha256(joined.encode()).hexdigest()


# --- incidents ---------------------------------------------------------------------------------


def incident_merges(tenant: str, brand: str) -> dict[str, str]:
    """alias → canonical incident for one tenant and brand."""
    return dict(
        IncidentMerge.objects.filter(tenant=tenant, brand=brand).values_list("alias", "canonical")
    )


# The canonical incident of a case (``curation.domain``, "Incident identity") in its two forms,
# both keyed by ``domain.MERGE_SCOPE``: in Python from the merges read by scope
# (:func:`case_incident`), and in SQL inside the query that loads the case
# (:func:`canonical_incident_expression`, installed into experience at start-up).

MergesByScope = Mapping[tuple[str, ...], Mapping[str, str]]


def merge_scope_of(case: Case) -> tuple[str, ...]:
    return tuple(getattr(case, name) for name in domain.MERGE_SCOPE)


def merges_by_scope(pairs: Iterable[tuple[str, ...]]) -> dict[tuple[str, ...], dict[str, str]]:
    pairs = set(pairs)
    if not pairs:
        return {}
    condition = Q()
    for pair in pairs:
        condition |= Q(**dict(zip(domain.MERGE_SCOPE, pair, strict=True)))
    found: dict[tuple[str, ...], dict[str, str]] = defaultdict(dict)
    for *scope, alias, canonical in IncidentMerge.objects.filter(condition).values_list(
        *domain.MERGE_SCOPE, "alias", "canonical"
    ):
        found[tuple(scope)][alias] = canonical
    return dict(found)


def case_incident(case: Case, by_scope: MergesByScope) -> str:
    """The canonical incident of ``case`` given the merges of its scope."""
    return domain.canonical_incident(case.incident, by_scope.get(merge_scope_of(case), {}))


def canonical_incident_expression(prefix: str = "") -> Coalesce:
    """The canonical incident of the case row at ``prefix``, computed inside the same query: the
    merge of its incident, else the incident itself. One lookup is the end of the chain because
    ``incident_merge`` stores every merge resolved to its root."""
    path = f"{prefix}__" if prefix else ""
    merged = IncidentMerge.objects.filter(
        **{name: OuterRef(f"{path}{name}") for name in domain.MERGE_SCOPE},
        alias=OuterRef(f"{path}incident"),
    ).values("canonical")[:1]
    return Coalesce(Subquery(merged), F(f"{path}incident"))


@dataclass(frozen=True)
class IncidentSupport:
    """Cases counted as incidents: several summaries of one incident count once. (An item's
    confidence, computed from such counts, is ``experience.lessons.domain.Confidence``.)"""

    summaries: int
    incidents: int
    incident_ids: tuple[str, ...]


def incident_support(
    cases: Sequence[Case], *, merges: MergesByScope | None = None
) -> IncidentSupport:
    """``merges`` by scope (``merges_by_scope``) when the caller has them already."""
    by_scope = merges if merges is not None else merges_by_scope(merge_scope_of(c) for c in cases)
    canonical = sorted({case_incident(c, by_scope) for c in cases})
    return IncidentSupport(
        summaries=len(cases), incidents=len(canonical), incident_ids=tuple(canonical)
    )


@dataclass(frozen=True)
class IncidentGroup:
    canonical: str
    aliases: tuple[str, ...]
    cases: list[Case]
    merges: list[IncidentMerge]


def incident_group(case: Case, merges: Mapping[str, str]) -> IncidentGroup:
    """Every case, in the case's tenant and brand, describing its (canonical) incident."""
    root = domain.canonical_incident(case.incident, merges)
    records = list(
        IncidentMerge.objects.filter(tenant=case.tenant, brand=case.brand, canonical=root)
        .select_related("merged_by")
        .order_by("merged_at", "id")
    )
    names = {root, *(m.alias for m in records)}
    cases = list(
        Case.objects.filter(tenant=case.tenant, brand=case.brand, incident__in=names)
        .select_related("submitted_by")
        .order_by("submitted_at", "id")
    )
    return IncidentGroup(root, tuple(sorted(names - {root})), cases, records)


def merge_list(user: Viewer, *, tenant: str = "", brand: str = "") -> QuerySet[IncidentMerge]:
    merges = visible(IncidentMerge.objects.select_related("merged_by"), user)
    if tenant:
        merges = merges.filter(tenant=tenant)
    if brand:
        merges = merges.filter(brand=brand)
    return merges.order_by("-merged_at", "-id")


# --- threads -----------------------------------------------------------------------------------


def thread_list(user: Viewer) -> QuerySet[Thread]:
    """The threads of the tenants ``user`` may see."""
    return (
        visible(Thread.objects.select_related("imported_by"), user)
        .annotate(message_count=Count("messages"))
        .order_by("-imported_at", "-id")
    )


def threads_named(thread_id: str, user: Viewer, tenant: str | None = None) -> list[Thread]:
    """The threads ``thread_id`` names among the tenants ``user`` sees (only ``tenant``'s when
    given): thread ids are chosen per tenant, so a deployment-wide user may see several."""
    threads = visible(Thread.objects.select_related("imported_by"), user).filter(
        thread_id=thread_id
    )
    if tenant is not None:
        threads = threads.filter(tenant=tenant)
    return list(threads.order_by("tenant"))


def thread_get(thread_id: str, user: Viewer, tenant: str | None = None) -> Thread | None:
    """The thread, or None when there is none, it is of a tenant ``user`` may not see, or
    ``user`` sees that id in several tenants and none was named."""
    named = threads_named(thread_id, user, tenant)
    return named[0] if len(named) == 1 else None


def thread_messages(thread: Thread) -> list[ThreadMessage]:
    return list(thread.messages.order_by("position"))


def thread_units(thread: Thread) -> list[domain.Unit]:
    messages = [
        domain.Message(
            id=m.message_id,
            author=m.author,
            role=m.role,
            time=m.sent_at,
            text=m.text,
            attachments=tuple(domain.Attachment(a["name"], a["text"]) for a in m.attachments),
        )
        for m in thread.messages.order_by("position")
    ]
    return domain.thread_units(thread.thread_id, messages)


def cases_citing_thread(thread: Thread, user: Viewer) -> QuerySet[Case]:
    """Cases of the thread's tenant citing it (``thread:ID`` names a thread within a tenant)."""
    prefix = f"thread:{thread.thread_id}#"
    return (
        visible(Case.objects.filter(tenant=thread.tenant), user)
        .filter(evidence_items__source_id__startswith=prefix)
        .distinct()
        .select_related("submitted_by")
        .order_by("-submitted_at", "id")
    )


# --- near-duplicates ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SimilarCase:
    link: NearDuplicate
    other: Case
    incident: str  # canonical
    other_incident: str  # canonical


def similar_cases(case: Case, merges: Mapping[str, str] | None = None) -> list[SimilarCase]:
    """Every similarity link of ``case``, open ones first, most similar first."""
    links = list(
        NearDuplicate.objects.filter(Q(case_a=case) | Q(case_b=case))
        .select_related("case_a__submitted_by", "case_b__submitted_by", "resolved_by")
        .order_by("-similarity", "id")
    )
    if merges is None:
        merges = incident_merges(case.tenant, case.brand)
    own = domain.canonical_incident(case.incident, merges)
    found = [
        SimilarCase(
            link=link,
            other=link.other(case.id),
            incident=own,
            other_incident=domain.canonical_incident(link.other(case.id).incident, merges),
        )
        for link in links
    ]
    return sorted(found, key=lambda s: (s.link.status != LinkStatus.OPEN, -s.link.similarity))


def near_duplicate_queue(user: Viewer, *, status: str = LinkStatus.OPEN) -> QuerySet[NearDuplicate]:
    links = visible(
        NearDuplicate.objects.select_related(
            "case_a__submitted_by", "case_b__submitted_by", "resolved_by"
        ),
        user,
        "case_a__tenant",
    )
    if status:
        links = links.filter(status=status)
    return links.order_by("-detected_at", "-id")


def near_duplicate_get(pk: int) -> NearDuplicate | None:
    return NearDuplicate.objects.select_related("case_a", "case_b").filter(pk=pk).first()


# --- re-review ---------------------------------------------------------------------------------

ACTIVE = (ReReviewStatus.OPEN, ReReviewStatus.PENDING)


def rereview_queue(user: Viewer, *, status: str = "", reason: str = "") -> QuerySet[ReReview]:
    """Open and pending entries by default; ``status`` narrows to one state."""
    entries = visible(ReReview.objects.select_related("resolved_by"), user)
    entries = entries.filter(status=status) if status else entries.filter(status__in=ACTIVE)
    if reason:
        entries = entries.filter(reason=reason)
    return entries.order_by("-detected_at", "-id")


def rereview_get(pk: int) -> ReReview | None:
    return ReReview.objects.filter(pk=pk).first()


DocumentStates = tuple[set[tuple[str, int]], dict[str, int]]


def document_states(cited: set[tuple[str, int]]) -> dict[str, DocumentStates]:
    """Per tenant: the revoked ``(doc_key, version)`` pairs and each key's newest approved version.

    Keyed by tenant because a source id is free text: a case may name a document of another
    tenant, whose state must never reach this tenant's queue.
    """
    keys = {key for key, _version in cited}
    states: dict[str, DocumentStates] = {}
    if not keys:
        return states
    for tenant, key, version in Document.objects.filter(doc_key__in=keys, revoked=True).values_list(
        "tenant", "doc_key", "version"
    ):
        states.setdefault(tenant, (set(), {}))[0].add((key, int(version)))
    for tenant, key, newest in (
        Document.objects.filter(doc_key__in=keys, approved=True, revoked=False)
        .values("tenant", "doc_key")
        .annotate(newest=Max("version"))
        .values_list("tenant", "doc_key", "newest")
    ):
        states.setdefault(tenant, (set(), {}))[1][key] = int(newest)
    return states


def last_reads(item_ids: list[str]) -> dict[str, datetime]:
    return dict(
        Reference.objects.filter(item_id__in=item_ids)
        .values("item_id")
        .annotate(last=Max("read_at"))
        .values_list("item_id", "last")
    )


def last_confirmations(item_ids: list[str]) -> dict[str, datetime]:
    return dict(
        ReReview.objects.filter(item_id__in=item_ids, resolution=ReReviewResolution.CONFIRMED)
        .values("item_id")
        .annotate(last=Max("resolved_at"))
        .values_list("item_id", "last")
    )


CitedDocuments = dict[str, set[tuple[str, int]]]


def cited_documents_of(
    cases: Sequence[Case], skills: Sequence[Skill]
) -> tuple[CitedDocuments, CitedDocuments]:
    """The documents each case's evidence cites, and each skill's runs cited, by item id."""
    case_documents: CitedDocuments = {c.id: set() for c in cases}
    for case_id, source_id in Evidence.objects.filter(case__in=cases).values_list(
        "case_id", "source_id"
    ):
        case_documents[case_id] |= domain.cited_documents([source_id])
    skill_documents: CitedDocuments = {s.id: set() for s in skills}
    run_skill = dict(
        Run.objects.filter(skill_id__in=list(skill_documents)).values_list("pk", "skill_id")
    )
    for run_pk, document in RunCitation.objects.filter(run_id__in=list(run_skill)).values_list(
        "run_id", "document_id"
    ):
        skill_documents[run_skill[run_pk]] |= domain.cited_documents([document])
    return case_documents, skill_documents


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


def pattern_cases(cases: Iterable[Case]) -> list[domain.PatternCase]:
    cases = list(cases)
    documents: dict[str, set[str]] = {c.id: set() for c in cases}
    for case_id, source_id in Evidence.objects.filter(case__in=cases).values_list(
        "case_id", "source_id"
    ):
        documents[case_id] |= {key for key, _v in domain.cited_documents([source_id])}
    by_scope = merges_by_scope(merge_scope_of(c) for c in cases)
    return [
        domain.PatternCase(
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
        return domain.enough_support(self.support.incidents)

    @property
    def minimum(self) -> int:
        return domain.MIN_PROPOSAL_INCIDENTS


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


def queue_counts(user: Viewer) -> dict[str, Any]:
    return {
        "near_duplicates": near_duplicate_queue(user).count(),
        "rereview": rereview_queue(user).count(),
        "proposals": proposal_queue(user).count(),
        "threads": visible(Thread.objects.all(), user).count(),
    }


def thread_first_sent_at(thread: Thread) -> datetime | None:
    """When the thread's first message was sent: where a candidate's validity usually starts."""
    return thread.messages.order_by("sent_at").values_list("sent_at", flat=True).first()


# --- single items as a user may see them (None: none, or of a tenant the user may not see) -----


def near_duplicate_get_visible(pk: int, user: Viewer) -> NearDuplicate | None:
    """The pair, when ``user`` may see both of its cases (a pair is of one scope, so one tenant;
    either case of another tenant answers as an unknown pair)."""
    link = near_duplicate_get(pk)
    if link is None or not all(may_access(user, c.tenant) for c in (link.case_a, link.case_b)):
        return None
    return link


@dataclass(frozen=True)
class Comparison:
    """A pair of similar cases side by side: the one under review on the left (a candidate
    beside the approved case it resembles; else the newer beside the older)."""

    link: NearDuplicate
    left: Case
    right: Case
    rows: list[domain.ComparedRow]


def _compared_content(case: Case) -> dict[str, Any]:
    return {
        "observations": case.observations,
        "diagnosis": case.diagnosis,
        "counterevidence": case.counterevidence,
        "outcome": case.outcome,
    }


def near_duplicate_comparison(pk: int, user: Viewer) -> Comparison | None:
    link = near_duplicate_get_visible(pk, user)
    if link is None:
        return None
    a, b = link.case_a, link.case_b
    under_review: dict[str, int] = {Status.CANDIDATE: 0, Status.APPROVED: 1}
    left, right = sorted(
        (a, b), key=lambda c: (under_review.get(c.status, 2), -c.submitted_at.timestamp(), c.id)
    )
    rows = domain.compare_cases(_compared_content(left), _compared_content(right))
    return Comparison(link, left, right, rows)


def rereview_get_visible(pk: int, user: Viewer) -> ReReview | None:
    entry = rereview_get(pk)
    return entry if entry is not None and may_access(user, entry.tenant) else None


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
            getattr(settings, "SKILL_PROPOSAL_MIN_INCIDENTS", domain.DEFAULT_MIN_PROVEN_INCIDENTS)
        ),
        min_rate=float(
            getattr(settings, "SKILL_PROPOSAL_MIN_SUCCESS_RATE", domain.DEFAULT_MIN_SUCCESS_RATE)
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
    """A success pattern's record (``domain.pattern_record``) and the cases a skill drafted from
    it would cite: its usable supporting cases and the approved after-action cases of the runs
    that confirmed it, all of its scope, with the distinct incidents they span."""

    record: domain.PatternRecord
    case_ids: tuple[str, ...]
    case_incidents: tuple[str, ...]

    def proven(self, config: ProvenSettings) -> bool:
        return domain.proven(
            self.record, min_incidents=config.min_incidents, min_rate=config.min_rate
        ) and domain.enough_support(len(self.case_incidents))


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
        record = domain.pattern_record(
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
    if proposal.pattern_kind != domain.PATTERN_LESSON:
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
