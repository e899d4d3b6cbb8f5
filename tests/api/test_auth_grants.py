"""One statement authenticates a request and loads the agent's permissions and tenants; nothing is
kept between requests, so revocation, membership and role changes act on the next request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentapi.auth import request_user
from agentapi.services import token_create, token_revoke, token_user
from reviewconsole.models import TenantMembership
from reviewconsole.permissions import SEARCH_KNOWLEDGE, holds
from reviewconsole.roles import Role
from reviewconsole.tenancy import may_access, tenants_of
from tests.api.conftest import BearerClient, search_body

pytestmark = pytest.mark.django_db


def test_one_statement_answers_identity_permission_and_tenant_checks(agent: User) -> None:
    TenantMembership.objects.create(user=agent, tenant="teahouse")
    issued = token_create(user=agent)
    request_user(issued.text)  # the first use also records last_used_at

    with CaptureQueriesContext(connection) as loading:
        user = request_user(issued.text)
    assert user is not None
    with CaptureQueriesContext(connection) as checking:
        allowed = holds(user, SEARCH_KNOWLEDGE)
        refused = holds(user, "knowledge.approve_document")
        member = may_access(user, "teahouse")
        stranger = may_access(user, "other-tenant")

    assert len(loading) == 1
    assert len(checking) == 0
    assert (allowed, refused, member, stranger) == (True, False, True, False)
    assert user.pk == agent.pk
    assert user.get_username() == "agent-7"
    reference = User.objects.get(pk=agent.pk)
    assert user.get_all_permissions() == reference.get_all_permissions()
    assert tenants_of(user) == tenants_of(reference) == frozenset({"teahouse"})


def test_the_fields_left_out_are_read_when_asked(agent: User) -> None:
    issued = token_create(user=agent)
    user = request_user(issued.text)
    assert user is not None
    assert user.date_joined == agent.date_joined
    assert user.check_password("wrong") is False


def test_a_deployment_wide_agent_stays_deployment_wide(agent: User) -> None:
    user = request_user(token_create(user=agent).text)
    assert user is not None
    assert tenants_of(user) is None


@pytest.mark.parametrize("text", ["", "rca_0123456789ab_" + "x" * 43, "not a token"])
def test_unknown_or_malformed_tokens_act_as_no_one(agent: User, text: str) -> None:
    token_create(user=agent)
    assert request_user(text) is None
    assert token_user(text) is None


def test_request_user_follows_the_rules_of_token_user(agent: User, reviewer: User) -> None:
    """Same answers as the service the MCP server uses: valid, revoked, forged, inactive."""
    valid = token_create(user=agent)
    revoked = token_create(user=agent)
    token_revoke(token=revoked.token)
    forged = valid.text[:-4] + ("AAAA" if not valid.text.endswith("AAAA") else "BBBB")
    for text in (valid.text, revoked.text, forged):
        assert request_user(text) == token_user(text)
    assert request_user(valid.text) == agent
    agent.is_active = False
    agent.save()
    assert request_user(valid.text) is None
    assert token_user(valid.text) is None


# --- changes act on the next request -----------------------------------------------------------


@pytest.fixture
def searching(agent: User, at_now: Any) -> Callable[[], int]:
    TenantMembership.objects.create(user=agent, tenant="teahouse")
    client = BearerClient(token_create(user=agent).text)

    def status() -> int:
        return int(client.post_json("/api/v1/knowledge/search", search_body()).status_code)

    assert status() == 200
    return status


def test_a_revoked_token_is_refused_at_the_next_search(
    agent: User, searching: Callable[[], int]
) -> None:
    token = agent.api_tokens.get()
    token_revoke(token=token)
    assert searching() == 401


def test_a_removed_membership_is_refused_at_the_next_search(
    agent: User, searching: Callable[[], int]
) -> None:
    TenantMembership.objects.filter(user=agent).update(tenant="other-tenant")
    assert searching() == 403


def test_a_role_change_is_refused_at_the_next_search(
    agent: User, searching: Callable[[], int]
) -> None:
    agent.groups.set([Group.objects.get(name=Role.REVIEWER)])
    assert searching() == 401  # a token acts only for a user in the agent role


def test_a_withdrawn_permission_is_refused_at_the_next_search(
    agent: User, searching: Callable[[], int]
) -> None:
    app_label, codename = SEARCH_KNOWLEDGE.split(".")
    permission = Permission.objects.get(content_type__app_label=app_label, codename=codename)
    Group.objects.get(name=Role.AGENT).permissions.remove(permission)
    assert searching() == 403


def test_a_search_authenticates_with_one_statement(
    agent: User, searching: Callable[[], int]
) -> None:
    with CaptureQueriesContext(connection) as queries:
        assert searching() == 200
    statements = [query["sql"] for query in queries.captured_queries]
    touching_auth = [sql for sql in statements if "auth_" in sql or "tenantmembership" in sql]
    assert len(touching_auth) == 1, statements
