"""Incidents: cases that may describe one incident are linked, and a reviewer merges or parts them.

Linking happens without a person asking, when a case is stored (``curation.subscribers`` queues
``case_index_task`` on the event the submission publishes); it records no event of its own, the
submission that caused it is the audited act.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction

from curation.checks import REVIEW_REFUSED, reason_given
from curation.domain import similarity as similarity_rules
from curation.domain.incidents import canonical_incident, merge_plan
from curation.domain.similarity import (
    DEFAULT_SIMILARITY_THRESHOLD,
    band_keys,
    lsh_shape,
    shingles,
    signature,
    similarity_text,
)
from curation.models import CaseBand, CaseSignature, IncidentMerge, LinkStatus, NearDuplicate
from curation.selectors.incidents import incident_merges
from curation.selectors.similarity import scope_key
from experience.cases.models import Case
from experience.core.models import ItemType, Status
from experience.index.lesson_inputs import incidents_merged
from experience.index.postings import KINDS
from experience.index.vectors import meaning_prepared, same_experience_approved
from experience.lessons.models import Lesson
from experience.lessons.services import lesson_merge_propose
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import REVIEW_CASE, require

if TYPE_CHECKING:
    from django.contrib.auth.models import User

LINK_RESOLVED = "this link was already resolved"
LINK_ACROSS_TENANTS = "links cases of two tenants; incidents are only compared within one tenant"
LINK_OUTSIDE_MERGE = "links cases outside this tenant and brand"
DECISION_UNKNOWN = 'must be "same_incident" or "different"'
CANONICAL_NOT_IN_PAIR = "must be the incident of one of the two cases"

SAME_INCIDENT = "same_incident"
DIFFERENT = "different"
# Candidates come from LSH band buckets (cases of one scope sharing a band key). A bucket keeps at
# most NEAR_DUPLICATE_BUCKET live members (candidate or approved cases): the first cases of a
# cluster stand for it, and a later case joins only the buckets that still have room. A new case
# is then compared with at most NEAR_DUPLICATE_PEERS members of its buckets (those sharing the
# most band keys with it first) and linked to at most NEAR_DUPLICATE_LINKS of them, the most
# similar. Each new case costs a bounded amount of reads and rows however large its cluster grows,
# so a bulk import of near-identical cases stays linear, and a reviewer still reaches the whole
# cluster through the links to its representatives.
NEAR_DUPLICATE_BUCKET = 16
NEAR_DUPLICATE_PEERS = 64
NEAR_DUPLICATE_LINKS = 8
LINKABLE = (Status.CANDIDATE, Status.APPROVED)


def similarity_threshold() -> float:
    return float(getattr(settings, "CURATION_SIMILARITY_THRESHOLD", DEFAULT_SIMILARITY_THRESHOLD))


def _case_shingles(case: Case) -> frozenset[str]:
    return shingles(
        similarity_text(
            case.title,
            case.summary,
            (str(item.get("excerpt", "")) for item in case.observations or []),
            str((case.diagnosis or {}).get("statement", "")),
        )
    )


def case_link_similar(*, case: Case, now: datetime | None = None) -> list[NearDuplicate]:
    """Index the case and link it to similar candidate or approved cases of the same scope (not
    to the version it supersedes or that supersedes it, nor to cases of its own incident)."""
    own = _case_shingles(case)
    if not own:
        return []
    values = signature(own)
    threshold = similarity_threshold()
    bands, rows = lsh_shape(threshold)
    key = scope_key(case.scope)
    keys = band_keys(values, bands=bands, rows=rows)
    CaseSignature.objects.update_or_create(
        case=case, defaults={"scope_key": key, "values": list(values), "threshold": threshold}
    )
    CaseBand.objects.filter(case=case).delete()
    members = CaseBand.objects.filter(
        scope_key=key, key__in=keys, case__status__in=LINKABLE
    ).exclude(case=case)
    shared: Counter[str] = Counter()
    filled: Counter[str] = Counter()
    for band, member in members.values_list("key", "case_id"):
        shared[member] += 1
        filled[band] += 1
    CaseBand.objects.bulk_create(
        CaseBand(case=case, scope_key=key, key=k) for k in keys if filled[k] < NEAR_DUPLICATE_BUCKET
    )
    nearest = sorted(shared, key=lambda member: (-shared[member], member))
    # By primary key only: a scope filter here would lead the database to scan the whole scope.
    candidates = [
        peer
        for peer in Case.objects.filter(pk__in=nearest[:NEAR_DUPLICATE_PEERS]).order_by("id")
        if peer.status in LINKABLE and peer.scope == case.scope
    ]
    merges = incident_merges(case.tenant, case.brand)
    own_incident = canonical_incident(case.incident, merges)
    now = now or clock.now()
    similar = []
    for peer in candidates:
        if case.supersedes == peer.id or peer.supersedes == case.id:
            continue
        if canonical_incident(peer.incident, merges) == own_incident:
            continue
        measured = similarity_rules.similarity(own, _case_shingles(peer))
        if measured < threshold:
            continue
        similar.append((measured, peer))
    similar.sort(key=lambda pair: (-pair[0], pair[1].id))
    chosen = similar[:NEAR_DUPLICATE_LINKS]
    # Approved cases of the exact scope that say the same in other words (the semantic index).
    close = [
        (measured, peer)
        for measured, peer in _similar_in_meaning(case)
        if peer.id not in {p.id for _, p in chosen}
        and case.supersedes != peer.id
        and peer.supersedes != case.id
        and canonical_incident(peer.incident, merges) != own_incident
    ][:NEAR_DUPLICATE_LINKS]
    ids = [case.id, *(peer.id for _, peer in chosen), *(peer.id for _, peer in close)]
    existing = {
        (link.case_a_id, link.case_b_id): link
        for link in NearDuplicate.objects.filter(case_a_id__in=ids, case_b_id__in=ids)
    }
    links = []
    for found_by, pairs in (("words", chosen), ("meaning", close)):
        for measured, peer in pairs:
            first, second = sorted([case, peer], key=lambda c: c.id)
            link = existing.get((first.id, second.id)) or NearDuplicate(
                case_a=first,
                case_b=second,
                similarity=measured,
                found_by=found_by,
                detected_at=now,
            )
            existing[(first.id, second.id)] = link
            links.append(link)
    NearDuplicate.objects.bulk_create([link for link in links if link.pk is None])
    return links


def _similar_in_meaning(case: Case) -> list[tuple[float, Case]]:
    """Approved cases of the case's exact scope that tell the same experience by the merge rule
    (``experience.index.vectors.same_experience_approved``), the most significant first, each
    with its cosine."""
    near = [
        (item, similarity)
        for item, similarity in same_experience_approved(
            ItemType.CASE, case.scope, KINDS[ItemType.CASE].text(case)
        )
        if item != case.id
    ]
    peers = Case.objects.in_bulk([item for item, _ in near])
    return [(similarity, peers[item]) for item, similarity in near if item in peers]


def case_meaning_prepared(case: Case) -> None:
    """Embed ``case``'s text before ``case_link_similar`` runs in a write transaction, which
    then compares it in meaning without running the model while it holds the lock."""
    meaning_prepared(KINDS[ItemType.CASE].text(case))


def lesson_meaning_prepared(lesson: Lesson) -> None:
    """Embed ``lesson``'s text before ``lesson_merges_by_meaning`` runs in a write transaction."""
    meaning_prepared(KINDS[ItemType.LESSON].text(lesson))


