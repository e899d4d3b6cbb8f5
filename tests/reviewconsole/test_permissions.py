"""One home for permission names and for the refusal every service makes: reviewconsole.permissions.

The apps once each defined the names again and had their own ``_require``/``_require_tenant``
(knowledge, curation, the agent API); these tests pin the surviving behaviour and keep the
copies from coming back.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Permission, User

import agentapi.auth
import agentapi.operations
import agentapi.services
import knowledge.services
import reviewconsole.views
from reviewconsole import permissions as P
from reviewconsole.errors import PermissionRefused
from reviewconsole.permissions import NOT_PERMITTED, require
from reviewconsole.roles import ROLE_PERMISSIONS, Role
from reviewconsole.services import user_set_role
from reviewconsole.tenancy import NOT_IN_TENANT, NOT_IN_TENANT_MESSAGE

pytestmark = pytest.mark.django_db

BASE = Path(settings.BASE_DIR)
# The only modules that may spell a permission name: where the names are, and where roles get them.
HOMES = {BASE / "reviewconsole" / "permissions.py", BASE / "reviewconsole" / "roles.py"}
NOT_SOURCE = {".venv", ".git", "tests", "migrations", "node_modules", "__pycache__", "static"}


def permission_names() -> set[str]:
    """Every ``app_label.codename`` Django knows, and every constant of the permission module."""
    stored = {
        f"{app_label}.{codename}"
        for app_label, codename in Permission.objects.values_list(
            "content_type__app_label", "codename"
        )
    }
    constants = {
        value
        for name, value in vars(P).items()
        if name.isupper() and isinstance(value, str) and "." in value
    }
    return stored | constants


def source_modules() -> list[Path]:
    return sorted(
        path
        for path in BASE.rglob("*.py")
        if not set(path.relative_to(BASE).parts) & NOT_SOURCE and path not in HOMES
    )


def test_roles_name_only_permissions_of_the_module() -> None:
    constants = {value for value in vars(P).values() if isinstance(value, str)}
    for names in ROLE_PERMISSIONS.values():
        assert set(names) <= constants


def test_no_module_outside_the_permission_module_spells_a_permission_name() -> None:
    names = permission_names()
    assert P.REVIEW_CASE in names and "experience.change_case" in names
    modules = source_modules()
    assert BASE / "knowledge" / "services.py" in modules
    offenders = [
        f"{path.relative_to(BASE)}:{node.lineno} {node.value}"
        for path in modules
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    assert not offenders, "import these from reviewconsole.permissions: " + ", ".join(offenders)


# Django's permission caches on a user object, and its tables: Django writes and reads these.
DJANGOS_CACHES = {"_perm_cache", "_user_perm_cache", "_group_perm_cache"}
DJANGOS_TABLES = ("auth_user", "auth_group", "auth_permission", "django_content_type")


def test_no_module_writes_djangos_permission_caches_or_queries_its_tables() -> None:
    """Permissions come from Django's machinery (``User.has_perm``): a hand-written lookup that
    names Django's tables and fills its caches drifts from Django's rule (issue 25, item 4)."""
    offenders = []
    for path in source_modules() + sorted(HOMES):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            written = (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and node.attr in DJANGOS_CACHES
            )
            named = isinstance(node, ast.Constant) and (
                node.value in DJANGOS_CACHES
                or (isinstance(node.value, str) and any(t in node.value for t in DJANGOS_TABLES))
            )
            if written or named:
                offenders.append(f"{path.relative_to(BASE)}:{getattr(node, 'lineno', '?')}")
    assert not offenders, offenders


def test_the_local_refusal_copies_are_gone() -> None:
    for module, names in {
        knowledge.services: ("_require", "_require_tenant"),
        agentapi.operations: ("require_tenant", "SEARCH_PERMISSION", "USE_PERMISSION"),
        # One token validator (agentapi.auth.token_user), Django's permission lookup (issue 25).
        agentapi.auth: ("request_user",),
        agentapi.services: ("token_user",),
        P: ("holds_any",),
        reviewconsole.views: ("_require_deployment_wide",),
    }.items():
        assert [name for name in names if hasattr(module, name)] == []
    assert vars(agentapi.operations)["require"] is require
    with pytest.raises(ImportError):
        __import__("curation.services")


@pytest.fixture
def limited(db: None) -> User:
    return user_set_role(username="lena", role=Role.REVIEWER, tenants=["acme"])


def test_require_refuses_without_the_permission(reviewer: User) -> None:
    with pytest.raises(PermissionRefused) as refused:
        require(reviewer, P.ADD_DOCUMENT)
    assert refused.value.unmet == NOT_PERMITTED
    assert refused.value.message == f"this needs the permission {P.ADD_DOCUMENT}"


def test_require_keeps_the_callers_message_and_unmet_name(reviewer: User) -> None:
    with pytest.raises(PermissionRefused) as refused:
        require(reviewer, P.ADD_DOCUMENT, message="saving needs the operator role", unmet="nope")
    assert (refused.value.message, refused.value.unmet) == (
        "saving needs the operator role",
        "nope",
    )


@pytest.mark.parametrize("actor", [None, AnonymousUser()])
def test_require_refuses_no_one(actor: Any) -> None:
    with pytest.raises(PermissionRefused) as refused:
        require(actor, P.SEARCH_KNOWLEDGE)
    assert refused.value.unmet == NOT_PERMITTED


def test_require_refuses_an_inactive_user(reviewer: User) -> None:
    reviewer.is_active = False
    with pytest.raises(PermissionRefused):
        require(reviewer, P.SEARCH_KNOWLEDGE)


def test_require_accepts_one_of_several(agent: User) -> None:
    require(agent, (P.PROPOSE_CASE, P.ADD_CASE))
    require(agent, (P.ADD_CASE, P.PROPOSE_CASE))
    with pytest.raises(PermissionRefused) as refused:
        require(agent, (P.ADD_CASE, P.REVIEW_CASE))
    assert refused.value.message == f"this needs the permission {P.ADD_CASE} or {P.REVIEW_CASE}"


def test_require_refuses_another_tenant(limited: User) -> None:
    require(limited, P.REVIEW_CASE, "acme")
    with pytest.raises(PermissionRefused) as refused:
        require(limited, P.REVIEW_CASE, "other-co", message="not this one")
    # The tenant refusal is the same sentence on every path (curation once left out "tenant").
    assert refused.value.unmet == NOT_IN_TENANT
    assert refused.value.message == f"tenant 'other-co' {NOT_IN_TENANT_MESSAGE}"


def test_the_permission_is_checked_before_the_tenant(limited: User) -> None:
    with pytest.raises(PermissionRefused) as refused:
        require(limited, P.ADD_DOCUMENT, "other-co")
    assert refused.value.unmet == NOT_PERMITTED


def test_a_deployment_wide_user_may_use_every_tenant(reviewer: User) -> None:
    require(reviewer, P.REVIEW_CASE, "any-tenant")


def test_what_spans_every_tenant_refuses_a_tenant_limited_user(
    limited: User, reviewer: User
) -> None:
    require(reviewer, P.REVIEW_CASE, deployment_wide=True)
    with pytest.raises(PermissionRefused) as refused:
        require(limited, P.REVIEW_CASE, deployment_wide=True, message="not for you")
    assert (refused.value.message, refused.value.unmet) == ("not for you", NOT_PERMITTED)
    with pytest.raises(PermissionRefused) as refused:
        require(limited, P.REVIEW_CASE, deployment_wide=True)
    assert refused.value.message == P.DEPLOYMENT_WIDE_ONLY
    assert P.permitted(reviewer, P.REVIEW_CASE, deployment_wide=True)
    assert not P.permitted(limited, P.REVIEW_CASE, deployment_wide=True)
    assert not P.permitted(limited, P.REVIEW_CASE, "other-co")


def test_refusals_lists_every_unmet_condition_in_order(limited: User) -> None:
    found = list(P.refusals(limited, P.ADD_DOCUMENT, "other-co", deployment_wide=True))
    assert [refusal.unmet for refusal in found] == [NOT_PERMITTED, NOT_IN_TENANT, NOT_PERMITTED]


def test_a_superuser_holds_every_permission(db: None) -> None:
    root = User.objects.create_superuser("root", password="x")
    require(root, (P.REVOKE_APITOKEN,))


def test_the_permission_check_reads_djangos_permissions_once_per_user(
    agent: User, django_assert_num_queries: Callable[[int], Any]
) -> None:
    """Django's ``ModelBackend`` rule answers (``reviewconsole.access.AccessBackend``): the
    user's own and its groups' permissions, with the memberships, in one statement read once per
    user object (a request loads its user afresh, so a change acts at the next request)."""
    P.holds(User.objects.get(pk=agent.pk), P.USE_EXPERIENCE)  # the process reads the names once
    user = User.objects.get(pk=agent.pk)
    with django_assert_num_queries(1):
        require(user, (P.USE_EXPERIENCE,))
    with django_assert_num_queries(0):
        require(user, P.SEARCH_KNOWLEDGE, None)
