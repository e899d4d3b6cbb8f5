"""``POST /api/v1/investigations`` and the MCP tool ``investigate``: one service behind both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User

from investigations.models import Investigation
from investigations.services import RUN_ID_TAKEN
from knowledge.conclusions import RULES_DO_NOT_EXPLAIN, RULES_EXCLUDE_PURCHASE
from reviewconsole.models import TenantMembership
from reviewconsole.permissions import SEARCH_KNOWLEDGE
from reviewconsole.roles import Role
from tests.api.conftest import BearerClient, client_for, token_for
from tests.investigations.conftest import AT, KNOWN, TICKET
from tests.mcp.test_server import call

__all__ = ["client_for", "token_for"]

pytestmark = pytest.mark.django_db
PATH = "/api/v1/investigations"
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}


def body(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "text": TICKET,
        "scope": {
            "tenant": "teahouse",
            "brand": "leaf-and-cup",
            "store": "store-002",
            "campaign": "campaign-b",
            "deployment": "release-1",
        },
        "occurred_at": AT,
        "known_at": KNOWN,
        "facts": dict(FACTS),
    }
    data.update(changes)
    return data


def test_an_agent_investigates_a_ticket(
    knowledge_base: None, agent: User, client_for: Callable[[User], BearerClient]
) -> None:
    response = client_for(agent).post_json(PATH, body(run_id="api-1"))

    assert response.status_code == 200, response.content
    result = response.json()
    assert result["status"] == "answered"
    assert result["answer"]["conclusion_code"] == RULES_DO_NOT_EXPLAIN
    assert result["verification"]["ok"] is True
    stored = Investigation.objects.get(run_id="api-1")
    # Identity comes from the token, never from the body.
    assert stored.actor == agent
    assert stored.as_json() == result


def test_the_body_cannot_name_the_actor(
    knowledge_base: None, agent: User, client_for: Callable[[User], BearerClient]
) -> None:
    response = client_for(agent).post_json(PATH, body(actor="admin"))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "actor"]


@pytest.mark.parametrize(
    ("changes", "loc"),
    [
        ({"text": ""}, ["body", "text"]),
        ({"occurred_at": "2026-09-18T14:00:00"}, ["body", "occurred_at"]),
        ({"provider": "gpt"}, ["body", "provider"]),
        ({"max_calls": 0}, ["body", "max_calls"]),
        ({"scope": {"tenant": "any"}}, ["body", "scope", "tenant"]),
    ],
)
def test_a_bad_body_is_422_naming_the_field(
    knowledge_base: None,
    agent: User,
    client_for: Callable[[User], BearerClient],
    changes: dict[str, Any],
    loc: list[str],
) -> None:
    response = client_for(agent).post_json(PATH, body(**changes))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == loc
    assert not Investigation.objects.exists()


def test_a_taken_run_id_is_409(
    knowledge_base: None, agent: User, client_for: Callable[[User], BearerClient]
) -> None:
    """A run id already taken is a conflict with the run it names, not a malformed field."""
    client = client_for(agent)
    assert client.post_json(PATH, body(run_id="api-1")).status_code == 200
    response = client.post_json(PATH, body(run_id="api-1"))
    assert response.status_code == 409
    assert response.json() == {"detail": RUN_ID_TAKEN}


def test_without_a_token_is_401(knowledge_base: None) -> None:
    assert BearerClient(None).post_json(PATH, body()).status_code == 401


def test_a_user_of_another_tenant_is_403(
    knowledge_base: None,
    make_user: Callable[[str, str], User],
    client_for: Callable[[User], BearerClient],
) -> None:
    limited = make_user("limited-agent", "agent")
    TenantMembership.objects.create(user=limited, tenant="other-tenant")
    response = client_for(limited).post_json(PATH, body())
    assert response.status_code == 403
    assert not Investigation.objects.exists()


def test_without_the_search_permission_is_403(
    knowledge_base: None, agent: User, client_for: Callable[[User], BearerClient]
) -> None:
    group = Group.objects.get(name=Role.AGENT)
    group.permissions.remove(
        Permission.objects.get(content_type__app_label="knowledge", codename="search_knowledge")
    )
    response = client_for(agent).post_json(PATH, body())
    assert response.status_code == 403
    assert SEARCH_KNOWLEDGE in response.json()["detail"]
    assert not Investigation.objects.exists()


def test_the_mcp_tool_runs_the_same_investigation(
    knowledge_base: None, agent: User, token_for: Callable[[User], str]
) -> None:
    scope = {**body()["scope"], "store": "store-001", "campaign": "campaign-a"}
    result = call(token_for(agent), "investigate", body(scope=scope, run_id="mcp-1"))

    assert not result.is_error, result
    payload = result.structured_content
    assert payload is not None
    assert payload["answer"]["conclusion_code"] == RULES_EXCLUDE_PURCHASE
    assert Investigation.objects.get(run_id="mcp-1").as_json() == payload
