"""Every write of intake and curation: atomic, permission-checked and audited.

Two writes happen without a person asking, inside the transaction of the change that causes
them (see ``curation.signals``): a submitted case's similarity links, and the closing of
re-review entries whose item stopped being approved. They record no event of their own: the
submission, approval or revocation that caused them is the audited act.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from curation import domain
from curation.models import (
    CaseBand,
    CaseSignature,
    IncidentMerge,
    LinkStatus,
    NearDuplicate,
    ProposalStatus,
    ReReview,
    ReReviewReason,
    ReReviewResolution,
    ReReviewStatus,
    SkillProposal,
    Thread,
    ThreadMessage,
)
from curation.selectors import incident_merges, merges_by_scope, scope_key
from experience.models import Case, Evidence, Reference, Run, RunCitation, Skill, SkillCase, Status
from experience.schema import parse_case, parse_skill
from experience.services import case_submit, skill_submit
from experience.tools import tool_specs
from knowledge.models import Document
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action
from reviewconsole.tenancy import NOT_IN_TENANT, NOT_IN_TENANT_MESSAGE, may_access
from reviewconsole.timeparse import to_utc_iso

if TYPE_CHECKING:
    from django.contrib.auth.models import User

ADD_CASE_PERMISSION = "experience.add_case"
ADD_SKILL_PERMISSION = "experience.add_skill"
REVIEW_PERMISSION = "experience.review_case"

IMPORT_REFUSED = "importing threads needs the operator or reviewer role"
BUILD_REFUSED = "building candidates needs the operator or reviewer role"
REVIEW_REFUSED = "this decision needs the reviewer role"
ADOPT_REFUSED = "submitting skills needs the operator or reviewer role"
THREAD_CONFLICT = "a thread with this id was imported with other content"
REASON_REQUIRED = "a reason is required"
LINK_RESOLVED = "this link was already resolved"
LINK_ACROSS_TENANTS = "links cases of two tenants; incidents are only compared within one tenant"
LINK_OUTSIDE_MERGE = "links cases outside this tenant and brand"
DECISION_UNKNOWN = 'must be "same_incident" or "different"'
CANONICAL_NOT_IN_PAIR = "must be the incident of one of the two cases"
ENTRY_CLOSED = "this re-review entry is not open"
ENTRY_NOT_CASE = "only cases are re-certified as a new version; revoke or confirm a skill"
ENTRY_NOT_SKILL = "a case is re-certified by a reviewed new version, not confirmed"
ITEM_NOT_APPROVED = "the item is no longer approved"
VALID_TO_PASSED = "must be in the future: a new version is certified for what comes"
PROPOSAL_CLOSED = "this proposal is not open"

DEFAULT_STALE_AFTER_DAYS = 90


def _require(user: User, perm: str, message: str) -> None:
    if not (user.is_authenticated and user.has_perm(perm)):
        raise PermissionRefused(message)


def _require_tenant(user: User, tenant: str) -> None:
    if not may_access(user, tenant):
        raise PermissionRefused(f"{tenant!r} {NOT_IN_TENANT_MESSAGE}", unmet=NOT_IN_TENANT)


def _require_input_tenant(user: User, tenant: str, *, field: str) -> None:
    """A tenant named in the input (a file, a form) that the user may not use is a bad value."""
    if not may_access(user, tenant):
        raise ValidationFailure(field, f"{tenant!r} {NOT_IN_TENANT_MESSAGE}")


def _reason(reason: str) -> str:
    text = reason.strip()
    if not text:
        raise ValidationFailure("reason", REASON_REQUIRED)
    return text


def stale_after_days() -> int:
    return int(getattr(settings, "CURATION_STALE_AFTER_DAYS", DEFAULT_STALE_AFTER_DAYS))


def similarity_threshold() -> float:
    return float(
        getattr(settings, "CURATION_SIMILARITY_THRESHOLD", domain.DEFAULT_SIMILARITY_THRESHOLD)
    )


# --- threads -----------------------------------------------------------------------------------


@transaction.atomic
def thread_import(*, data: object, actor: User) -> tuple[Thread, bool]:
    """Store a thread as imported. Identical content is a no-op; other content under the same
    id is refused (a thread is raw material that evidence cites, so it never changes).

    The thread's ``tenant`` must be one the actor may use (refused naming ``tenant``)."""
    _require(actor, ADD_CASE_PERMISSION, IMPORT_REFUSED)
    content = domain.parse_thread(data)
    _require_input_tenant(actor, content.tenant, field="tenant")
    existing = Thread.objects.filter(thread_id=content.id).first()
    if existing is not None:
        if existing.content_hash != content.content_hash:
            raise ValidationFailure("id", f"{content.id}: {THREAD_CONFLICT}")
        return existing, False
    thread = Thread.objects.create(
        thread_id=content.id,
        tenant=content.tenant,
        title=content.title,
        source=content.source,
        content_hash=content.content_hash,
        imported_by=actor,
        imported_at=clock.now(),
    )
    ThreadMessage.objects.bulk_create(
        ThreadMessage(
            thread=thread,
            message_id=message.id,
            position=position,
            author=message.author,
            role=message.role,
            sent_at=message.time,
            text=message.text,
            attachments=[{"name": a.name, "text": a.text} for a in message.attachments],
        )
        for position, message in enumerate(content.messages)
    )
    event_record(
        actor=actor,
        action=Action.THREAD_IMPORT,
        target=f"thread:{thread.thread_id}",
        details={
            "tenant": content.tenant,
            "messages": len(content.messages),
            "content_hash": content.content_hash,
        },
    )
    return thread, True


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


