"""Investigating a ticket for an agent: the HTTP endpoint and the MCP tool both call this."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from agentapi.schemas import InvestigationRequest
from investigations.services import investigation_run


def investigate(*, user: User, request: InvestigationRequest) -> dict[str, Any]:
    """Run the ticket as the token's user; the service checks the permission and the tenant."""
    investigation = investigation_run(
        actor=user,
        text=request.text,
        scope=request.scope.as_mapping(),
        occurred_at=request.occurred_at,
        known_at=request.known_at,
        facts=dict(request.facts),
        provider=request.provider,
        run_id=request.run_id,
        max_calls=request.max_calls,
    )
    return investigation.as_json()