def lesson_merges_by_meaning(lesson: Lesson) -> list[str]:
    """Propose merging a candidate lesson into each approved lesson of its exact scope and type
    that tells the same experience by the merge rule (``semantic.duplicates``), the most
    significant first; the ids proposed. Nothing is merged: the candidate's page offers the
    merge beside those found in words, and a reviewer decides (``merge_accept`` keeps every
    supporting case and outcome)."""
    if lesson.status != Status.CANDIDATE:
        return []
    near = [
        (item, similarity)
        for item, similarity in same_experience_approved(
            ItemType.LESSON, lesson.scope, KINDS[ItemType.LESSON].text(lesson)
        )
        if item != lesson.id
    ]
    return [
        item
        for item, similarity in near
        if lesson_merge_propose(candidate=lesson, target_id=item, similarity=similarity)
    ]


def _resolve_links_within_incidents(tenant: str, brand: str, *, actor: User, now: datetime) -> int:
    """Open links whose two cases now resolve to one incident are closed as the same incident."""
    merges = incident_merges(tenant, brand)
    closed = 0
    for link in NearDuplicate.objects.filter(
        status=LinkStatus.OPEN, case_a__tenant=tenant, case_a__brand=brand
    ).select_related("case_a", "case_b"):
        if canonical_incident(link.case_a.incident, merges) == canonical_incident(
            link.case_b.incident, merges
        ):
            link.status = LinkStatus.SAME_INCIDENT
            link.resolved_by = actor
            link.resolved_at = now
            link.reason = link.reason or "the incidents were merged"
            link.save(update_fields=["status", "resolved_by", "resolved_at", "reason"])
            closed += 1
    return closed


