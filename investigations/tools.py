"""The tools an investigation offers, and their handlers bound to one ticket.

Each handler closes over the ticket's scope, times, run id and the acting user; the model's
arguments are only the tool's own (``query``, ``skill_id``). ``search_knowledge`` runs through
the skill tool registry (``experience.cases.tools``), the same handler a recipe step calls; the
memory tools are the services an agent calls, with the actor's permissions. Every document a
search returns is recorded as read under the run id, so revoking it reaches this run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from django.db import transaction

from experience.cases.executor import run_skill
from experience.cases.tools import SEARCH_KNOWLEDGE, CallContext, default_registry
from experience.core.models import ItemType
from experience.retrieval.service import retrieve_experience
from experience.runs.claims import run_claim
from experience.runs.records import references_record
from investigations.declarations import (
    MEMORY_DECLARATIONS,
    RETRIEVE_EXPERIENCE,
    RUN_SKILL,
    SEARCH_DECLARATION,
)
from investigations.domain import Handler, Ticket, ToolDeclaration
from reviewconsole import clock
from reviewconsole.permissions import USE_EXPERIENCE, holds

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def declarations(actor: User) -> list[ToolDeclaration]:
    """The tools declared for a run by ``actor``: memory tools only for who may use memory."""
    tools = [SEARCH_DECLARATION]
    if holds(actor, USE_EXPERIENCE):
        tools += MEMORY_DECLARATIONS
    return tools


def bind(
    ticket: Ticket,
    *,
    run_id: str,
    actor: User,
    moment: Callable[[], datetime] | None = None,
    at: datetime | None = None,
    provider: object | None = None,
    now: datetime | None = None,
) -> dict[str, Handler]:
    """The handlers of one run, with the ticket's scope and times bound in; ``moment`` is the
    run's clock (each call records its reads at one reading of it), ``at`` the moment a caller
    pinned the run at. ``provider`` is the run's model, which a prompt-form skill it runs uses
    too; ``now`` the instant memory is read as of (default: the time of knowledge)."""
    moment = moment or (lambda: clock.now())
    scope = {name: str(value or "") for name, value in ticket.scope.items()}
    context = ticket.context
    search = default_registry()[SEARCH_KNOWLEDGE].handler
    call_context = CallContext(
        scope=scope,
        occurred_at=context.occurred_at,
        known_at=context.known_at,
        facts=dict(context.facts),
        actor=actor,
    )
    # Memory is read as of the time of knowledge, as the replay reads it.
    now = now or context.known_at or moment()

    def search_knowledge(arguments: Mapping[str, str]) -> Mapping[str, Any]:
        result = search({"query": arguments["query"]}, call_context)
        documents = [str(item["id"]) for item in result.get("evidence") or [] if item.get("id")]
        if documents:
            read_at = moment()
            with transaction.atomic():
                claim = run_claim(run_id=run_id, actor=actor, tenant=scope["tenant"], at=read_at)
                references_record(
                    run_id=claim.run_id,
                    items=[(doc, ItemType.DOCUMENT) for doc in dict.fromkeys(documents)],
                    at=read_at,
                )
        return result

    def retrieve(arguments: Mapping[str, str]) -> Mapping[str, Any]:
        return retrieve_experience(arguments["query"], scope, now, run_id, actor=actor)

    def skill(arguments: Mapping[str, str]) -> Mapping[str, Any]:
        inputs = cast("Mapping[str, object] | None", arguments.get("inputs"))
        return run_skill(
            arguments["skill_id"],
            scope,
            context,
            run_id,
            now,
            actor=actor,
            at=at,
            inputs=inputs,
            provider_instance=provider,
        ).as_json()

    return {SEARCH_KNOWLEDGE: search_knowledge, RETRIEVE_EXPERIENCE: retrieve, RUN_SKILL: skill}
