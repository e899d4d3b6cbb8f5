"""One token validator for the HTTP API and MCP (``agentapi.auth.TokenBackend``, one statement),
and Django's own permission machinery behind it; nothing is kept between requests, so
revocation, membership and role changes act on the next request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.db.models.sql.compiler import SQLCompiler
from django.test.utils import CaptureQueriesContext

from agentapi.auth import TokenBackend, token_user
from agentapi.services import token_create, token_revoke
from reviewconsole.models import TenantMembership
from reviewconsole.permissions import SEARCH_KNOWLEDGE, holds
from reviewconsole.roles import Role
from reviewconsole.tenancy import may_access, tenants_of
from tests.api.conftest import BearerClient, Demo, search_body
from tests.mcp.test_server import call

pytestmark = pytest.mark.django_db


def test_authentication_is_one_statement_and_the_checks_are_djangos(agent: User) -> None:
    TenantMembership.objects.create(user=agent, tenant="teahouse")
    issued = token_create(user=agent)
    # The first use also records last_used_at; the first check reads the permissions' names,
    # once per process.
    holds(token_user(issued.text), SEARCH_KNOWLEDGE)

    with CaptureQueriesContext(connection) as loading:
        user = token_user(issued.text)
    assert user is not None
    with CaptureQueriesContext(connection) as checking:
        allowed = holds(user, SEARCH_KNOWLEDGE)
        refused = holds(user, "knowledge.approve_document")
        member = may_access(user, "teahouse")
        stranger = may_access(user, "other-tenant")
    with CaptureQueriesContext(connection) as again:
        assert holds(user, SEARCH_KNOWLEDGE) and may_access(user, "teahouse")

    assert len(loading) == 1
    # The user's own and the groups' permissions and the memberships, in one statement
    # (reviewconsole.access.AccessBackend: ModelBackend's rule, one read).
    assert len(checking) == 1
    assert len(again) == 0  # read once per user object, which each request loads afresh
    assert (allowed, refused, member, stranger) == (True, False, True, False)
    assert user.pk == agent.pk
    assert user.get_username() == "agent-7"
    reference = User.objects.get(pk=agent.pk)
    assert user.get_all_permissions() == reference.get_all_permissions()
    assert tenants_of(user) == tenants_of(reference) == frozenset({"teahouse"})


def test_the_token_user_is_the_whole_user(agent: User) -> None:
    issued = token_create(user=agent)
    user = token_user(issued.text)
    assert user is not None
    assert user.date_joined == agent.date_joined
    assert user.check_password("wrong") is False
    reference = User.objects.get(pk=agent.pk)
    for field in User._meta.concrete_fields:
        assert getattr(user, field.attname) == getattr(reference, field.attname), field.name
    assert user._state.adding is False and user._state.db == reference._state.db


def test_the_token_statement_is_compiled_once_per_process(agent: User) -> None:
    """Every API request and MCP tool call authenticates: after the first, no queryset is
    compiled to SQL for it (building and compiling it cost more than the database's answer)."""
    issued = token_create(user=agent)
    assert token_user(issued.text) == agent  # compiles, and records the first use
    compiled = []
    original = SQLCompiler.as_sql

    def counting(self: SQLCompiler, *args: Any, **kwargs: Any) -> Any:
        compiled.append(self.query.model)
        return original(self, *args, **kwargs)

    with (
        mock.patch.object(SQLCompiler, "as_sql", counting),
        CaptureQueriesContext(connection) as queries,
    ):
        assert token_user(issued.text) == agent
        assert token_user("rca_0123456789ab_" + "x" * 43) is None
    assert compiled == []
    assert len(queries) == 2


def test_a_deployment_wide_agent_stays_deployment_wide(agent: User) -> None:
    user = token_user(token_create(user=agent).text)
    assert user is not None
    assert tenants_of(user) is None


@pytest.mark.parametrize("text", ["", "rca_0123456789ab_" + "x" * 43, "not a token"])
def test_unknown_or_malformed_tokens_act_as_no_one(agent: User, text: str) -> None:
    token_create(user=agent)
    assert token_user(text) is None


def test_revoked_forged_and_inactive_act_as_no_one(agent: User) -> None:
    valid = token_create(user=agent)
    revoked = token_create(user=agent)
    token_revoke(token=revoked.token)
    forged = valid.text[:-4] + ("AAAA" if not valid.text.endswith("AAAA") else "BBBB")
    assert (token_user(valid.text), token_user(revoked.text), token_user(forged)) == (
        agent,
        None,
        None,
    )
    agent.is_active = False
    agent.save()
    assert token_user(valid.text) is None


def test_the_backend_answers_only_token_credentials(agent: User) -> None:
    """A Django authentication backend: other credentials (a login's) are not its to answer,
    and a token is no session, so it restores no session's user."""
    backend = TokenBackend()
    assert backend.authenticate(None) is None
    assert backend.authenticate(None, token=token_create(user=agent).text) == agent
    assert backend.get_user(agent.pk) is None


def test_the_api_and_mcp_authenticate_through_the_one_backend(
    agent: User, demo: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    authenticate = TokenBackend.authenticate

    def spy(self: TokenBackend, request: Any, token: str | None = None) -> User | None:
        seen.append("mcp" if request is None else "http")
        return authenticate(self, request, token=token)

    monkeypatch.setattr(TokenBackend, "authenticate", spy)
    text = token_create(user=agent).text
    assert (
        BearerClient(text).post_json("/api/v1/knowledge/search", search_body()).status_code == 200
    )
    assert not call(text, "search_knowledge", search_body()).is_error
    assert seen == ["http", "mcp"]


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


def test_a_search_reads_identity_permissions_and_tenants_in_two_statements(
    agent: User, searching: Callable[[], int]
) -> None:
    """The token with its user (one statement), then the permissions with the memberships (one
    statement), each once per request however many checks the request makes."""
    with CaptureQueriesContext(connection) as queries:
        assert searching() == 200
    statements = [query["sql"] for query in queries.captured_queries]
    touching_auth = [sql for sql in statements if "auth_" in sql or "tenantmembership" in sql]
    assert len(touching_auth) == 2, statements