@transaction.atomic
def candidate_build(
    *,
    thread: Thread,
    picks: Sequence[domain.Pick],
    draft: domain.CandidateDraft,
    actor: User,
) -> tuple[Case, bool]:
    """Submit the case the operator assembled from picked messages, through the normal
    submission (console), so it lands in the review queue unchecked.

    Only a user who may see the thread builds from it, and the case's scope tenant is the
    thread's (refused naming ``scope.tenant``): evidence never moves to another tenant."""
    _require(actor, ADD_CASE_PERMISSION, BUILD_REFUSED)
    _require_tenant(actor, thread.tenant)
    domain.require_thread_tenant(thread.tenant, draft.scope)
    data = domain.candidate_case(thread_units(thread), picks, draft)
    case, created = case_submit(content=parse_case(data), actor=actor)
    if created:
        event_record(
            actor=actor,
            action=Action.THREAD_BUILD,
            target=case.id,
            details={
                "thread": thread.thread_id,
                "picked": [{"unit": p.unit, "use": p.use} for p in picks],
            },
        )
    return case, created


# --- near-duplicates ---------------------------------------------------------------------------


def _case_shingles(case: Case) -> frozenset[str]:
    return domain.shingles(
        domain.similarity_text(
            case.title,
            case.summary,
            (str(item.get("excerpt", "")) for item in case.observations or []),
            str((case.diagnosis or {}).get("statement", "")),
        )
    )


def case_link_similar(*, case: Case) -> list[NearDuplicate]:
    """Index the case and link it to similar candidate or approved cases of the same scope (not
    to the version it supersedes or that supersedes it, nor to cases of its own incident)."""
    own = _case_shingles(case)
    if not own:
        return []
    values = domain.signature(own)
    threshold = similarity_threshold()
    bands, rows = domain.lsh_shape(threshold)
    key = scope_key(case.scope)
    keys = domain.band_keys(values, bands=bands, rows=rows)
    CaseSignature.objects.update_or_create(
        case=case, defaults={"scope_key": key, "values": list(values), "threshold": threshold}
    )
    CaseBand.objects.filter(case=case).delete()
    CaseBand.objects.bulk_create(CaseBand(case=case, scope_key=key, key=k) for k in keys)

    candidates = (
        Case.objects.filter(
            pk__in=CaseBand.objects.filter(scope_key=key, key__in=keys).values("case"),
            status__in=[Status.CANDIDATE, Status.APPROVED],
            tenant=case.tenant,
        )
        .exclude(pk=case.pk)
        .order_by("id")
    )
    merges = incident_merges(case.tenant, case.brand)
    own_incident = domain.canonical_incident(case.incident, merges)
    now = clock.now()
    links = []
    for peer in candidates:
        if peer.scope != case.scope or case.supersedes == peer.id or peer.supersedes == case.id:
            continue
        if domain.canonical_incident(peer.incident, merges) == own_incident:
            continue
        measured = domain.similarity(own, _case_shingles(peer))
        if measured < threshold:
            continue
        first, second = sorted([case, peer], key=lambda c: c.id)
        link, _ = NearDuplicate.objects.get_or_create(
            case_a=first, case_b=second, defaults={"similarity": measured, "detected_at": now}
        )
        links.append(link)
    return links


