"""Reads of incident identity: the merges of a tenant and brand, a case's canonical incident in
Python and in SQL, and incidents counted among cases."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from curation.domain.incidents import MERGE_SCOPE, canonical_incident
from curation.models import IncidentMerge
from experience.cases.models import Case
from reviewconsole.tenancy import visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    Viewer = User | AnonymousUser | None


# --- incidents ---------------------------------------------------------------------------------


def incident_merges(tenant: str, brand: str) -> dict[str, str]:
    """alias → canonical incident for one tenant and brand."""
    return dict(
        IncidentMerge.objects.filter(tenant=tenant, brand=brand).values_list("alias", "canonical")
    )


# The canonical incident of a case (``curation.domain``, "Incident identity") in its two forms,
# both keyed by ``MERGE_SCOPE``: in Python from the merges read by scope
# (:func:`case_incident`), and in SQL inside the query that loads the case
# (:func:`canonical_incident_expression`, installed into experience at start-up).

MergesByScope = Mapping[tuple[str, ...], Mapping[str, str]]


def merge_scope_of(case: Case) -> tuple[str, ...]:
    return tuple(getattr(case, name) for name in MERGE_SCOPE)


def merges_by_scope(pairs: Iterable[tuple[str, ...]]) -> dict[tuple[str, ...], dict[str, str]]:
    pairs = set(pairs)
    if not pairs:
        return {}
    condition = Q()
    for pair in pairs:
        condition |= Q(**dict(zip(MERGE_SCOPE, pair, strict=True)))
    found: dict[tuple[str, ...], dict[str, str]] = defaultdict(dict)
    for *scope, alias, canonical in IncidentMerge.objects.filter(condition).values_list(
        *MERGE_SCOPE, "alias", "canonical"
    ):
        found[tuple(scope)][alias] = canonical
    return dict(found)


def case_incident(case: Case, by_scope: MergesByScope) -> str:
    """The canonical incident of ``case`` given the merges of its scope."""
    return canonical_incident(case.incident, by_scope.get(merge_scope_of(case), {}))


def canonical_incident_expression(prefix: str = "") -> Coalesce:
    """The canonical incident of the case row at ``prefix``, computed inside the same query: the
    merge of its incident, else the incident itself. One lookup is the end of the chain because
    ``incident_merge`` stores every merge resolved to its root."""
    path = f"{prefix}__" if prefix else ""
    merged = IncidentMerge.objects.filter(
        **{name: OuterRef(f"{path}{name}") for name in MERGE_SCOPE},
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
    root = canonical_incident(case.incident, merges)
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
