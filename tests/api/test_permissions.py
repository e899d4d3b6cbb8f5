"""Per role: tokens of any user authenticate, but each endpoint checks the role's permission;
and nothing lets an agent approve, check, reject, revoke or read candidates."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from experience.models import Case, EvidenceCheck, Status
from tests.api.conftest import BearerClient, Demo, case_body, retrieve_body, run_body, search_body

pytestmark = pytest.mark.django_db

ROLES = ("agent", "reviewer", "operator", "admin_user")

# Expected status per endpoint and role: what each role's permissions allow.
EXPECTED = {
    "ping": {"agent": 200, "reviewer": 200, "operator": 200, "admin_user": 200},
    "search": {"agent": 200, "reviewer": 200, "operator": 200, "admin_user": 403},
    "retrieve": {"agent": 200, "reviewer": 200, "operator": 403, "admin_user": 403},
    "run": {"agent": 200, "reviewer": 200, "operator": 403, "admin_user": 403},
    "propose": {"agent": 201, "reviewer": 201, "operator": 201, "admin_user": 403},
    "read_run": {"agent": 200, "reviewer": 200, "operator": 403, "admin_user": 200},
    "read_case": {"agent": 200, "reviewer": 200, "operator": 403, "admin_user": 403},
    "read_skill": {"agent": 200, "reviewer": 200, "operator": 403, "admin_user": 403},
}


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
    raise AssertionError(endpoint)


@pytest.fixture
def with_a_run(demo: Demo) -> Demo:
    from experience.demo import DEMO_SCOPE, demo_context
    from experience.executor import run_skill

    run_skill(demo.skill, DEMO_SCOPE, demo_context(), "demo-replay-1")
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
    status = _call(client_for(user), endpoint, with_a_run)
    assert status == EXPECTED[endpoint][role]


def test_a_refusal_names_the_missing_permission(
    admin_user: User, client_for: Callable[[User], BearerClient], demo: Demo
) -> None:
    response = client_for(admin_user).post_json("/api/v1/knowledge/search", search_body())
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
