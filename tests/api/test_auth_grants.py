"""One query loads an agent's permissions and tenants for the checks of a request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentapi.auth import grants_loaded
from reviewconsole.models import TenantMembership
from reviewconsole.permissions import holds
from reviewconsole.tenancy import may_access, tenants_of

pytestmark = pytest.mark.django_db


def test_grants_answer_permission_and_tenant_checks_without_more_queries(agent: User) -> None:
    TenantMembership.objects.create(user=agent, tenant="teahouse")
    fresh = User.objects.get(pk=agent.pk)

    with CaptureQueriesContext(connection) as loading:
        grants_loaded(fresh)
    with CaptureQueriesContext(connection) as checking:
        allowed = holds(fresh, "knowledge.search_knowledge")
        refused = holds(fresh, "knowledge.approve_document")
        member = may_access(fresh, "teahouse")
        stranger = may_access(fresh, "other-tenant")

    assert len(loading) == 1
    assert len(checking) == 0
    assert (allowed, refused, member, stranger) == (True, False, True, False)
    reference = User.objects.get(pk=agent.pk)
    assert fresh.get_all_permissions() == reference.get_all_permissions()
    assert tenants_of(fresh) == tenants_of(reference)


def test_a_deployment_wide_agent_stays_deployment_wide(agent: User) -> None:
    fresh = User.objects.get(pk=agent.pk)
    grants_loaded(fresh)

    assert tenants_of(fresh) is None