def _resolve_links_within_incidents(tenant: str, brand: str, *, actor: User, now: datetime) -> int:
    """Open links whose two cases now resolve to one incident are closed as the same incident."""
    merges = incident_merges(tenant, brand)
    closed = 0
    for link in NearDuplicate.objects.filter(
        status=LinkStatus.OPEN, case_a__tenant=tenant, case_a__brand=brand
    ).select_related("case_a", "case_b"):
        if domain.canonical_incident(link.case_a.incident, merges) == domain.canonical_incident(
            link.case_b.incident, merges
        ):
            link.status = LinkStatus.SAME_INCIDENT
            link.resolved_by = actor
            link.resolved_at = now
            link.reason = link.reason or "the incidents were merged"
            link.save(update_fields=["status", "resolved_by", "resolved_at", "reason"])
            closed += 1
    return closed


@transaction.atomic
def incident_merge(
    *,
    tenant: str,
    brand: str,
    alias: str,
    into: str,
    actor: User,
    reason: str,
    link: NearDuplicate | None = None,
) -> IncidentMerge:
    """Record that incident ``alias`` is incident ``into``; every distinct-incident count of the
    tenant and brand follows at once (skill approval, confidence, proposals)."""
    _require(actor, REVIEW_PERMISSION, REVIEW_REFUSED)
    _require_tenant(actor, tenant)
    reason = _reason(reason)
    if link is not None and not all(
        (case.tenant, case.brand) == (tenant, brand) for case in (link.case_a, link.case_b)
    ):
        raise ValidationFailure("link", LINK_OUTSIDE_MERGE)
    alias, into = alias.strip(), into.strip()
    for name, value in (("alias", alias), ("into", into)):
        if not value or len(value) > 200:
            raise ValidationFailure(name, "must be an incident id of 1-200 characters")
    # Serialise merges of one tenant and brand: the plan reads the merges it is about to extend.
    list(
        IncidentMerge.objects.select_for_update()
        .filter(tenant=tenant, brand=brand)
        .values_list("pk", flat=True)
    )
    merges = incident_merges(tenant, brand)
    alias_root, into_root = domain.merge_plan(alias, into, merges)
    now = clock.now()
    merge = IncidentMerge.objects.create(
        tenant=tenant,
        brand=brand,
        alias=alias_root,
        into=into,
        canonical=into_root,
        merged_by=actor,
        merged_at=now,
        reason=reason,
        link=link,
    )
    moved = IncidentMerge.objects.filter(tenant=tenant, brand=brand, canonical=alias_root).update(
        canonical=into_root
    )
    closed = _resolve_links_within_incidents(tenant, brand, actor=actor, now=now)
    event_record(
        actor=actor,
        action=Action.INCIDENT_MERGE,
        target=f"incident:{tenant}/{brand}/{alias_root}",
        reason=reason,
        details={
            "requested": {"alias": alias, "into": into},
            "alias": alias_root,
            "canonical": into_root,
            "moved_aliases": moved,
            "links_closed": closed,
            "link": link.pk if link is not None else None,
        },
    )
    return merge


SAME_INCIDENT = "same_incident"
DIFFERENT = "different"


