"""Investigating a ticket: check the caller, run the ticket, store the run with its audit event."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django_tasks import task

from experience.cases.schema import TicketContext
from experience.retrieval.block import experience_context
from experience.retrieval.request import MAX_QUERY
from experience.runs.claims import run_claim, run_name
from investigations import domain
from investigations.domain import Budget, Provider, Ticket, run_ticket
from investigations.events import InvestigationStored
from investigations.models import Investigation, InvestigationRequest, RequestState
from investigations.providers import (
    provider_checked,
    provider_for,
)
from investigations.selectors import unusable_items
from investigations.tools import bind, declarations
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.background import retrying
from reviewconsole.dispatch import dispatch
from reviewconsole.errors import AlreadyTaken, PermissionRefused, ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import (
    SEARCH_KNOWLEDGE,
    USE_EXPERIENCE,
    holds,
    require_scope,
)
from reviewconsole.reasons import reason_clipped
from reviewconsole.runids import validate_run_id
from reviewconsole.scopes import SCOPE_FIELDS, validate_scope_value
from reviewconsole.timeparse import aware_required

if TYPE_CHECKING:
    from django.contrib.auth.models import User

INVESTIGATE_PERMISSION = SEARCH_KNOWLEDGE
MAX_TEXT = 2_000
MAX_SCOPE = 64
MAX_FACTS = 32
RUN_ID_TAKEN = "already names an investigation; choose another run id"
TEXT_REQUIRED = f"must be a non-empty string of at most {MAX_TEXT} characters"
MAX_CALLS_RANGE = f"must be an integer from 1 to {domain.MAX_CALLS_LIMIT}"
FACT_VALUE = "must be a string, an integer or a boolean"

# The stored run id of the investigation this thread is running: skill runs stored under it are
# steps of the investigation, whose own after-action review covers them.
_RUNNING: ContextVar[str | None] = ContextVar("investigation_running", default=None)


def investigation_running(run_id: str) -> bool:
    """True while ``run_id`` is the stored id of the investigation being run here (its steps are
    storing)."""
    return _RUNNING.get() == run_id


def _clean_scope(scope: Mapping[str, object]) -> dict[str, str | None]:
    """The five fields, each exact (no placeholders) or absent; absent ones end the run early."""
    if not isinstance(scope, Mapping):
        raise ValidationFailure("scope", "must be an object with the five scope fields")
    unknown = sorted(set(scope) - set(SCOPE_FIELDS))
    if unknown:
        raise ValidationFailure(f"scope.{unknown[0]}", "is not a scope field")
    cleaned: dict[str, str | None] = {}
    for name in SCOPE_FIELDS:
        value = scope.get(name)
        given = value is not None and not (isinstance(value, str) and not value.strip())
        cleaned[name] = validate_scope_value(value, field=f"scope.{name}") if given else None
    return cleaned


def _clean_facts(facts: Mapping[str, object] | None) -> dict[str, object]:
    facts = facts or {}
    if not isinstance(facts, Mapping) or len(facts) > MAX_FACTS:
        raise ValidationFailure("facts", f"must be an object of at most {MAX_FACTS} facts")
    for name, value in facts.items():
        if not isinstance(name, str) or not name or len(name) > MAX_SCOPE:
            raise ValidationFailure("facts", "fact names must be short strings")
        if value is not None and not isinstance(value, str | int | bool):
            raise ValidationFailure(f"facts.{name}", FACT_VALUE)
    return {name: value for name, value in facts.items() if value is not None and value != ""}


def _clean_time(value: datetime | None, field: str) -> datetime | None:
    return None if value is None else aware_required(value, field=field)


def _ticket(
    *,
    actor: User,
    text: str,
    scope: Mapping[str, object],
    occurred_at: datetime | None,
    known_at: datetime | None,
    facts: Mapping[str, object] | None,
) -> Ticket:
    """The checked ticket; refuses (naming the field) before anything is read."""
    cleaned_scope = _clean_scope(scope)
    require_scope(actor, INVESTIGATE_PERMISSION, cleaned_scope["tenant"])
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        raise ValidationFailure("text", TEXT_REQUIRED)
    return Ticket(
        text.strip(),
        cleaned_scope,
        TicketContext(
            occurred_at=_clean_time(occurred_at, "occurred_at"),
            known_at=_clean_time(known_at, "known_at"),
            facts=_clean_facts(facts),
        ),
    )


def context_block(ticket: Ticket, *, run_id: str, actor: User, at: datetime | None = None) -> str:
    """The context block of the ticket's exact scope for the run's instructions, as of the time
    the ticket became known (else ``at``, the run's moment); every item in it is recorded as read
    under ``run_id``. Empty for a caller who may not use experience or a ticket whose scope is
    incomplete."""
    if not holds(actor, USE_EXPERIENCE) or ticket.missing() or not ticket.text.strip():
        return ""
    scope = {name: str(value or "") for name, value in ticket.scope.items()}
    now = ticket.context.known_at or at or clock.now()
    block = experience_context(
        ticket.text.strip()[:MAX_QUERY], scope, now, run_id, domain.CONTEXT_BUDGET, actor=actor
    )
    return str(block.get("block") or "")


def investigation_run(
    *,
    actor: User,
    text: str,
    scope: Mapping[str, object],
    occurred_at: datetime | None,
    known_at: datetime | None,
    facts: Mapping[str, object] | None = None,
    provider: str = "scripted",
    run_id: str | None = None,
    max_calls: int | None = None,
    provider_instance: Provider | None = None,
    on_step: Callable[[dict[str, Any]], object] | None = None,
    queued: bool = False,
    at: datetime | None = None,
) -> Investigation:
    """Run one ticket through the runner as ``actor`` and store it; refusals write nothing.

    ``queued``: this is the run of a queued request (``investigation_request_run``), whose
    request already holds the run id.

    The scope, the times and the facts come from the caller, never from the model; the actor's
    permission and tenant are checked before anything is read. ``on_step`` sees each step as
    it happens. ``at`` pins the moment the run is stored at (its start and finish, the reads its
    tools record); without it the clock is read at the start, at the finish and at each tool
    call, which are moments of their own.
    """
    moment: Callable[[], datetime] = (lambda: clock.now()) if at is None else (lambda: at)
    ticket = _ticket(
        actor=actor,
        text=text,
        scope=scope,
        occurred_at=occurred_at,
        known_at=known_at,
        facts=facts,
    )
    provider, max_calls, run_id = _run_options(provider, max_calls, run_id)
    started_at = moment()
    # The run is opened (claimed) before the model runs, so a reused id of the actor's own is
    # refused before anything is written. Its tools read under the caller's id for the run; the
    # run is stored under its stored id.
    with transaction.atomic():
        stored_id = _open_run(
            run_id=run_id,
            actor=actor,
            tenant=ticket.scope.get("tenant"),
            at=started_at,
            queued=queued,
        )
    model = provider_instance or provider_for(provider)
    budget = Budget(max_calls=max_calls, max_seconds=float(settings.INVESTIGATION_MAX_SECONDS))
    running = _RUNNING.set(stored_id)
    try:
        outcome = run_ticket(
            ticket,
            model,
            tools=declarations(actor),
            handlers=bind(ticket, run_id=run_id, actor=actor, moment=moment, at=at, provider=model),
            budget=budget,
            instructions=domain.instructions_with(
                context_block(ticket, run_id=run_id, actor=actor, at=started_at)
            ),
            revoked=lambda ids: unusable_items(ids, tenant=str(ticket.scope.get("tenant") or "")),
            on_step=on_step,
        )
    finally:
        _RUNNING.reset(running)
    return _store(
        ticket=ticket,
        outcome=outcome,
        run_id=stored_id,
        provider=provider,
        budget=budget,
        actor=actor,
        started_at=started_at,
        finished_at=moment(),
    )


def investigation_answer(investigation: Investigation) -> dict[str, Any]:
    """A stored investigation in the contract's shape, under the run id its caller gave (its
    stored id differs when another account or tenant used the same id)."""
    return {**investigation.as_json(), "run_id": run_name(investigation.run_id)}


def _run_options(provider: object, max_calls: object, run_id: object) -> tuple[str, int, str]:
    """The provider, call budget and run id of a run, checked once for every path (a run now
    or one queued for the worker): a taken run id is refused before anything is written."""
    provider = provider_checked(provider)
    if max_calls is None:
        max_calls = domain.DEFAULT_MAX_CALLS
    if (
        isinstance(max_calls, bool)
        or not isinstance(max_calls, int)
        or not 1 <= max_calls <= domain.MAX_CALLS_LIMIT
    ):
        raise ValidationFailure("max_calls", MAX_CALLS_RANGE)
    run_id = validate_run_id(run_id) if run_id is not None else f"inv-{uuid.uuid4().hex}"
    return str(provider), max_calls, run_id


def _open_run(
    *, run_id: str, actor: User, tenant: str | None, at: datetime, queued: bool = False
) -> str:
    """Open ``actor``'s run ``run_id`` in ``tenant`` (another account's or tenant's run of that
    name is another run) and give its stored id; refuse a run of the actor's that already has an
    investigation, or a queued one unless this is that queued run (``queued``)."""
    stored_id = run_claim(run_id=run_id, actor=actor, tenant=tenant, at=at).run_id
    taken = Investigation.objects.filter(run_id=stored_id).exists()
    if not queued:
        taken = taken or InvestigationRequest.objects.filter(run_id=stored_id).exists()
    if taken:
        raise AlreadyTaken("run_id", RUN_ID_TAKEN)
    return stored_id


# --- background runs: the console's tickets and the API's live investigations ------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def investigation_request(
    *,
    actor: User,
    text: str,
    scope: Mapping[str, object],
    occurred_at: datetime | None,
    known_at: datetime | None,
    facts: Mapping[str, object] | None = None,
    provider: str = "scripted",
    run_id: str | None = None,
    max_calls: int | None = None,
    now: datetime | None = None,
) -> InvestigationRequest:
    """Check the ticket as ``investigation_run`` does, then queue its run in the background.

    The request and its task are written in one transaction: the run exists exactly when the
    request does. The page (or the API's poll) follows ``InvestigationRequest.steps`` as the
    runner stores them.
    """
    ticket = _ticket(
        actor=actor,
        text=text,
        scope=scope,
        occurred_at=occurred_at,
        known_at=known_at,
        facts=facts,
    )
    provider, max_calls, run_id = _run_options(provider, max_calls, run_id)
    now = now or clock.now()
    with transaction.atomic():
        # Claimed when queued, so no other account can take the id before the worker runs it.
        stored_id = _open_run(run_id=run_id, actor=actor, tenant=ticket.scope.get("tenant"), at=now)
        request = InvestigationRequest.objects.create(
            run_id=stored_id,
            tenant=ticket.scope.get("tenant") or "",
            text=ticket.text,
            arguments={
                "text": ticket.text,
                "scope": dict(ticket.scope),
                "occurred_at": _iso(ticket.context.occurred_at),
                "known_at": _iso(ticket.context.known_at),
                "facts": dict(ticket.context.facts),
                "provider": provider,
                "max_calls": max_calls,
            },
            actor=actor,
            created_at=now,
            updated_at=now,
        )
        investigation_task.enqueue(request.pk)
    request.refresh_from_db()
    return request


def _set(pk: int, **fields: Any) -> None:
    InvestigationRequest.objects.filter(pk=pk).update(updated_at=clock.now(), **fields)


def investigation_request_run(pk: int) -> str:
    """Run a queued request (the background task); its state and why, as a line.

    Each step is committed as soon as the runner records it. Running it again finishes what an
    earlier attempt left: a run already stored under the request's ``run_id`` is linked, not
    run twice.
    """
    request = InvestigationRequest.objects.select_related("actor").filter(pk=pk).first()
    if request is None or request.done:
        return "nothing to run"
    stored = Investigation.objects.filter(run_id=request.run_id).first()
    if stored is None:
        _set(pk, state=RequestState.RUNNING, steps=[], error="")
        steps: list[dict[str, Any]] = []

        def step_stored(step: dict[str, Any]) -> None:
            steps.append(step)
            _set(pk, steps=steps)

        arguments = request.arguments
        try:
            stored = investigation_run(
                actor=request.actor,
                text=arguments["text"],
                scope=arguments["scope"],
                occurred_at=_parsed(arguments.get("occurred_at")),
                known_at=_parsed(arguments.get("known_at")),
                facts=arguments.get("facts") or {},
                provider=arguments.get("provider") or "scripted",
                max_calls=arguments.get("max_calls"),
                # The name the caller gave the run: its tools read under it, as a run now would.
                run_id=run_name(request.run_id),
                on_step=step_stored,
                queued=True,
            )
        except (ValidationFailure, PermissionRefused) as refused:
            # The actor lost the permission or the tenant since; final, not retried.
            _set(pk, state=RequestState.FAILED, error=reason_clipped(str(refused)))
            return f"{RequestState.FAILED}: {refused}"
    _set(pk, state=RequestState.FINISHED, steps=stored.steps, investigation=stored)
    return f"{RequestState.FINISHED}: {stored.status}"


def investigation_request_failed(pk: int, reason: str) -> None:
    """The run's last attempt failed: say so, unless it finished meanwhile."""
    InvestigationRequest.objects.filter(pk=pk, investigation__isnull=True).update(
        state=RequestState.FAILED, error=reason_clipped(reason), updated_at=clock.now()
    )


def _parsed(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


@transaction.atomic
def _store(
    *,
    ticket: Ticket,
    outcome: domain.Outcome,
    run_id: str,
    provider: str,
    budget: Budget,
    actor: User,
    started_at: datetime,
    finished_at: datetime,
) -> Investigation:
    context = ticket.context.as_json()
    investigation = Investigation.objects.create(
        run_id=run_id,
        text=ticket.text,
        context=context,
        provider=provider,
        status=outcome.status,
        reason=reason_clipped(outcome.reason),
        steps=outcome.steps,
        answer=outcome.answer,
        raw_answer=(outcome.raw_answer or "")[:20_000],
        verification=outcome.verification.as_json(),
        missing=outcome.missing,
        tool_calls=outcome.tool_calls,
        budget=budget.as_json(),
        started_at=started_at,
        finished_at=finished_at,
        actor=actor,
        **{name: ticket.scope.get(name) or "" for name in SCOPE_FIELDS},
    )
    # Curation, above: the investigation's after-action review, queued.
    dispatch(InvestigationStored(investigation=investigation, now=finished_at))
    event_record(
        actor=actor,
        action=Action.INVESTIGATION_RUN,
        target=run_id,
        reason=outcome.reason[:500],
        details={
            "run_id": run_id,
            "status": outcome.status,
            "provider": provider,
            "tool_calls": outcome.tool_calls,
            "verification": outcome.verification.reasons,
        },
        at=finished_at,
    )
    return investigation


@task()
def investigation_task(pk: int, attempt: int = 1) -> str:
    """Run a ticket entered on the console, storing each step as it happens.

    Defined beside ``investigation_request``, which queues it. A failure is retried like any
    task; when the last attempt fails too, the request says so (``failed``, with the error), so
    its page stops waiting.
    """
    try:
        with retrying(investigation_task, attempt, pk):
            return investigation_request_run(pk)
    except Exception as exc:
        if attempt >= int(getattr(settings, "TASK_MAX_ATTEMPTS", 5)):
            investigation_request_failed(pk, f"{type(exc).__name__}: {exc}")
        raise
