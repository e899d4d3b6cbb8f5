"""Only agents' tokens authenticate; each endpoint still checks the agent role's permission;
and nothing lets an agent approve, check, reject, revoke or read candidates."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from agentapi.models import ApiToken
from agentapi.tokens import token_generate
from experience.cases.models import Case, EvidenceCheck
from experience.core.models import Status
from reviewconsole.roles import Role
from tests.api.conftest import BearerClient, Demo, case_body, retrieve_body, run_body, search_body
from tests.investigations.test_api import body as investigation_body

pytestmark = pytest.mark.django_db

ROLES = ("agent", "reviewer", "operator", "admin_user")

# Expected status per endpoint and role. Tokens are issued to agents only; a token row of another
# role (as one issued before that rule would be) authenticates no one.
_NO_TOKEN = {"reviewer": 401, "operator": 401, "admin_user": 401}
EXPECTED = {
    "ping": {"agent": 200, **_NO_TOKEN},
    "search": {"agent": 200, **_NO_TOKEN},
    "retrieve": {"agent": 200, **_NO_TOKEN},
    "run": {"agent": 200, **_NO_TOKEN},
    "propose": {"agent": 201, **_NO_TOKEN},
    "read_run": {"agent": 200, **_NO_TOKEN},
    "read_case": {"agent": 200, **_NO_TOKEN},
    "read_skill": {"agent": 200, **_NO_TOKEN},
    "read_investigation": {"agent": 200, **_NO_TOKEN},
}


def _client_of(user: User, client_for: Callable[[User], BearerClient]) -> BearerClient:
    if user.groups.filter(name=Role.AGENT).exists():
        return client_for(user)
    new = token_generate()
    ApiToken.objects.create(
        user=user, prefix=new.prefix, token_hash=new.digest, created_at=user.date_joined
    )
    return BearerClient(new.text)


def _agent_without(*permissions: str) -> None:
    """Take ``permissions`` (all when none are named) from the agent role, for this test."""
    group = Group.objects.get(name=Role.AGENT)
    if not permissions:
        group.permissions.clear()
    for name in permissions:
        app_label, codename = name.split(".")
        group.permissions.remove(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )


def _call(client: BearerClient, endpoint: str, demo: Demo) -> int:
    if endpoint == "ping":
        return int(client.get("/api/v1/ping").status_code)
    if endpoint == "search":
        return int(client.post_json("/api/v1/knowledge/search", search_body()).status_code)
    if endpoint == "retrieve":
        return int(client.post_json("/api/v1/experience/retrieve", retrieve_body()).status_code)
    if endpoint == "run":
        return int(client.post_json(f"/api/v1/skills/{demo.skill}/run", run_body()).status_code)
    if endpoint == "propose":
        return int(client.post_json("/api/v1/cases", case_body()).status_code)
    if endpoint == "read_run":
        return int(client.get("/api/v1/runs/demo-replay-1").status_code)
    if endpoint == "read_case":
        return int(client.get(f"/api/v1/cases/{demo.cases[0]}").status_code)
    if endpoint == "read_skill":
        return int(client.get(f"/api/v1/skills/{demo.skill}").status_code)
    if endpoint == "read_investigation":
        client.post_json("/api/v1/investigations", investigation_body(run_id="perm-inv-1"))
        return int(client.get("/api/v1/investigations/perm-inv-1").status_code)
    raise AssertionError(endpoint)


@pytest.fixture
def with_a_run(demo: Demo, agent: User) -> Demo:
    from experience.cases.executor import run_skill
    from experience.demo import DEMO_SCOPE, demo_context

    run_skill(demo.skill, DEMO_SCOPE, demo_context(), "demo-replay-1", actor=agent)
    return demo


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", sorted(EXPECTED))
def test_each_endpoint_checks_the_roles_permission(
    request: pytest.FixtureRequest,
    client_for: Callable[[User], BearerClient],
    with_a_run: Demo,
    role: str,
    endpoint: str,
) -> None:
    user = request.getfixturevalue(role)
    status = _call(_client_of(user, client_for), endpoint, with_a_run)
    assert status == EXPECTED[endpoint][role]


@pytest.mark.parametrize("endpoint", sorted(EXPECTED))
def test_each_endpoint_checks_a_permission(
    agent_client: BearerClient, with_a_run: Demo, endpoint: str
) -> None:
    _agent_without()
    status = _call(agent_client, endpoint, with_a_run)
    assert status == (200 if endpoint == "ping" else 403)


def test_a_refusal_names_the_missing_permission(agent_client: BearerClient, demo: Demo) -> None:
    _agent_without("knowledge.search_knowledge")
    response = agent_client.post_json("/api/v1/knowledge/search", search_body())
    assert response.status_code == 403
    assert "knowledge.search_knowledge" in response.json()["detail"]


def test_no_endpoint_approves_checks_rejects_or_revokes(agent_client: BearerClient) -> None:
    paths = agent_client.get("/api/v1/openapi.json").json()["paths"]
    operations = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert operations == {
        ("GET", "/api/v1/ping"),
        ("POST", "/api/v1/knowledge/search"),
        ("POST", "/api/v1/experience/retrieve"),
        ("POST", "/api/v1/skills/{skill_id}/run"),
        ("POST", "/api/v1/cases"),
        ("GET", "/api/v1/runs/{run_id}"),
        ("GET", "/api/v1/cases/{case_id}"),
        ("GET", "/api/v1/skills/{skill_id}"),
        ("POST", "/api/v1/investigations"),
        ("GET", "/api/v1/investigations/{run_id}"),
        ("POST", "/api/v1/experience/context"),
        ("POST", "/api/v1/runs/{run_id}/outcome"),
    }
    for word in ("approve", "verify", "check", "reject", "revoke", "candidate", "review"):
        assert not any(word in path for path in paths), word


@pytest.mark.parametrize("verb", ["approve", "reject", "revoke", "verify"])
def test_review_operations_are_absent_for_an_agent(
    agent_client: BearerClient, demo: Demo, verb: str
) -> None:
    candidate = demo.candidates[0]
    body = {"reason": "looks fine", "evidence": "diagnosis/0"}
    for path in (f"/api/v1/cases/{candidate}/{verb}", f"/api/v1/{verb}/{candidate}"):
        response = agent_client.post_json(path, body)
        assert response.status_code in (404, 405), path
    assert Case.objects.get(pk=candidate).status == Status.CANDIDATE
    assert not EvidenceCheck.objects.filter(checked_by__username="agent-7").exists()


def test_a_case_cannot_be_proposed_as_already_approved(
    agent_client: BearerClient, at_now: object
) -> None:
    response = agent_client.post_json("/api/v1/cases", case_body(status="approved"))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "status"]
    assert not Case.objects.exists()


def test_the_agents_own_proposal_stays_invisible_until_approved(
    agent_client: BearerClient, at_now: object
) -> None:
    proposed = agent_client.post_json("/api/v1/cases", case_body()).json()
    assert agent_client.get(f"/api/v1/cases/{proposed['id']}").status_code == 404


def test_a_browser_session_is_not_an_api_credential(agent: User, demo: Demo) -> None:
    browser = Client()
    browser.force_login(agent)
    assert browser.get("/api/v1/ping").status_code == 401