@transaction.atomic
def near_duplicate_resolve(
    *,
    link: NearDuplicate,
    decision: str,
    actor: User,
    reason: str,
    canonical: str = "",
) -> NearDuplicate:
    """A reviewer's answer to "possibly the same incident": merge the incidents, or record that
    they differ so the pair leaves the queue."""
    _require(actor, REVIEW_PERMISSION, REVIEW_REFUSED)
    reason = _reason(reason)
    link = (
        NearDuplicate.objects.select_for_update().select_related("case_a", "case_b").get(pk=link.pk)
    )
    # Both sides are the actor's tenant: links are only made within one scope, and a link
    # across tenants (a row stored before that rule) never merges one tenant's incident into
    # another's nor records a decision about another tenant's case.
    _require_tenant(actor, link.case_a.tenant)
    if link.case_b.tenant != link.case_a.tenant:
        raise ValidationFailure("link", LINK_ACROSS_TENANTS)
    if link.status != LinkStatus.OPEN:
        raise ValidationFailure("link", LINK_RESOLVED)
    if decision == SAME_INCIDENT:
        incidents = {link.case_a.incident, link.case_b.incident}
        if canonical not in incidents:
            raise ValidationFailure("canonical", CANONICAL_NOT_IN_PAIR)
        alias = next(iter(incidents - {canonical}))
        # Closes this link and every other open link the merge makes moot.
        incident_merge(
            tenant=link.case_a.tenant,
            brand=link.case_a.brand,
            alias=alias,
            into=canonical,
            actor=actor,
            reason=reason,
            link=link,
        )
        link.refresh_from_db()
        link.reason = reason
        link.save(update_fields=["reason"])
    elif decision == DIFFERENT:
        link.status = LinkStatus.DIFFERENT
        link.resolved_by = actor
        link.resolved_at = clock.now()
        link.reason = reason
        link.save(update_fields=["status", "resolved_by", "resolved_at", "reason"])
    else:
        raise ValidationFailure("decision", DECISION_UNKNOWN)
    event_record(
        actor=actor,
        action=Action.NEAR_DUPLICATE_RESOLVE,
        target=f"{link.case_a_id}~{link.case_b_id}"[:200],
        reason=reason,
        details={
            "decision": decision,
            "canonical": canonical or None,
            "cases": [link.case_a_id, link.case_b_id],
        },
    )
    return link


# --- re-review queue ---------------------------------------------------------------------------


@dataclass
class ScanReport:
    queued: list[ReReview] = field(default_factory=list)
    closed: list[ReReview] = field(default_factory=list)
    proposals: list[SkillProposal] = field(default_factory=list)
    linked: list[NearDuplicate] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "rereview": [_entry_json(e) for e in self.queued],
            "closed": [_entry_json(e) for e in self.closed],
            "proposals": [_proposal_json(p) for p in self.proposals],
            "near_duplicates": [
                {"id": link.pk, "cases": [link.case_a_id, link.case_b_id]} for link in self.linked
            ],
        }


def _entry_json(entry: ReReview) -> dict[str, Any]:
    return {
        "id": entry.pk,
        "item_id": entry.item_id,
        "item_type": entry.item_type,
        "reason": entry.reason,
        "document_id": entry.document_id or None,
        "detail": entry.detail or None,
        "status": entry.status,
        "resolution": entry.resolution or None,
    }


def _proposal_json(proposal: SkillProposal) -> dict[str, Any]:
    return {
        "id": proposal.pk,
        "scope": proposal.scope,
        "pattern": {"kind": proposal.pattern_kind, "value": proposal.pattern},
        "cases": proposal.case_ids,
        "incidents": proposal.incidents,
        "status": proposal.status,
    }


def _close_entries(
    item_id: str, resolution: str, *, now: datetime, note: str = ""
) -> list[ReReview]:
    entries = list(
        ReReview.objects.filter(
            item_id=item_id, status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING]
        )
    )
    for entry in entries:
        entry.status = ReReviewStatus.CLOSED
        entry.resolution = resolution
        entry.resolved_at = now
        entry.note = entry.note or note
        entry.save(update_fields=["status", "resolution", "resolved_at", "note"])
    return entries


def rereview_close_for(item: Case | Skill) -> list[ReReview]:
    """Close the entries of an item that is no longer approved (called on its status change)."""
    if item.status == Status.APPROVED:
        return []
    resolution = {
        Status.SUPERSEDED: ReReviewResolution.SUPERSEDED,
        Status.REVOKED: ReReviewResolution.REVOKED,
    }.get(Status(item.status), ReReviewResolution.GONE)
    note = f"superseded by {item.superseded_by}" if item.superseded_by else ""
    return _close_entries(item.id, resolution, now=clock.now(), note=note)


def _has_entry(item_id: str, reason: str, document_id: str = "", detail: str = "") -> bool:
    entries = ReReview.objects.filter(item_id=item_id, reason=reason)
    if reason == ReReviewReason.UNUSED:
        # One open question at a time; a later scan may ask again once it is answered.
        return entries.filter(status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING]).exists()
    # A document change is asked about once, whatever the answer was.
    return entries.filter(document_id=document_id, detail=detail).exists()


