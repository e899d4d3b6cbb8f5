"""The demo memory a shipped ticket set is replayed against, with its timeline.

The memory is what ``experience.demo`` loads (the demo knowledge base, two approved cases of
distinct incidents and one skill citing them), approved at the moment the four demo replays
(``experience_demo``) assume. Fifteen minutes later a reviewer revokes the first case, as the
last of those replays does, so tickets known after that meet a skill whose cited case is gone.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from evaluation.domain import DEMO, TicketSet
from evaluation.replay import MemoryEvent, event_note, replay_tickets, results_json
from evaluation.selectors import heldout_check
from experience.cases import selectors
from experience.demo import DEMO_SCOPE, load_demo_experience, load_demo_knowledge
from experience.review import revocation
from investigations.domain import Provider
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from reviewconsole.tenancy import tenant_ensure
from reviewconsole.timeparse import parse_aware_datetime
from semantic.packing import every_scope_packed

MEMORY_APPROVED_AT = parse_aware_datetime("2026-09-18T14:30:00+08:00", field="MEMORY_APPROVED_AT")
REVOKED_AT = parse_aware_datetime("2026-09-18T14:45:00+08:00", field="REVOKED_AT")
REVOCATION_REASON = "复核发现诊断证据不足：门店范围漏配的结论未与后台变更记录核对，撤销以停止复用"


def prepare_demo_memory() -> list[MemoryEvent]:
    """Load the demo memory into the current (temporary) database; return its timeline."""
    at = MEMORY_APPROVED_AT
    operator = user_set_role(username="demo-operator", role=Role.OPERATOR, now=at)
    reviewer = user_set_role(username="demo-reviewer", role=Role.REVIEWER, now=at)
    load_demo_knowledge(operator=operator, now=at)
    loaded = load_demo_experience(operator=operator, reviewer=reviewer, now=at)
    revoked_case = loaded["cases"][0]
    # What a deployment's worker does after the approvals: the vector branch's vectors (nothing
    # while it is off), so a replay compares the arms with the search its deployment runs.
    every_scope_packed()

    def revoke() -> None:
        revocation.case_revoke(
            case=selectors.case_get(revoked_case),
            actor=reviewer,
            reason=REVOCATION_REASON,
            now=REVOKED_AT,
        )

    return [
        MemoryEvent(
            at=REVOKED_AT,
            description="a reviewer revokes the store-list case; the skill citing it is "
            "unavailable from here on",
            apply=revoke,
        )
    ]


def memory_notes(ticket_set: TicketSet) -> list[str]:
    demo_tenant = DEMO_SCOPE["tenant"]
    notes = [
        f"demo memory (fixtures/knowledge.json, fixtures/experience.json) of tenant "
        f"{demo_tenant} approved at {MEMORY_APPROVED_AT.isoformat()}",
    ]
    others = sorted({t.scope["tenant"] for t in ticket_set.tickets} - {demo_tenant})
    if others:
        notes.append(
            f"tickets of tenant {', '.join(others)} meet none of the demo memory (tenant "
            f"{demo_tenant}): memory never crosses tenants"
        )
    return notes


def register_set_tenants(ticket_set: TicketSet) -> None:
    """The set's tenants in the temporary database, as the deployment that runs the replay has
    them (``require_known_tenants`` checked there), so its tickets can be searched for."""
    for tenant in sorted({t.scope["tenant"] for t in ticket_set.tickets}):
        tenant_ensure(name=tenant, actor=None, now=MEMORY_APPROVED_AT)


def replay_demo_here(
    ticket_set: TicketSet, *, provider: Provider | None = None, compare_branches: bool = False
) -> dict[str, Any]:
    """Load the demo memory into this (temporary) database and replay against it."""
    with transaction.atomic():
        timeline = prepare_demo_memory()
        register_set_tenants(ticket_set)
        heldout_check(ticket_set)
        results = replay_tickets(
            ticket_set,
            timeline=timeline,
            provider=provider,
            compare_branches=compare_branches,
        )
        transaction.set_rollback(True)
    notes = memory_notes(ticket_set) + [event_note(event) for event in timeline]
    return results_json(ticket_set, results, memory=DEMO, memory_notes=notes)
