"""Run ids at the edges (issue 23, items 4 and 8; issue 37, item 8): the HTTP API, MCP, the
investigate command and the console's run page. A run is keyed by tenant, account and the id its
caller chose: the same id of another account or tenant is another run, never refused, and another
account's or tenant's run answers byte for byte like an unknown id."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from agentapi.services import token_create
from experience.runs.models import Reference, RunOwner
from investigations.models import Investigation
from investigations.services import investigation_run
from reviewconsole.models import Event, TenantMembership
from reviewconsole.roles import Role
from tests.api.conftest import SCOPE, BearerClient, Demo, at_now, demo, retrieve_body
from tests.investigations.conftest import AT, KNOWN, STORE_B, TICKET
from tests.knowledge.conftest import fixture_documents, knowledge_base
from tests.mcp.test_server import call, refusal

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


def own_reads(user: User, name: str) -> int:
    claim = RunOwner.objects.get(owner=user, name=name)
    return Reference.objects.filter(run_id=claim.run_id).count()


def test_api_read_under_another_accounts_or_tenants_run_id_opens_the_callers_own_run(
    demo: Demo, agent: User, stranger: User, outsider: User
) -> None:
    owner = BearerClient(token_create(user=agent, name="t").text)
    clients = [
        (stranger, SCOPE),
        (outsider, {**SCOPE, "tenant": OTHER}),
    ]
    response = owner.post_json("/api/v1/experience/retrieve", retrieve_body(run_id="r-1"))
    assert response.status_code == 200
    owners = Reference.objects.filter(run_id="r-1").count()
    assert owners
    for user, scope in clients:
        client = BearerClient(token_create(user=user, name="t").text)
        response = client.post_json(
            "/api/v1/experience/retrieve", retrieve_body(run_id="r-1", scope=scope)
        )
        assert response.status_code == 200, response.content
        # The caller reads its own run back under the id it chose.
        shown = client.get("/api/v1/runs/r-1")
        if own_reads(user, "r-1"):
            assert shown.status_code == 200 and shown.json()["run_id"] == "r-1"
    assert own_reads(stranger, "r-1") == owners
    assert Reference.objects.filter(run_id="r-1").count() == owners


def test_api_shows_only_the_callers_own_run(demo: Demo, agent: User, stranger: User) -> None:
    owner = BearerClient(token_create(user=agent, name="t").text)
    owner.post_json("/api/v1/experience/retrieve", retrieve_body(run_id="r-1"))
    assert owner.get("/api/v1/runs/r-1").json()["references"]
    other = BearerClient(token_create(user=stranger, name="t").text)
    taken, unknown = other.get("/api/v1/runs/r-1"), other.get("/api/v1/runs/r-unknown")
    assert (taken.status_code, taken.content) == (unknown.status_code, unknown.content)
    assert taken.status_code == 404


def test_api_outcome_of_another_accounts_run_is_answered_as_an_unknown_ones(
    demo: Demo, agent: User, stranger: User, outsider: User
) -> None:
    owner = BearerClient(token_create(user=agent, name="t").text)
    owner.post_json("/api/v1/experience/retrieve", retrieve_body(run_id="r-1"))
    others = [BearerClient(token_create(user=user, name="t").text) for user in (stranger, outsider)]
    before = written()
    for other in others:
        body = {"outcome": "lead_was_wrong"}
        taken = other.post_json("/api/v1/runs/r-1/outcome", body)
        unknown = other.post_json("/api/v1/runs/r-unknown/outcome", body)
        assert taken.status_code == unknown.status_code == 404
        assert taken.content == unknown.content.replace(b"r-unknown", b"r-1")
    assert written() == before


def test_mcp_under_another_accounts_run_id_opens_the_callers_own_run(
    demo: Demo, agent: User, stranger: User
) -> None:
    owner, other = (token_create(user=user, name="t").text for user in (agent, stranger))
    call(owner, "retrieve_experience", retrieve_body(run_id="m-1"))
    owners = Reference.objects.filter(run_id="m-1").count()
    taken = call(other, "run_outcome", {"run_id": "m-1", "outcome": "lead_was_wrong"})
    unknown = call(other, "run_outcome", {"run_id": "m-unknown", "outcome": "lead_was_wrong"})
    assert taken.is_error and unknown.is_error
    assert refusal(taken) == refusal(unknown)
    result = call(other, "retrieve_experience", retrieve_body(run_id="m-1"))
    assert not result.is_error, result.structured_content
    assert own_reads(stranger, "m-1") == owners
    assert Reference.objects.filter(run_id="m-1").count() == owners
    mine = call(other, "run_outcome", {"run_id": "m-1", "outcome": "lead_was_wrong"})
    assert not mine.is_error and mine.structured_content["run_id"] == "m-1"


def _investigate(actor: User, run_id: str, scope: dict[str, str] = SCOPE) -> Investigation:
    return investigation_run(
        actor=actor,
        text=TICKET,
        scope=scope,
        occurred_at=datetime.fromisoformat(AT),
        known_at=datetime.fromisoformat(KNOWN),
        facts={"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
        run_id=run_id,
    )


def test_investigate_under_another_accounts_run_id_opens_the_callers_own_run(
    knowledge_base: None, agent: User, stranger: User
) -> None:
    _investigate(agent, "inv-a")
    out = StringIO()
    call_command(
        "investigate", TICKET, "--at", AT, "--known-at", KNOWN, *STORE_B,
        "--run-id", "inv-a", "--as", "agent-x", "--json", stdout=out,
    )  # fmt: skip
    assert json.loads(out.getvalue())["run_id"] == "inv-a"
    runs = {i.actor_id: i.run_id for i in Investigation.objects.all()}
    assert runs[agent.pk] == "inv-a" and runs[stranger.pk].startswith("inv-a~")


def test_api_investigations_of_one_run_id_in_two_tenants(
    knowledge_base: None, agent: User, outsider: User, make_user: Callable[[str, str], User]
) -> None:
    path = "/api/v1/investigations"
    ticket = {
        "text": TICKET,
        "occurred_at": AT,
        "known_at": KNOWN,
        "facts": {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
        "run_id": "inv-1",
    }
    mine = BearerClient(token_create(user=agent, name="t").text)
    theirs = BearerClient(token_create(user=outsider, name="t").text)
    # Tenant B's agent takes the id first; tenant A's agent uses it all the same.
    first = theirs.post_json(path, {**ticket, "scope": {**SCOPE, "tenant": OTHER}})
    second = mine.post_json(path, {**ticket, "scope": SCOPE})
    assert (first.status_code, second.status_code) == (200, 200), second.content
    assert first.json()["run_id"] == second.json()["run_id"] == "inv-1"
    assert mine.get(f"{path}/inv-1").json() == second.json()
    assert theirs.get(f"{path}/inv-1").json() == first.json()
    third = BearerClient(token_create(user=make_user("agent-c", Role.AGENT), name="t").text)
    taken, unknown = third.get(f"{path}/inv-1"), third.get(f"{path}/inv-unknown")
    assert (taken.status_code, taken.content) == (unknown.status_code, unknown.content)
    assert taken.status_code == 404


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


def test_each_tenants_run_of_one_id_has_its_own_page(
    knowledge_base: None,
    operator: User,
    agent: User,
    outsider: User,
    reviewer: User,
    second_reviewer: User,
) -> None:
    _investigate(limited(operator, OTHER), "shared-id", {**SCOPE, "tenant": OTHER})
    _investigate(agent, "shared-id")
    b_run = RunOwner.objects.get(name="shared-id", tenant=OTHER).run_id
    a_run = RunOwner.objects.get(name="shared-id", tenant=SCOPE["tenant"]).run_id
    assert a_run != b_run
    a_reviewer, b_reviewer = Client(), Client()
    a_reviewer.force_login(limited(reviewer, SCOPE["tenant"]))
    b_reviewer.force_login(limited(second_reviewer, OTHER))
    for client, own, foreign in ((a_reviewer, a_run, b_run), (b_reviewer, b_run, a_run)):
        assert client.get(reverse("experience:run-detail", args=[own])).status_code == 200
        taken = client.get(reverse("experience:run-detail", args=[foreign]))
        unknown = client.get(reverse("experience:run-detail", args=["no-such-run"]))
        assert taken.status_code == unknown.status_code == 404
        assert page_text(taken.content, foreign) == page_text(unknown.content, "no-such-run")