def _queue(
    item: Case | Skill,
    item_type: str,
    reason: str,
    *,
    now: datetime,
    document_id: str = "",
    detail: str = "",
) -> ReReview | None:
    if _has_entry(item.id, reason, document_id, detail):
        return None
    return ReReview.objects.create(
        item_id=item.id,
        item_type=item_type,
        tenant=item.tenant,
        title=item.title,
        reason=reason,
        document_id=document_id,
        detail=detail,
        detected_at=now,
    )


DocumentStates = tuple[set[tuple[str, int]], dict[str, int]]


def _document_states(cited: set[tuple[str, int]]) -> dict[str, DocumentStates]:
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


def _last_reads(item_ids: list[str]) -> dict[str, datetime]:
    return dict(
        Reference.objects.filter(item_id__in=item_ids)
        .values("item_id")
        .annotate(last=Max("read_at"))
        .values_list("item_id", "last")
    )


def _last_confirmations(item_ids: list[str]) -> dict[str, datetime]:
    return dict(
        ReReview.objects.filter(item_id__in=item_ids, resolution=ReReviewResolution.CONFIRMED)
        .values("item_id")
        .annotate(last=Max("resolved_at"))
        .values_list("item_id", "last")
    )


def _scan_staleness(now: datetime, days: int) -> list[ReReview]:
    queued: list[ReReview] = []
    cases = list(Case.objects.filter(status=Status.APPROVED).order_by("id"))
    skills = list(Skill.objects.filter(status=Status.APPROVED).order_by("id"))
    ids = [c.id for c in cases] + [s.id for s in skills]
    reads = _last_reads(ids)
    confirmations = _last_confirmations(ids)

    case_documents: dict[str, set[tuple[str, int]]] = {c.id: set() for c in cases}
    for case_id, source_id in Evidence.objects.filter(case__in=cases).values_list(
        "case_id", "source_id"
    ):
        case_documents[case_id] |= domain.cited_documents([source_id])
    skill_documents: dict[str, set[tuple[str, int]]] = {s.id: set() for s in skills}
    run_skill = dict(
        Run.objects.filter(skill_id__in=list(skill_documents)).values_list("pk", "skill_id")
    )
    for run_pk, document in RunCitation.objects.filter(run_id__in=list(run_skill)).values_list(
        "run_id", "document_id"
    ):
        skill_documents[run_skill[run_pk]] |= domain.cited_documents([document])
    everything = set().union(*case_documents.values(), *skill_documents.values())
    states = _document_states(everything)

    items: list[tuple[Case | Skill, str, set[tuple[str, int]]]] = [
        *((c, "case", case_documents[c.id]) for c in cases),
        *((s, "skill", skill_documents[s.id]) for s in skills),
    ]
    for item, item_type, cited in items:
        assert item.approved_at is not None
        if domain.unused(
            approved_at=item.approved_at,
            last_read_at=reads.get(item.id),
            last_confirmed_at=confirmations.get(item.id),
            now=now,
            days=days,
        ):
            entry = _queue(item, item_type, ReReviewReason.UNUSED, now=now, detail=f"{days} days")
            if entry:
                queued.append(entry)
        revoked, newest = states.get(item.tenant, (set(), {}))
        for finding in domain.document_findings(cited, revoked=revoked, newest_approved=newest):
            entry = _queue(
                item,
                item_type,
                finding.reason,
                now=now,
                document_id=finding.document_id,
                detail=finding.detail,
            )
            if entry:
                queued.append(entry)
    return queued


def _close_gone(now: datetime) -> list[ReReview]:
    """Entries whose item is no longer approved (caught here when it changed by other means)."""
    closed: list[ReReview] = []
    open_entries = ReReview.objects.filter(status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING])
    ids = set(open_entries.values_list("item_id", flat=True))
    statuses = dict(Case.objects.filter(pk__in=ids).values_list("pk", "status"))
    statuses.update(Skill.objects.filter(pk__in=ids).values_list("pk", "status"))
    for item_id in sorted(ids):
        status = statuses.get(item_id)
        if status == Status.APPROVED:
            continue
        resolution = {
            Status.SUPERSEDED: ReReviewResolution.SUPERSEDED,
            Status.REVOKED: ReReviewResolution.REVOKED,
        }.get(Status(status) if status else Status.REJECTED, ReReviewResolution.GONE)
        closed += _close_entries(item_id, resolution, now=now)
    return closed


