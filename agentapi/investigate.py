"""Investigating a ticket for an agent: the HTTP endpoint and the MCP tool both call this.

The scripted provider answers within the request. A live model can take up to the run's wall
time, so over HTTP a live investigation is handed to the worker and polled
(``investigation_queue``, ``investigation_poll``): a request never holds a web process for a
model's answer.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from agentapi.limits import require_live_capacity
from agentapi.operations import NotFound
from agentapi.schemas import InvestigationRequest
from experience.runs.claims import run_name, run_named
from investigations.models import Investigation, RequestState
from investigations.models import InvestigationRequest as QueuedInvestigation
from investigations.services import (
    INVESTIGATE_PERMISSION,
    investigation_answer,
    investigation_request,
    investigation_run,
)
from reviewconsole.permissions import require

NO_SUCH_INVESTIGATION = "no investigation of yours has this run id"
RUN_FAILED = "run_failed"


def _ticket(request: InvestigationRequest) -> dict[str, Any]:
    """The ticket as the runner and the queue both take it."""
    return {
        "text": request.text,
        "scope": request.scope.as_mapping(),
        "occurred_at": request.occurred_at,
        "known_at": request.known_at,
        "facts": dict(request.facts),
        "provider": request.provider,
        "run_id": request.run_id,
        "max_calls": request.max_calls,
    }


def investigate(*, user: User, request: InvestigationRequest) -> dict[str, Any]:
    """Run the ticket as the token's user; the service checks the permission and the tenant."""
    return investigation_answer(investigation_run(actor=user, **_ticket(request)))


def investigation_queue(*, user: User, request: InvestigationRequest) -> QueuedInvestigation:
    """Queue the ticket for the worker (checked as a run now would be); refused with ``TooBusy``
    while the account has its limit of live investigations in flight. The count and the
    request's insert are one transaction under the account's lock."""
    with transaction.atomic():
        require_live_capacity(user)
        return investigation_request(actor=user, **_ticket(request))


def pending(queued: QueuedInvestigation, url: str) -> dict[str, Any]:
    return {
        "run_id": run_name(queued.run_id),
        "state": queued.state,
        "steps": len(queued.steps),
        "poll": url,
    }


def investigation_poll(*, user: User, run_id: str) -> tuple[int, dict[str, Any]]:
    """The caller's own investigation under ``run_id``: 200 with the stored run, 202 with its
    progress while queued or running, 200 with status ``error`` when the worker gave up. Another
    account's or tenant's run id is answered as an unknown one."""
    require(user, INVESTIGATE_PERMISSION)
    claim = run_named(user, run_id)
    if claim is None or claim.owner_id != user.pk:
        raise NotFound(NO_SUCH_INVESTIGATION)
    stored = Investigation.objects.filter(run_id=claim.run_id, actor=user).first()
    if stored is not None:
        return 200, investigation_answer(stored)
    queued = QueuedInvestigation.objects.filter(run_id=claim.run_id, actor=user).first()
    if queued is None:
        raise NotFound(NO_SUCH_INVESTIGATION)
    if queued.state == RequestState.FAILED:
        return 200, failed(queued)
    return 202, pending(queued, "")


def failed(queued: QueuedInvestigation) -> dict[str, Any]:
    """A run the worker gave up on, in the shape of a stored run (status ``error``)."""
    arguments = queued.arguments
    return {
        "run_id": run_name(queued.run_id),
        "status": "error",
        "reason": queued.error,
        "answer": None,
        "verification": {
            "ok": False,
            "reasons": [RUN_FAILED],
            "details": [{"reason": RUN_FAILED, "error": queued.error}],
        },
        "tool_calls": 0,
        "steps": queued.steps,
        "missing": [],
        "provider": arguments.get("provider") or "scripted",
        "scope": {k: v for k, v in (arguments.get("scope") or {}).items() if v},
        "context": {
            "occurred_at": arguments.get("occurred_at"),
            "known_at": arguments.get("known_at"),
            "facts": arguments.get("facts") or {},
        },
    }