def incident_merge_require(*, actor: User, tenant: str | None = None) -> None:
    """Who may record a merge: a reviewer (of ``tenant``, once it is known). ``incident_merge``
    checks it in its transaction; the incident page asks it before reading a posted form, so a
    user who may not merge is answered 403 whatever the form holds."""
    require(actor, REVIEW_CASE, tenant, message=REVIEW_REFUSED)


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
    now: datetime | None = None,
) -> IncidentMerge:
    """Record that incident ``alias`` is incident ``into``; every distinct-incident count of the
    tenant and brand follows at once (skill approval, confidence, proposals)."""
    incident_merge_require(actor=actor, tenant=tenant)
    reason = reason_given(reason)
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
    alias_root, into_root = merge_plan(alias, into, merges)
    now = now or clock.now()
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
    moved_aliases = list(
        IncidentMerge.objects.filter(tenant=tenant, brand=brand, canonical=alias_root).values_list(
            "alias", flat=True
        )
    )
    moved = IncidentMerge.objects.filter(tenant=tenant, brand=brand, canonical=alias_root).update(
        canonical=into_root
    )
    # Lessons keep their cited cases' canonical incidents on their index entries.
    incidents_merged(tenant, brand, {alias_root, *moved_aliases})
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
        at=now,
    )
    return merge


@transaction.atomic
def near_duplicate_resolve(
    *,
    link: NearDuplicate,
    decision: str,
    actor: User,
    reason: str,
    canonical: str = "",
    now: datetime | None = None,
) -> NearDuplicate:
    """A reviewer's answer to "possibly the same incident": merge the incidents, or record that
    they differ so the pair leaves the queue."""
    require(actor, REVIEW_CASE, message=REVIEW_REFUSED)
    reason = reason_given(reason)
    now = now or clock.now()
    link = (
        NearDuplicate.objects.select_for_update().select_related("case_a", "case_b").get(pk=link.pk)
    )
    # Both sides are the actor's tenant: links are only made within one scope, and a link
    # across tenants (a row stored before that rule) never merges one tenant's incident into
    # another's nor records a decision about another tenant's case.
    require(actor, REVIEW_CASE, link.case_a.tenant, message=REVIEW_REFUSED)
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
            now=now,
        )
        link.refresh_from_db()
        link.reason = reason
        link.save(update_fields=["reason"])
    elif decision == DIFFERENT:
        link.status = LinkStatus.DIFFERENT
        link.resolved_by = actor
        link.resolved_at = now
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
        at=now,
    )
    return link
