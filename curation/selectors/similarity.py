"""Reads of similarity: a case's near-duplicate links, the queue of open pairs, and a pair side
by side."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import Q, QuerySet

from curation.domain.incidents import canonical_incident
from curation.domain.similarity import ComparedRow, compare_cases
from curation.models import LinkStatus, NearDuplicate
from curation.selectors.incidents import incident_merges
from experience.cases.models import Case
from experience.core.models import Status
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.tenancy import may_access, visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    Viewer = User | AnonymousUser | None


def scope_key(scope: Mapping[str, str]) -> str:
    joined = "\x1f".join(scope[name] for name in SCOPE_FIELDS)
    return hashlib.sha256(joined.encode()).hexdigest()


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
    own = canonical_incident(case.incident, merges)
    found = [
        SimilarCase(
            link=link,
            other=link.other(case.id),
            incident=own,
            other_incident=canonical_incident(link.other(case.id).incident, merges),
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
    rows: list[ComparedRow]


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
    rows = compare_cases(_compared_content(left), _compared_content(right))
    return Comparison(link, left, right, rows)
