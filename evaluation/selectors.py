"""Reads for the evaluation: where a ticket set leaks into memory, held-out citations, reports."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet

from evaluation.domain import CITATION_SEPARATORS, TicketSet, citation_targets, cites
from evaluation.models import HeldoutTicket, ReplayReport
from experience.cases.models import Case, Evidence, Skill
from experience.core.models import ItemType, Status
from experience.runs.models import Reference, RunOwner
from knowledge.models import Document, DocumentKind
from reviewconsole.tenancy import require_known_tenant, visible

# Citation targets per query: each becomes a few OR-ed conditions, and SQLite parses a chain of
# ORs as a tree as deep as the chain is long.
TARGETS_PER_QUERY = 50

REFERENCED = "referenced_approved_memory"
CITED_BY_CASE = "cited_by_approved_case"
CITED_BY_DOCUMENT = "cited_by_knowledge_case"


@dataclass(frozen=True)
class Leak:
    """One way a held-out ticket already reached memory that retrieval can return."""

    ticket_id: str
    field: str
    reason: str
    via: str
    item_id: str

    def as_json(self) -> dict[str, str]:
        return {
            "ticket": self.ticket_id,
            "field": self.field,
            "reason": self.reason,
            "via": self.via,
            "item": self.item_id,
        }


def require_known_tenants(ticket_set: TicketSet) -> None:
    """Every ticket's tenant is a tenant of this deployment; else refused naming the first one's
    field, before anything is replayed or written."""
    seen: set[str] = set()
    for i, ticket in enumerate(ticket_set.tickets):
        tenant = ticket.scope["tenant"]
        if tenant not in seen:
            require_known_tenant(tenant, field=f"tickets[{i}].scope.tenant")
            seen.add(tenant)


LEAKED = "already reached approved memory, so it cannot be held out"


class HeldoutLeaked(Exception):
    """The set's tickets already fed memory; nothing was written."""

    def __init__(self, leaks: list[Leak]) -> None:
        first = leaks[0]
        super().__init__(
            f"{first.field}: {first.ticket_id} {LEAKED} ({first.reason}: {first.item_id})"
        )
        self.leaks = leaks

    @property
    def field(self) -> str:
        return self.leaks[0].field

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": False,
            "error": str(self),
            "field": self.field,
            "leaks": [leak.as_json() for leak in self.leaks],
        }


def heldout_check(ticket_set: TicketSet) -> None:
    leaks = heldout_leaks(ticket_set)
    if leaks:
        raise HeldoutLeaked(leaks)


def _approved_case_ids() -> QuerySet[Case, Any]:
    return Case.objects.filter(status=Status.APPROVED).values("id")


def _approved_skill_ids() -> QuerySet[Skill, Any]:
    return Skill.objects.filter(status=Status.APPROVED).values("id")


def _batches(values: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(values), TARGETS_PER_QUERY):
        yield values[start : start + TARGETS_PER_QUERY]


def _citing(column: str, targets: Iterable[str]) -> Q:
    condition = Q()
    for target in targets:
        condition |= Q(**{column: target})
        for separator in CITATION_SEPARATORS:
            condition |= Q(**{f"{column}__startswith": target + separator})
    return condition


def heldout_leaks(ticket_set: TicketSet) -> list[Leak]:
    """Where the set's tickets already reached memory that retrieval can return.

    Three ways, each read from current state (what is approved now is what a replay meets):
    a run of the ticket read an approved case or skill (its References); an approved case's
    evidence cites the ticket or one of its runs as ``source_id``; an approved, unrevoked
    knowledge document of kind ``case`` has the ticket or a run as its ``source``.
    """
    paths: dict[str, tuple[str, str]] = {}
    for i, ticket in enumerate(ticket_set.tickets):
        paths[ticket.id] = (ticket.id, f"tickets[{i}].id")
        for j, run_id in enumerate(ticket.run_ids):
            paths.setdefault(run_id, (ticket.id, f"tickets[{i}].run_ids[{j}]"))
    run_ids = list(ticket_set.run_ids)
    targets = sorted(paths)

    leaks: list[Leak] = []
    for batch in _batches(run_ids):
        # A run id of the set names every run opened under it, in any tenant, by any account
        # (each is stored under an id of its own: experience.runs.claims).
        names = {run_id: run_id for run_id in batch}
        names |= dict(RunOwner.objects.filter(name__in=batch).values_list("run_id", "name"))
        references = (
            Reference.objects.filter(run_id__in=list(names))
            .filter(
                Q(item_type=ItemType.CASE, item_id__in=_approved_case_ids())
                | Q(item_type=ItemType.SKILL, item_id__in=_approved_skill_ids())
            )
            .values_list("run_id", "item_id")
            .distinct()
        )
        leaks += [
            Leak(*paths[names[run]], REFERENCED, names[run], item) for run, item in references
        ]
    for batch in _batches(targets):
        evidence = (
            Evidence.objects.filter(case__status=Status.APPROVED)
            .filter(_citing("source_id", batch))
            .values_list("source_id", "case_id")
            .distinct()
        )
        leaks += [
            Leak(*paths[target], CITED_BY_CASE, source, case_id)
            for source, case_id in evidence
            for target in batch
            if cites(source, target)
        ]
        documents = (
            Document.objects.filter(kind=DocumentKind.CASE, approved=True, revoked=False)
            .filter(_citing("source", batch))
            .only("doc_key", "version", "source")
        )
        leaks += [
            Leak(*paths[target], CITED_BY_DOCUMENT, document.source, document.public_id)
            for document in documents
            for target in batch
            if cites(document.source, target)
        ]
    order = {field: n for n, (_ticket, field) in enumerate(paths.values())}
    return sorted(
        set(leaks), key=lambda leak: (order[leak.field], leak.reason, leak.item_id, leak.via)
    )


def heldout_cited_by(source_ids: Iterable[str]) -> list[str]:
    """The held-out tickets that these source ids cite, directly or through one of their runs."""
    targets: set[str] = set()
    for source_id in source_ids:
        targets |= citation_targets(source_id)
    if not targets:
        return []
    return sorted(
        HeldoutTicket.objects.filter(Q(ticket_id__in=targets) | Q(runs__run_id__in=targets))
        .values_list("ticket_id", flat=True)
        .distinct()
    )


def heldout_count(user: User | AnonymousUser | None) -> int:
    """Held-out tickets of the tenants ``user`` sees."""
    return visible(HeldoutTicket.objects.all(), user).count()


def reports_visible(user: User | AnonymousUser | None) -> QuerySet[ReplayReport]:
    """The reports of the tenants ``user`` sees; a report whose tickets span tenants (no tenant)
    is for deployment-wide users only."""
    return visible(ReplayReport.objects.all(), user)


def reports_recent(user: User | AnonymousUser | None) -> QuerySet[ReplayReport]:
    """Stored reports, newest first, without the blobs a listing does not show."""
    return reports_visible(user).select_related("created_by").defer("result", "chart")


def report_get(pk: int, user: User | AnonymousUser | None) -> ReplayReport | None:
    """The report, or None for an unknown id and for another tenant's report alike."""
    return reports_visible(user).select_related("created_by").defer("chart").filter(pk=pk).first()


def report_chart(pk: int, user: User | AnonymousUser | None) -> bytes | None:
    chart: Any = reports_visible(user).filter(pk=pk).values_list("chart", flat=True).first()
    return bytes(chart) if chart is not None else None
