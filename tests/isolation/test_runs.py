"""Issue 23, items 4 and 8, at the edges: run ids in the HTTP API, MCP, the investigate command
and the console's run page. Another account's or tenant's run answers like an unknown one, or is
refused naming ``run_id`` with nothing written."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from agentapi.services import token_create
from experience.runs.claims import RUN_TAKEN
from experience.runs.models import Reference
from investigations.models import Investigation
from investigations.services import investigation_run
from reviewconsole.models import Event, TenantMembership
from reviewconsole.roles import Role
from tests.api.conftest import SCOPE, BearerClient, Demo, at_now, demo, retrieve_body
from tests.investigations.conftest import AT, KNOWN, STORE_B, TICKET
from tests.knowledge.conftest import fixture_documents, knowledge_base
from tests.mcp.test_server import call

__all__ = ["at_now", "demo", "fixture_documents", "knowledge_base"]

pytestmark = pytest.mark.django_db

OTHER = "other-tenant"


def limited(user: User, tenant: str) -> User:
    TenantMembership.objects.create(user=user, tenant=tenant)
    return User.objects.get(pk=user.pk)


@pytest.fixture
def stranger(make_user: Callable[[str, str], User]) -> User:
    return limited(make_user("agent-x", Role.AGENT), SCOPE["tenant"])


@pytest.fixture
def outsider(make_user: Callable[[str, str], User]) -> User:
    return limited(make_user("agent-b", Role.AGENT), OTHER)


def written() -> tuple[int, int]:
    return Reference.objects.count(), Event.objects.count()


def test_api_read_under_another_accounts_or_tenants_run_id_is_refused(
    demo: Demo, agent: User, stranger: User, outsider: User
) -> None:
    owner = BearerClient(token_create(user=agent, name="t").text)
    clients = [
        (BearerClient(token_create(user=stranger, name="t").text), SCOPE),
        (BearerClient(token_create(user=outsider, name="t").text), {**SCOPE, "tenant": OTHER}),
    ]
    response = owner.post_json("/api/v1/experience/retrieve", retrieve_body(run_id="r-1"))
    assert response.status_code == 200
    before = written()
    for client, scope in clients:
        response = client.post_json(
            "/api/v1/experience/retrieve", retrieve_body(run_id="r-1", scope=scope)
        )
        assert response.status_code == 422
        assert response.json()["detail"] == [
            {"loc": ["body", "run_id"], "msg": RUN_TAKEN, "type": "value_error"}
        ]
    assert written() == before


def test_api_shows_only_the_callers_own_run(demo: Demo, agent: User, stranger: User) -> None:
    owner = BearerClient(token_create(user=agent, name="t").text)
    owner.post_json("/api/v1/experience/retrieve", retrieve_body(run_id="r-1"))
    assert owner.get("/api/v1/runs/r-1").json()["references"]
    other = BearerClient(token_create(user=stranger, name="t").text)
    taken, unknown = other.get("/api/v1/runs/r-1"), other.get("/api/v1/runs/r-unknown")
    assert (taken.status_code, taken.json()) == (unknown.status_code, unknown.json())
    assert taken.status_code == 404


def test_mcp_read_under_another_accounts_run_id_is_an_error_naming_run_id(
    demo: Demo, agent: User, stranger: User
) -> None:
    owner, other = (token_create(user=user, name="t").text for user in (agent, stranger))
    call(owner, "retrieve_experience", retrieve_body(run_id="m-1"))
    before = written()
    result = call(other, "retrieve_experience", retrieve_body(run_id="m-1"))
    assert result.is_error
    assert result.structured_content == {
        "error": "invalid",
        "message": RUN_TAKEN,
        "loc": ["run_id"],
    }
    assert written() == before


def _investigate(actor: User, run_id: str) -> Investigation:
    return investigation_run(
        actor=actor,
        text=TICKET,
        scope=SCOPE,
        occurred_at=datetime.fromisoformat(AT),
        known_at=datetime.fromisoformat(KNOWN),
        facts={"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
        run_id=run_id,
    )


def test_investigate_under_another_accounts_run_id_is_refused(
    knowledge_base: None, agent: User, stranger: User
) -> None:
    _investigate(agent, "inv-a")
    before = (*written(), Investigation.objects.count())
    out = StringIO()
    with pytest.raises(CommandError):
        call_command(
            "investigate", TICKET, "--at", AT, "--known-at", KNOWN, *STORE_B,
            "--run-id", "inv-a", "--as", "agent-x", "--json", stdout=out,
        )  # fmt: skip
    # The command names its own flag, as for its other run id refusals.
    assert json.loads(out.getvalue()) == {"ok": False, "error": RUN_TAKEN, "field": "--run-id"}
    assert (*written(), Investigation.objects.count()) == before


# --- item 8: the console's run page -----------------------------------------------------------


def test_a_tenant_reviewer_opens_their_tenants_run_that_read_only_documents(
    knowledge_base: None,
    operator: User,
    reviewer: User,
    second_reviewer: User,
) -> None:
    # An operator may search knowledge but not use experience: the run reads documents only.
    _investigate(operator, "docs-only")
    kinds = set(Reference.objects.filter(run_id="docs-only").values_list("item_type", flat=True))
    assert kinds == {"document"}
    own, other = Client(), Client()
    own.force_login(limited(reviewer, SCOPE["tenant"]))
    other.force_login(limited(second_reviewer, OTHER))
    page = own.get(reverse("experience:run-detail", args=["docs-only"]))
    assert page.status_code == 200
    assert b"doc:" in page.content
    taken = other.get(reverse("experience:run-detail", args=["docs-only"]))
    unknown = other.get(reverse("experience:run-detail", args=["no-such-run"]))
    assert taken.status_code == unknown.status_code == 404
    assert page_text(taken.content, "docs-only") == page_text(unknown.content, "no-such-run")


def page_text(content: bytes, run_id: str) -> str:
    """A page without its CSRF tokens (masked anew on every response) and the requested id."""
    text = re.sub(r'(X-CSRFToken": "|csrfmiddlewaretoken" value=")[^"]*"', "", content.decode())
    return text.replace(run_id, "RUN")
