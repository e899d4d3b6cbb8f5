"""Every request scope names a known tenant (issue 23, item 6).

Commands and console forms refuse an unknown tenant naming ``tenant``, store nothing and read
nothing; the HTTP API and MCP answer an agent asking for an unknown tenant exactly as for a
tenant it may not use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.runs.models import Reference, Run
from investigations.models import Investigation, InvestigationRequest
from reviewconsole.models import Action, Event, Tenant
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from reviewconsole.tenancy import UNKNOWN_TENANT_MESSAGE
from tests.api.conftest import BearerClient, retrieve_body, run_body, search_body
from tests.conftest import PASSWORD
from tests.helpers import run_json
from tests.investigations.conftest import AT, KNOWN, TICKET
from tests.mcp.test_server import call, refusal

__all__ = ["client_for", "token_for"]
from tests.api.conftest import client_for, token_for

pytestmark = pytest.mark.django_db

UNKNOWN = "teahous"  # a typo of the fixtures' tenant: the case the issue reports
SKILL = "skill:" + "0" * 64
SCOPE_FLAGS = (
    "--tenant", UNKNOWN, "--brand", "leaf-and-cup", "--store", "store-002",
    "--campaign", "campaign-b", "--deployment", "release-1",
)  # fmt: skip


def scope(**changes: str) -> dict[str, str]:
    return {**retrieve_body()["scope"], "tenant": UNKNOWN, **changes}


def nothing_written() -> None:
    assert not Reference.objects.exists()
    assert not Run.objects.exists()
    assert not Investigation.objects.exists()
    assert not InvestigationRequest.objects.exists()
    assert not Tenant.objects.filter(name=UNKNOWN).exists()


def refused_naming_tenant(status: int, result: dict[str, Any]) -> None:
    assert status != 0
    assert result == {
        "ok": False,
        "error": f"{UNKNOWN!r} {UNKNOWN_TENANT_MESSAGE}",
        "field": "tenant",
    }


# --- commands ---------------------------------------------------------------------------------


def test_recall_with_an_unknown_tenant_is_refused_not_an_empty_success() -> None:
    status, result = run_json("recall", "优惠券", *SCOPE_FLAGS, "--run-id", "r-unknown")
    refused_naming_tenant(status, result)
    nothing_written()


def test_a_context_block_with_an_unknown_tenant_is_refused() -> None:
    status, result = run_json(
        "recall", "优惠券", *SCOPE_FLAGS, "--run-id", "r-unknown", "--format", "context",
        "--budget", "200",
    )  # fmt: skip
    refused_naming_tenant(status, result)
    nothing_written()


def test_research_with_an_unknown_tenant_is_refused() -> None:
    status, result = run_json(
        "research", "优惠券", "--tenant", UNKNOWN, "--store", "store-002",
        "--campaign", "campaign-b", "--at", AT, "--known-at", KNOWN,
    )  # fmt: skip
    refused_naming_tenant(status, result)


def test_run_skill_with_an_unknown_tenant_is_refused_and_no_run_is_stored() -> None:
    status, result = run_json(
        "run_skill", SKILL, *SCOPE_FLAGS, "--at", AT, "--known-at", KNOWN, "--run-id", "r-unknown"
    )
    refused_naming_tenant(status, result)
    nothing_written()


def test_investigate_with_a_mistyped_tenant_is_refused_and_never_stored() -> None:
    status, result = run_json(
        "investigate", TICKET, "--at", AT, "--known-at", KNOWN, *SCOPE_FLAGS, "--run-id", "r-typo"
    )
    refused_naming_tenant(status, result)
    nothing_written()
    assert not Event.objects.filter(action=Action.INVESTIGATION_RUN).exists()


# --- HTTP API and MCP: an unknown tenant looks like a forbidden one ----------------------------

ENDPOINTS: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("/api/v1/knowledge/search", lambda: search_body(tenant=UNKNOWN)),
    ("/api/v1/experience/retrieve", lambda: retrieve_body(scope=scope())),
    ("/api/v1/experience/context", lambda: {**retrieve_body(scope=scope()), "budget": 200}),
    (f"/api/v1/skills/{SKILL}/run", lambda: run_body(scope=scope())),
    (
        "/api/v1/investigations",
        lambda: {
            "text": TICKET,
            "scope": scope(),
            "occurred_at": AT,
            "known_at": KNOWN,
            "facts": {},
        },
    ),
]


@pytest.fixture
def limited_agent(db: None) -> User:
    """An agent of another tenant, for whom ``UNKNOWN`` is simply not one of its tenants."""
    return user_set_role(
        username="agent-milk", role=Role.AGENT, password=PASSWORD, tenants=["milkbar"]
    )


@pytest.mark.parametrize(("path", "body"), ENDPOINTS, ids=[p for p, _ in ENDPOINTS])
def test_the_api_answers_an_unknown_tenant_as_a_forbidden_one(
    agent: User,
    limited_agent: User,
    client_for: Callable[[User], BearerClient],
    path: str,
    body: Callable[[], dict[str, Any]],
) -> None:
    forbidden = client_for(limited_agent).post_json(path, body())
    unknown = client_for(agent).post_json(path, body())
    assert forbidden.status_code == unknown.status_code == 403
    assert unknown.json() == forbidden.json()
    nothing_written()


MCP_CALLS: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("search_knowledge", lambda: search_body(tenant=UNKNOWN)),
    ("retrieve_experience", lambda: retrieve_body(scope=scope())),
    ("experience_context", lambda: {**retrieve_body(scope=scope()), "budget": 200}),
    ("run_skill", lambda: {"skill_id": SKILL, **run_body(scope=scope())}),
    (
        "investigate",
        lambda: {
            "text": TICKET,
            "scope": scope(),
            "occurred_at": AT,
            "known_at": KNOWN,
            "facts": {},
        },
    ),
]


@pytest.mark.parametrize(("tool", "arguments"), MCP_CALLS, ids=[t for t, _ in MCP_CALLS])
def test_mcp_answers_an_unknown_tenant_as_a_forbidden_one(
    agent: User,
    limited_agent: User,
    token_for: Callable[[User], str],
    tool: str,
    arguments: Callable[[], dict[str, Any]],
) -> None:
    forbidden = call(token_for(limited_agent), tool, arguments())
    unknown = call(token_for(agent), tool, arguments())
    assert forbidden.is_error and unknown.is_error
    assert refusal(unknown) == refusal(forbidden)
    assert refusal(unknown)["error"] == "forbidden"
    nothing_written()


def test_an_agents_proposal_never_creates_a_tenant(
    agent: User, client_for: Callable[[User], BearerClient]
) -> None:
    from tests.api.conftest import case_body

    response = client_for(agent).post_json("/api/v1/cases", case_body(scope=scope()))
    assert response.status_code == 403
    nothing_written()


# --- console forms ----------------------------------------------------------------------------


def console(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_investigation_form_refuses_an_unknown_tenant_naming_the_field(
    operator: User,
) -> None:
    data = {
        "text": TICKET,
        "tenant": UNKNOWN,
        "brand": "leaf-and-cup",
        "store": "store-002",
        "campaign": "campaign-b",
        "deployment": "release-1",
        "occurred_at": "2026-09-18T14:00:00",
        "known_at": "2026-09-18T14:10:00",
        "timezone": "Asia/Shanghai",
    }
    response = console(operator).post(reverse("investigations:investigation-new"), data)
    assert response.status_code == 422
    assert response.context["form"].errors["tenant"] == [f"{UNKNOWN!r} {UNKNOWN_TENANT_MESSAGE}"]
    nothing_written()


def test_the_search_preview_refuses_an_unknown_tenant_naming_the_field(operator: User) -> None:
    query = {
        "query": "优惠券",
        "tenant": UNKNOWN,
        "brand": "leaf-and-cup",
        "store": "store-002",
        "campaign": "campaign-b",
        "occurred_at": "2026-09-18T14:00:00",
        "known_at": "2026-09-18T14:10:00",
        "timezone": "Asia/Shanghai",
        "limit": "5",
    }
    response = console(operator).get(reverse("knowledge:search-preview"), query)
    assert response.status_code == 422
    assert response.context["form"].errors["tenant"] == [f"{UNKNOWN!r} {UNKNOWN_TENANT_MESSAGE}"]
    assert response.context["result"] is None
