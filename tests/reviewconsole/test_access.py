"""A user's access (permissions and memberships) read in one statement: the rule is Django's."""

from __future__ import annotations

import pytest
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission, User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewconsole import permissions as P
from reviewconsole.access import AccessBackend, access_of, forget
from reviewconsole.access import names_forget as forget_names
from reviewconsole.errors import PermissionRefused
from reviewconsole.models import TenantMembership
from reviewconsole.tenancy import may_access, tenants_of

# A few real permissions, so labels come from their content types as Django builds them.
CODENAMES = ("view_case", "change_case", "view_document", "add_tenant", "view_user", "view_event")
TENANTS = ("teahouse", "harbour", "orchard")


class Rollback(Exception):
    pass


def _permissions() -> list[Permission]:
    found = list(Permission.objects.filter(codename__in=CODENAMES).order_by("codename"))
    assert len(found) == len(CODENAMES)
    return found


@pytest.mark.django_db
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    direct=st.sets(st.sampled_from(range(len(CODENAMES)))),
    groups=st.lists(st.sets(st.sampled_from(range(len(CODENAMES)))), max_size=3),
    tenants=st.sets(st.sampled_from(TENANTS)),
    superuser=st.booleans(),
    active=st.booleans(),
)
def test_the_one_statement_grants_what_djangos_backend_grants(
    direct: set[int], groups: list[set[int]], tenants: set[str], superuser: bool, active: bool
) -> None:
    pool = _permissions()
    try:
        with transaction.atomic():
            user = User.objects.create(username="someone", is_superuser=superuser, is_active=active)
            user.user_permissions.set([pool[i] for i in direct])
            for number, chosen in enumerate(groups):
                group = Group.objects.create(name=f"group-{number}")
                group.permissions.set([pool[i] for i in chosen])
                user.groups.add(group)
            TenantMembership.objects.bulk_create(
                TenantMembership(user=user, tenant=name) for name in tenants
            )
            expected = ModelBackend().get_all_permissions(User.objects.get(pk=user.pk))
            fresh = User.objects.get(pk=user.pk)
            assert AccessBackend().get_all_permissions(fresh) == expected
            assert tenants_of(fresh) == (frozenset(tenants) or None)
            for codename in CODENAMES:
                label = next(p for p in pool if p.codename == codename)
                name = f"{label.content_type.app_label}.{codename}"
                assert fresh.has_perm(name) == (name in expected)
            raise Rollback
    except Rollback:
        pass


@pytest.mark.django_db
def test_a_request_reads_permissions_and_memberships_once() -> None:
    user = User.objects.create(username="member")
    user.user_permissions.add(Permission.objects.get(codename="view_case"))
    TenantMembership.objects.create(user=user, tenant="teahouse")
    P.holds(User.objects.get(pk=user.pk), "experience.view_case")  # names: once per process
    fresh = User.objects.get(pk=user.pk)
    with CaptureQueriesContext(connection) as read:
        assert P.holds(fresh, "experience.view_case")
        assert not P.holds(fresh, "experience.change_case")
        assert may_access(fresh, "teahouse") and not may_access(fresh, "harbour")
        P.require(fresh, "experience.view_case", "teahouse")
    assert len(read.captured_queries) == 1


@pytest.mark.django_db
def test_a_membership_change_is_seen_after_forget_and_by_a_fresh_user() -> None:
    user = User.objects.create(username="member")
    assert tenants_of(user) is None  # no memberships: deployment-wide
    TenantMembership.objects.create(user=user, tenant="teahouse")
    assert tenants_of(user) is None  # kept on the object, as Django keeps permissions
    assert tenants_of(User.objects.get(pk=user.pk)) == frozenset({"teahouse"})
    forget(user)
    assert access_of(user).tenants == frozenset({"teahouse"})


def test_no_one_has_access() -> None:
    from django.contrib.auth.models import AnonymousUser

    assert access_of(None).permissions == frozenset()
    assert access_of(AnonymousUser()).tenants == frozenset()


@pytest.mark.django_db
def test_a_scope_check_reads_access_and_the_tenant_in_one_statement() -> None:
    """A request's first scope check (a deployment-wide agent's search) reads the permissions,
    the memberships and whether the named tenant exists in one round trip; the refusals keep
    their order: the permission first, then an unknown tenant."""
    from django.utils import timezone

    from reviewconsole.models import Tenant
    from reviewconsole.tenancy import UnknownTenant

    Tenant.objects.get_or_create(name="teahouse", defaults={"created_at": timezone.now()})
    agent = User.objects.create(username="wide-agent")
    agent.user_permissions.add(Permission.objects.get(codename="view_case"))
    P.holds(User.objects.get(pk=agent.pk), "experience.view_case")  # names: once per process

    fresh = User.objects.get(pk=agent.pk)
    with CaptureQueriesContext(connection) as read:
        P.require_scope(fresh, "experience.view_case", "teahouse")
    assert len(read.captured_queries) == 1

    fresh = User.objects.get(pk=agent.pk)
    with pytest.raises(UnknownTenant) as unknown:
        P.require_scope(fresh, "experience.view_case", "nowhere")
    assert unknown.value.field == "tenant"

    fresh = User.objects.get(pk=agent.pk)
    with pytest.raises(PermissionRefused):
        P.require_scope(fresh, "experience.change_case", "nowhere")


@pytest.mark.django_db
def test_a_permission_added_after_the_names_were_read_is_named() -> None:
    """The names of permissions are read once per process; a permission created since (a
    migration in another process) is named at the first check that meets its id."""
    from django.contrib.contenttypes.models import ContentType

    user = User.objects.create(username="member")
    user.user_permissions.add(Permission.objects.get(codename="view_case"))
    assert P.holds(User.objects.get(pk=user.pk), "experience.view_case")
    added = Permission.objects.create(
        codename="audit_widgets",
        name="Can audit widgets",
        content_type=ContentType.objects.get(app_label="experience", model="case"),
    )
    user.user_permissions.add(added)
    assert P.holds(User.objects.get(pk=user.pk), "experience.audit_widgets")
    forget_names()
    assert P.holds(User.objects.get(pk=user.pk), "experience.audit_widgets")
