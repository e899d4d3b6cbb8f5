"""``search_knowledge`` checks its actor itself: the search permission, and the scope's tenant
(one the actor may use, and one that exists), whoever calls it (issue 25, item 3). Before, it
took no actor and each caller had to remember the tenant check."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User

from knowledge.domain import NEEDS_CONTEXT
from knowledge.search import SEARCH_REFUSED, KnowledgeContext, search_knowledge
from knowledge.services import documents_import
from reviewconsole.errors import PermissionRefused
from reviewconsole.permissions import NOT_PERMITTED
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from reviewconsole.tenancy import NOT_IN_TENANT, UnknownTenant, forbidden_tenant_message
from tests.helpers import run_json, tenants_exist
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db

OTHER = "riverside"
AT = datetime(2026, 9, 10, tzinfo=UTC)


def context(tenant: str | None = settings.DEMO_TENANT) -> KnowledgeContext:
    return KnowledgeContext(
        tenant=tenant,
        brand=settings.DEMO_BRAND,
        store="store-100",
        campaign="campaign-x",
        occurred_at=AT,
        known_at=AT,
    )


@pytest.fixture
def both_tenants(operator: User) -> None:
    documents_import(
        items=[document(), document(doc_key="rule-o", tenant=OTHER, text="其他租户的优惠券规则")],
        actor=operator,
    )


@pytest.fixture
def other_agent(both_tenants: None) -> User:
    return user_set_role(username="agent-riverside", role=Role.AGENT, tenants=[OTHER])


def test_a_tenant_the_actor_may_not_use_is_refused(other_agent: User) -> None:
    with pytest.raises(PermissionRefused) as refused:
        search_knowledge("优惠券", context(), actor=other_agent)
    assert refused.value.unmet == NOT_IN_TENANT
    assert refused.value.message == forbidden_tenant_message(settings.DEMO_TENANT)
    # Its own tenant it searches as usual.
    assert search_knowledge("优惠券", context(OTHER), actor=other_agent)["evidence"]


@pytest.mark.parametrize("who", ["admin_user", "nobody", "anonymous"])
def test_an_actor_without_the_search_permission_is_refused(
    both_tenants: None, request: pytest.FixtureRequest, who: str
) -> None:
    actor = {"nobody": None, "anonymous": AnonymousUser()}.get(who)
    if who == "admin_user":
        actor = request.getfixturevalue("admin_user")  # admins do not search
    with pytest.raises(PermissionRefused) as refused:
        search_knowledge("优惠券", context(), actor=actor)
    assert (refused.value.message, refused.value.unmet) == (SEARCH_REFUSED, NOT_PERMITTED)


def test_an_unknown_tenant_is_refused_naming_the_field(agent: User, both_tenants: None) -> None:
    with pytest.raises(UnknownTenant) as unknown:
        search_knowledge("优惠券", context("teahous"), actor=agent)
    assert unknown.value.field == "tenant"


def test_a_scope_without_a_tenant_needs_context_and_reads_nothing(other_agent: User) -> None:
    result = search_knowledge("优惠券", context(None), actor=other_agent)
    assert (result["status"], result["missing"]) == (NEEDS_CONTEXT, ["tenant"])


def test_research_searches_as_the_named_user(other_agent: User) -> None:
    tenants_exist(settings.DEMO_TENANT)
    args = ("research", "优惠券", "--store", "store-100", "--campaign", "campaign-x")
    times = ("--at", AT.isoformat(), "--known-at", AT.isoformat())
    status, result = run_json(*args, *times, "--as", other_agent.get_username())
    assert status != 0
    assert result["unmet"] == [NOT_IN_TENANT]
    status, result = run_json(*args, *times)  # the system agent: deployment-wide
    assert status == 0 and result["evidence"]