# --- skill proposals ---------------------------------------------------------------------------


def _pattern_cases(cases: Iterable[Case]) -> list[domain.PatternCase]:
    cases = list(cases)
    documents: dict[str, set[str]] = {c.id: set() for c in cases}
    for case_id, source_id in Evidence.objects.filter(case__in=cases).values_list(
        "case_id", "source_id"
    ):
        documents[case_id] |= {key for key, _v in domain.cited_documents([source_id])}
    by_scope = merges_by_scope({(c.tenant, c.brand) for c in cases})
    return [
        domain.PatternCase(
            case_id=c.id,
            scope=tuple(sorted(c.scope.items())),
            incident=domain.canonical_incident(c.incident, by_scope.get((c.tenant, c.brand), {})),
            title=c.title,
            documents=frozenset(documents[c.id]),
            hypotheses=tuple(str(e.get("hypothesis", "")) for e in c.counterevidence or []),
        )
        for c in cases
    ]


def _covered_by_skill(scope: dict[str, str], case_ids: Sequence[str]) -> bool:
    """A candidate or approved skill of this scope already cites every supporting case."""
    skills = Skill.objects.filter(status__in=[Status.CANDIDATE, Status.APPROVED], **scope)
    for skill_id in skills.values_list("pk", flat=True):
        cited = set(SkillCase.objects.filter(skill_id=skill_id).values_list("case_id", flat=True))
        if set(case_ids) <= cited:
            return True
    return False


def _latest_titles(keys: set[str]) -> dict[str, str]:
    titles: dict[str, str] = {}
    for key, title in (
        Document.objects.filter(doc_key__in=keys, approved=True, revoked=False)
        .order_by("doc_key", "-version")
        .values_list("doc_key", "title")
    ):
        titles.setdefault(key, title)
    return titles


def _scan_proposals(now: datetime) -> list[SkillProposal]:
    cases = list(Case.objects.filter(status=Status.APPROVED, valid_from__lte=now, valid_to__gt=now))
    pattern_cases = _pattern_cases(cases)
    drafts = domain.shared_patterns(pattern_cases)
    titles = _latest_titles(
        {d.pattern.value for d in drafts if d.pattern.kind == domain.PATTERN_DOCUMENT}
    )
    by_id = {c.case_id: c for c in pattern_cases}
    proposals: list[SkillProposal] = []
    for draft in drafts:
        scope = dict(draft.scope)
        if _covered_by_skill(scope, draft.case_ids):
            continue
        existing = SkillProposal.objects.filter(
            **scope, pattern_kind=draft.pattern.kind, pattern=draft.pattern.value[:300]
        ).first()
        if existing is not None:
            if existing.status == ProposalStatus.OPEN and existing.case_ids != list(draft.case_ids):
                existing.case_ids = list(draft.case_ids)
                existing.incidents = list(draft.incidents)
                existing.updated_at = now
                existing.save(update_fields=["case_ids", "incidents", "updated_at"])
                proposals.append(existing)
            continue
        members = [by_id[i] for i in draft.case_ids]
        if draft.pattern.kind == domain.PATTERN_DOCUMENT:
            title = titles.get(draft.pattern.value, draft.pattern.value)
            query = domain.draft_query(draft.pattern, document_title=title)
            skill_title = f"核对知识文档「{title}」"
            when = f"同一范围内已有 {len(draft.incidents)} 个不同事件核对过知识文档 {draft.pattern.value}："
        else:
            written = domain.hypothesis_as_written(draft.pattern, members)
            query = domain.draft_query(draft.pattern, written=written)
            skill_title = f"排查并排除假设「{written}」"
            when = f"同一范围内已有 {len(draft.incidents)} 个不同事件排除过假设「{written}」："
        when += "；".join(sorted({m.title for m in members}))
        proposals.append(
            SkillProposal.objects.create(
                **scope,
                pattern_kind=draft.pattern.kind,
                pattern=draft.pattern.value[:300],
                case_ids=list(draft.case_ids),
                incidents=list(draft.incidents),
                title=skill_title[:300],
                when=when[:2000],
                recipe=domain.draft_recipe(query),
                created_at=now,
                updated_at=now,
            )
        )
    return proposals


