"""Who may do what: the permission check is Django's, and an agent limited to some tenants
neither asks about nor reads any other tenant's memory."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Permission, User

from experience.cases.models import Case
from reviewconsole.permissions import holds
from reviewconsole.roles import ROLE_PERMISSIONS, Role
from reviewconsole.services import user_set_role
from tests.api.conftest import (
    SCOPE,
    BearerClient,
    Demo,
    case_body,
    retrieve_body,
    run_body,
    search_body,
)

pytestmark = pytest.mark.django_db

EVERY_ROLE_PERMISSION = sorted({name for names in ROLE_PERMISSIONS.values() for name in names})


@pytest.mark.parametrize("role", list(Role))
def test_holds_is_djangos_answer_for_every_role(role: Role) -> None:
    user = user_set_role(username=f"user-{role}", role=role)
    for permission in EVERY_ROLE_PERMISSION:
        fresh = User.objects.get(pk=user.pk)
        assert holds(fresh, permission) == fresh.has_perm(permission), permission


def test_holds_counts_direct_permissions_superusers_and_inactive_users() -> None:
    user = User.objects.create_user("plain")
    assert not holds(user, "experience.view_run")
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="experience", codename="view_run")
    )
    user = User.objects.get(pk=user.pk)  # Django reads a user object's permissions once
    assert holds(user, "knowledge.search_knowledge", "experience.view_run")
    user.is_active = False
    assert not holds(user, "experience.view_run")
    root = User.objects.create_superuser("root-user", password="unused-password-1")
    assert holds(root, "anything.at_all")
    assert not holds(root)


@pytest.fixture
def limited_agent(db: None) -> User:
    return user_set_role(username="agent-other", role=Role.AGENT, tenants=["other-co"])


@pytest.fixture
def home_agent(db: None) -> User:
    return user_set_role(username="agent-home", role=Role.AGENT, tenants=[SCOPE["tenant"]])


def test_an_agent_of_the_tenant_works_as_usual(
    home_agent: User, client_for: Callable[[User], BearerClient], demo: Demo
) -> None:
    client = client_for(home_agent)
    assert client.post_json("/api/v1/knowledge/search", search_body()).status_code == 200
    assert client.get(f"/api/v1/cases/{demo.cases[0]}").status_code == 200


def test_an_agent_of_another_tenant_cannot_ask_about_this_one(
    limited_agent: User, client_for: Callable[[User], BearerClient], demo: Demo
) -> None:
    client = client_for(limited_agent)
    for path, body in (
        ("/api/v1/knowledge/search", search_body()),
        ("/api/v1/experience/retrieve", retrieve_body()),
        (f"/api/v1/skills/{demo.skill}/run", run_body()),
    ):
        response = client.post_json(path, body)
        assert response.status_code == 403, path
        assert "other-co" not in response.json()["detail"]
        assert SCOPE["tenant"] in response.json()["detail"]


def test_an_agent_of_another_tenant_reads_nothing_of_this_one(
    limited_agent: User,
    agent_client: BearerClient,
    client_for: Callable[[User], BearerClient],
    demo: Demo,
) -> None:
    agent_client.post_json(f"/api/v1/skills/{demo.skill}/run", run_body(run_id="shared-run"))
    client = client_for(limited_agent)
    assert client.get(f"/api/v1/cases/{demo.cases[0]}").status_code == 404
    assert client.get(f"/api/v1/skills/{demo.skill}").status_code == 404
    assert client.get("/api/v1/runs/shared-run").status_code == 404
    assert agent_client.get("/api/v1/runs/shared-run").status_code == 200


def test_an_agent_of_another_tenant_cannot_propose_for_this_one(
    limited_agent: User, client_for: Callable[[User], BearerClient], at_now: object
) -> None:
    # 403, as every endpoint answers a tenant the agent may not use (issue 24.10).
    response = client_for(limited_agent).post_json("/api/v1/cases", case_body())
    assert response.status_code == 403
    assert not Case.objects.exists()
