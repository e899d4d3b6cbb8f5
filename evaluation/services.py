"""Writes of the evaluation: held-out registration, stored reports, and the approval guard.

Held-out tickets never feed memory. A ticket set is refused when one of its tickets already
reached approved memory (``selectors.heldout_leaks``); once registered, a case whose evidence
cites one of its tickets or runs cannot be approved (``cites_heldout_ticket``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction

from evaluation.domain import WITH, WITHOUT, TicketSet
from evaluation.models import HeldoutRun, HeldoutTicket, ReplayReport
from evaluation.selectors import heldout_check, heldout_cited_by
from experience.cases.models import Case
from experience.core import domain as experience_domain
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RUN_OF_OTHER_TICKET = "is registered as a run of another held-out ticket"


@transaction.atomic
def heldout_register(
    *, ticket_set: TicketSet, actor: User | None, now: datetime | None = None
) -> list[str]:
    """Register the set's tickets and runs as held out; return the ticket ids new to the register.

    Refused (and nothing written) when a ticket already reached approved memory. Registering a
    ticket again is a no-op; a run id already registered for another ticket is refused.
    """
    heldout_check(ticket_set)
    existing = {
        row.ticket_id: row
        for row in HeldoutTicket.objects.filter(ticket_id__in=ticket_set.ticket_ids)
    }
    owners = dict(
        HeldoutRun.objects.filter(run_id__in=ticket_set.run_ids).values_list(
            "run_id", "ticket__ticket_id"
        )
    )
    now = now or clock.now()
    created: list[str] = []
    for i, ticket in enumerate(ticket_set.tickets):
        row = existing.get(ticket.id)
        if row is None:
            row = HeldoutTicket.objects.create(
                ticket_id=ticket.id,
                ticket_set=ticket_set.name,
                tenant=ticket.scope["tenant"],
                registered_at=now,
                registered_by=actor if actor is not None and actor.is_authenticated else None,
            )
            created.append(ticket.id)
        for j, run_id in enumerate(ticket.run_ids):
            owner = owners.get(run_id)
            if owner is None:
                HeldoutRun.objects.create(run_id=run_id, ticket=row)
            elif owner != ticket.id:
                raise ValidationFailure(
                    f"tickets[{i}].run_ids[{j}]", f"{RUN_OF_OTHER_TICKET} ({owner})"
                )
    if created:
        event_record(
            actor=actor,
            action=Action.HELDOUT_REGISTER,
            target=ticket_set.name,
            details={"set_hash": ticket_set.content_hash, "tickets": created},
            at=now,
        )
    return created


@transaction.atomic
def report_store(
    *,
    ticket_set: TicketSet,
    memory: str,
    result: dict[str, Any],
    chart: bytes,
    actor: User | None,
    now: datetime | None = None,
) -> ReplayReport:
    """Keep a replay's report; its tickets are held out from here on."""
    now = now or clock.now()
    heldout_register(ticket_set=ticket_set, actor=actor, now=now)
    report = ReplayReport.objects.create(
        created_at=now,
        created_by=actor if actor is not None and actor.is_authenticated else None,
        ticket_set=ticket_set.name,
        tenant=ticket_set.tenant,
        set_hash=ticket_set.content_hash,
        memory=memory,
        tickets=len(ticket_set.tickets),
        with_memory=result["totals"][WITH],
        without_memory=result["totals"][WITHOUT],
        result=result,
        chart=chart,
    )
    event_record(
        actor=actor,
        action=Action.EVALUATION_REPLAY,
        target=f"replay:{report.pk}",
        details={
            "set": ticket_set.name,
            "set_hash": ticket_set.content_hash,
            "memory": memory,
            "tickets": report.tickets,
            WITH: report.with_memory,
            WITHOUT: report.without_memory,
        },
        at=now,
    )
    return report


def _source_ids(case: Case) -> Iterable[str]:
    for item in case.observations or []:
        yield str(item.get("source_id", ""))
    for section in (case.diagnosis, case.outcome):
        for item in (section or {}).get("evidence") or []:
            yield str(item.get("source_id", ""))
    for entry in case.counterevidence or []:
        for item in entry.get("evidence") or []:
            yield str(item.get("source_id", ""))


def heldout_approval_guard(case: Case) -> list[str]:
    """Approval guard: a case citing a held-out ticket (or one of its runs) is not approvable."""
    return [experience_domain.CITES_HELDOUT_TICKET] if heldout_cited_by(_source_ids(case)) else []