def _backfill_signatures() -> list[NearDuplicate]:
    """Cases stored before curation was installed get their signature and links now."""
    linked: list[NearDuplicate] = []
    missing = Case.objects.filter(
        status__in=[Status.CANDIDATE, Status.APPROVED], signature__isnull=True
    ).order_by("submitted_at", "id")
    for case in missing:
        linked += case_link_similar(case=case)
    return linked


@transaction.atomic
def curation_scan(*, now: datetime | None = None, days: int | None = None) -> ScanReport:
    """Fill the queues: stale items into re-review, shared patterns into skill proposals."""
    now = now or clock.now()
    days = stale_after_days() if days is None else days
    report = ScanReport()
    report.linked = _backfill_signatures()
    report.closed = _close_gone(now)
    report.queued = _scan_staleness(now, days)
    report.proposals = _scan_proposals(now)
    if report.queued or report.closed or report.proposals or report.linked:
        event_record(
            actor=None,
            action=Action.CURATION_SCAN,
            target="curation:scan",
            details={
                "stale_after_days": days,
                "rereview": [e.pk for e in report.queued],
                "closed": [e.pk for e in report.closed],
                "proposals": [p.pk for p in report.proposals],
                "near_duplicates": [link.pk for link in report.linked],
            },
        )
    return report


def _recertified_content(case: Case, valid_from: datetime, valid_to: datetime) -> dict[str, Any]:
    content = dict(case.content)
    content.pop("supersedes", None)
    content["valid_from"] = to_utc_iso(valid_from)
    content["valid_to"] = to_utc_iso(valid_to)
    content["supersedes"] = case.id
    return content


@transaction.atomic
def rereview_recertify(
    *, entry: ReReview, valid_from: datetime, valid_to: datetime, actor: User
) -> Case:
    """Submit a new version of the case (same content, the validity given, ``supersedes`` the
    old one) as a candidate. Its evidence is unchecked, so a reviewer other than ``actor`` must
    check and approve it; that approval supersedes the old version and closes the entry."""
    _require(actor, ADD_CASE_PERMISSION, BUILD_REFUSED)
    entry = ReReview.objects.select_for_update().get(pk=entry.pk)
    if entry.status != ReReviewStatus.OPEN:
        raise ValidationFailure("entry", ENTRY_CLOSED)
    if entry.item_type != "case":
        raise ValidationFailure("entry", ENTRY_NOT_CASE)
    old = Case.objects.get(pk=entry.item_id)
    _require_tenant(actor, old.tenant)
    if old.status != Status.APPROVED:
        raise ValidationFailure("entry", ITEM_NOT_APPROVED)
    now = clock.now()
    if valid_to <= now:
        raise ValidationFailure("valid_to", VALID_TO_PASSED)
    content = parse_case(_recertified_content(old, valid_from, valid_to))
    new, _created = case_submit(content=content, actor=actor)
    # Every open question about the old version is answered by the review of the new one.
    for sibling in ReReview.objects.select_for_update().filter(
        item_id=old.id, status=ReReviewStatus.OPEN
    ):
        sibling.status = ReReviewStatus.PENDING
        sibling.new_item_id = new.id
        sibling.resolved_by = actor
        sibling.save(update_fields=["status", "new_item_id", "resolved_by"])
    event_record(
        actor=actor,
        action=Action.REREVIEW_RECERTIFY,
        target=old.id,
        details={"entry": entry.pk, "new_version": new.id, "at": to_utc_iso(now)},
    )
    return new


@transaction.atomic
def rereview_confirm(*, entry: ReReview, actor: User, reason: str) -> ReReview:
    """A reviewer confirms an approved skill still holds. Skills carry no conclusion and have
    no superseding versions; the cases they cite go through re-certification themselves."""
    _require(actor, REVIEW_PERMISSION, REVIEW_REFUSED)
    reason = _reason(reason)
    entry = ReReview.objects.select_for_update().get(pk=entry.pk)
    if entry.status != ReReviewStatus.OPEN:
        raise ValidationFailure("entry", ENTRY_CLOSED)
    if entry.item_type != "skill":
        raise ValidationFailure("entry", ENTRY_NOT_SKILL)
    skill = Skill.objects.get(pk=entry.item_id)
    _require_tenant(actor, skill.tenant)
    if skill.status != Status.APPROVED:
        raise ValidationFailure("entry", ITEM_NOT_APPROVED)
    entry.status = ReReviewStatus.CLOSED
    entry.resolution = ReReviewResolution.CONFIRMED
    entry.resolved_by = actor
    entry.resolved_at = clock.now()
    entry.note = reason
    entry.save(update_fields=["status", "resolution", "resolved_by", "resolved_at", "note"])
    event_record(
        actor=actor,
        action=Action.REREVIEW_CONFIRM,
        target=skill.id,
        reason=reason,
        details={"entry": entry.pk, "reason": entry.reason, "document": entry.document_id},
    )
    return entry


# --- skill proposals: decisions ------------------------------------------------------------------


def _proposal_validity(proposal: SkillProposal, now: datetime) -> tuple[datetime, datetime]:
    """From now until the first supporting case expires: the skill is unavailable after that."""
    first_end = (
        Case.objects.filter(pk__in=proposal.case_ids)
        .order_by("valid_to")
        .values_list("valid_to", flat=True)
        .first()
    )
    return now, first_end or now + timedelta(days=365)


@transaction.atomic
def proposal_adopt(
    *,
    proposal: SkillProposal,
    actor: User,
    title: str,
    when: str,
    queries: Sequence[str],
) -> Skill:
    """Turn a proposal into a candidate skill with ``actor`` as its submitter, so someone else
    must approve it (four eyes); the recipe is validated like any other."""
    _require(actor, ADD_SKILL_PERMISSION, ADOPT_REFUSED)
    proposal = SkillProposal.objects.select_for_update().get(pk=proposal.pk)
    _require_tenant(actor, proposal.tenant)
    if proposal.status != ProposalStatus.OPEN:
        raise ValidationFailure("proposal", PROPOSAL_CLOSED)
    now = clock.now()
    valid_from, valid_to = _proposal_validity(proposal, now)
    recipe = [{"tool": "search_knowledge", "arguments": {"query": q}} for q in queries if q.strip()]
    data = {
        "type": "skill",
        "scope": proposal.scope,
        "title": title,
        "when": when,
        "recipe": recipe,
        "cases": list(proposal.case_ids),
        "valid_from": to_utc_iso(valid_from),
        "valid_to": to_utc_iso(valid_to),
    }
    skill, _created = skill_submit(content=parse_skill(data, tool_specs()), actor=actor)
    proposal.status = ProposalStatus.ADOPTED
    proposal.skill_id = skill.id
    proposal.resolved_by = actor
    proposal.resolved_at = now
    proposal.save(update_fields=["status", "skill_id", "resolved_by", "resolved_at"])
    event_record(
        actor=actor,
        action=Action.PROPOSAL_ADOPT,
        target=skill.id,
        details={"proposal": proposal.pk, "pattern": [proposal.pattern_kind, proposal.pattern]},
    )
    return skill


@transaction.atomic
def proposal_dismiss(*, proposal: SkillProposal, actor: User, reason: str) -> SkillProposal:
    _require(actor, REVIEW_PERMISSION, REVIEW_REFUSED)
    reason = _reason(reason)
    proposal = SkillProposal.objects.select_for_update().get(pk=proposal.pk)
    _require_tenant(actor, proposal.tenant)
    if proposal.status != ProposalStatus.OPEN:
        raise ValidationFailure("proposal", PROPOSAL_CLOSED)
    proposal.status = ProposalStatus.DISMISSED
    proposal.resolved_by = actor
    proposal.resolved_at = clock.now()
    proposal.reason = reason
    proposal.save(update_fields=["status", "resolved_by", "resolved_at", "reason"])
    event_record(
        actor=actor,
        action=Action.PROPOSAL_DISMISS,
        target=f"proposal:{proposal.pk}",
        reason=reason,
        details={"pattern": [proposal.pattern_kind, proposal.pattern]},
    )
    return proposal
