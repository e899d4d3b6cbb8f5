"""The tenant registry (issue 23, items 6, 7 and 9).

Tenants are created explicitly (``add_tenant``, the admin) or by a deployment-wide user's import
naming one, each audited as ``reviewconsole.tenant.create`` in the transaction that created it;
memberships and everyone else's inputs name a known tenant or are refused naming the field.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from curation.threads import thread_import
from experience.review.imports import items_import
from knowledge.services import documents_import
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event, Tenant, TenantMembership
from reviewconsole.roles import Role
from reviewconsole.services import TENANT_CREATE_REFUSED, tenant_create, user_create, user_set_role
from reviewconsole.tenancy import UNKNOWN_TENANT_MESSAGE, tenant_ensure
from tests.conftest import PASSWORD
from tests.helpers import run_json

pytestmark = pytest.mark.django_db

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
NEW = "jasmine-co"  # named by no fixture: new to the registry


def creations() -> list[Event]:
    return list(Event.objects.filter(action=Action.TENANT_CREATE).order_by("id"))


def limited(name: str, role: str, *tenants: str) -> User:
    return user_set_role(username=name, role=role, password=PASSWORD, tenants=list(tenants))


def console(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def document(tenant: str, **changes: Any) -> dict[str, Any]:
    first = json.loads((FIXTURES / "knowledge.json").read_text(encoding="utf-8"))[0]
    return {**first, "tenant": tenant, "doc_key": f"{tenant}-rule", **changes}


def case(tenant: str) -> dict[str, Any]:
    items = json.loads((FIXTURES / "experience.json").read_text(encoding="utf-8"))
    first = copy.deepcopy(next(item for item in items if item["type"] == "case"))
    first["scope"]["tenant"] = tenant
    unchecked: dict[str, Any] = _unchecked(first)
    return unchecked


def _unchecked(value: Any) -> Any:
    """The item without ``verified`` flags: an import's checks need the verify permission."""
    if isinstance(value, dict):
        return {k: _unchecked(v) for k, v in value.items() if k != "verified"}
    if isinstance(value, list):
        return [_unchecked(v) for v in value]
    return value


def thread(tenant: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / "threads" / "coupon-store-scope.json").read_text("utf-8"))
    return {**data, "tenant": tenant, "id": f"{tenant}-thread-1"}


# --- memberships ------------------------------------------------------------------------------


def test_add_user_refuses_a_membership_in_a_tenant_that_does_not_exist() -> None:
    events = Event.objects.count()
    status, result = run_json("add_user", "xavier", "--role", "reviewer", "--tenant", "nosuch")
    assert status != 0
    assert result == {
        "ok": False,
        "error": f"'nosuch' {UNKNOWN_TENANT_MESSAGE}",
        "field": "tenant",
    }
    assert not User.objects.filter(username="xavier").exists()
    assert not TenantMembership.objects.filter(tenant="nosuch").exists()
    assert Event.objects.count() == events


def test_add_user_accepts_a_known_tenant() -> None:
    status, _ = run_json("add_user", "xavier", "--role", "reviewer", "--tenant", "teahouse")
    assert status == 0
    assert TenantMembership.objects.filter(user__username="xavier", tenant="teahouse").exists()


def test_the_admins_membership_field_refuses_an_unknown_tenant(admin_user: User) -> None:
    with pytest.raises(ValidationFailure) as refused:
        user_create(
            actor=admin_user, username="yara", role=Role.REVIEWER, password=None, tenants=["nosuch"]
        )
    assert refused.value.field == "tenants"
    assert not User.objects.filter(username="yara").exists()


def test_the_admins_user_form_shows_the_refusal_and_writes_nothing(admin_user: User) -> None:
    data = {
        "username": "yara",
        "role": Role.REVIEWER,
        "tenant_memberships-TOTAL_FORMS": "1",
        "tenant_memberships-INITIAL_FORMS": "0",
        "tenant_memberships-0-tenant": "nosuch",
    }
    response = console(admin_user).post(reverse("admin:auth_user_add"), data)
    assert response.status_code == 200  # the form again, with the error
    assert not User.objects.filter(username="yara").exists()


# --- explicit creation: add_tenant and the admin ----------------------------------------------


def test_add_tenant_from_the_shell_creates_and_audits_once() -> None:
    status, result = run_json("add_tenant", NEW)
    assert (status, result) == (0, {"tenant": NEW, "created": True})
    assert Tenant.objects.get(name=NEW).created_by is None
    [event] = creations()
    assert (event.actor_name, event.target) == ("system", f"tenant:{NEW}")

    status, result = run_json("add_tenant", NEW)
    assert (status, result) == (0, {"tenant": NEW, "created": False})
    assert len(creations()) == 1


def test_add_tenant_as_a_deployment_wide_admin_records_the_admin(admin_user: User) -> None:
    status, _ = run_json("add_tenant", NEW, "--as", admin_user.username)
    assert status == 0
    assert Tenant.objects.get(name=NEW).created_by == admin_user
    assert creations()[0].actor == admin_user


@pytest.mark.parametrize("who", ["tenant-limited admin", "reviewer", "operator"])
def test_add_tenant_is_for_deployment_wide_admins_only(who: str) -> None:
    user = {
        "tenant-limited admin": lambda: limited("ada-tea", Role.ADMIN, "teahouse"),
        "reviewer": lambda: limited("rita2", Role.REVIEWER),
        "operator": lambda: limited("olivia2", Role.OPERATOR),
    }[who]()
    status, result = run_json("add_tenant", NEW, "--as", user.username)
    assert status != 0 and result["ok"] is False
    assert result["error"] == TENANT_CREATE_REFUSED
    assert not Tenant.objects.filter(name=NEW).exists() and not creations()


@pytest.mark.parametrize("name", ["", "bad tenant!", "any"])
def test_add_tenant_refuses_a_bad_name_naming_the_tenant(name: str) -> None:
    status, result = run_json("add_tenant", name)
    assert status != 0 and result["field"] == "tenant"
    assert not creations()


def test_a_deployment_wide_admin_adds_a_tenant_in_the_admin(admin_user: User) -> None:
    response = console(admin_user).post(reverse("admin:reviewconsole_tenant_add"), {"name": NEW})
    assert response.status_code == 302
    assert Tenant.objects.get(name=NEW).created_by == admin_user
    assert [e.actor for e in creations()] == [admin_user]


def test_tenants_are_never_changed_or_deleted_in_the_admin(admin_user: User) -> None:
    tenant = Tenant.objects.get(name="teahouse")
    client = console(admin_user)
    delete = client.post(reverse("admin:reviewconsole_tenant_delete", args=[tenant.pk]))
    assert delete.status_code == 403
    client.post(reverse("admin:reviewconsole_tenant_change", args=[tenant.pk]), {"name": "x"})
    assert Tenant.objects.filter(pk=tenant.pk, name="teahouse").exists()


def test_a_tenant_limited_admin_sees_its_own_tenants_and_adds_none() -> None:
    client = console(limited("ada-tea", Role.ADMIN, "teahouse"))
    listing = client.get(reverse("admin:reviewconsole_tenant_changelist"))
    assert listing.status_code == 200
    assert [t.name for t in listing.context["cl"].result_list] == ["teahouse"]
    other = Tenant.objects.get(name="milkbar")
    assert client.get(reverse("admin:reviewconsole_tenant_change", args=[other.pk])).status_code
    assert client.post(reverse("admin:reviewconsole_tenant_add"), {"name": NEW}).status_code == 403
    assert not Tenant.objects.filter(name=NEW).exists()


def test_tenant_create_service_refuses_a_tenant_limited_admin() -> None:
    with pytest.raises(PermissionRefused):
        tenant_create(name=NEW, actor=limited("ada-tea", Role.ADMIN, "teahouse"))


# --- imports ----------------------------------------------------------------------------------


def test_a_deployment_wide_operators_knowledge_import_creates_the_tenant_audited(
    operator: User,
) -> None:
    documents_import(items=[document(NEW)], actor=operator)
    assert Tenant.objects.get(name=NEW).created_by == operator
    [event] = creations()
    assert event.actor == operator
    # In the import's transaction: the creation comes before the document's own event.
    created = Event.objects.get(action=Action.DOCUMENT_CREATE, target__contains=f"{NEW}-rule")
    assert event.id < created.id


def test_a_refused_import_creates_no_tenant(operator: User) -> None:
    broken = document(NEW, doc_key=f"{NEW}-second", title="")
    with pytest.raises(ValidationFailure):
        documents_import(items=[document(NEW), broken], actor=operator)
    assert not Tenant.objects.filter(name=NEW).exists() and not creations()


def test_a_deployment_wide_operators_case_import_creates_the_tenant(operator: User) -> None:
    items_import(items=[case(NEW)], actor=operator)
    assert Tenant.objects.filter(name=NEW).exists()
    assert [e.actor for e in creations()] == [operator]


def test_a_deployment_wide_operators_thread_import_creates_the_tenant(operator: User) -> None:
    thread_import(data=thread(NEW), actor=operator)
    assert Tenant.objects.filter(name=NEW).exists()
    assert [e.actor for e in creations()] == [operator]


def test_import_knowledge_names_the_tenant_when_a_tenant_limited_operator_names_an_unknown_one(
    tmp_path: Path,
) -> None:
    limited("olivia-tea", Role.OPERATOR, "teahouse")
    path = tmp_path / "docs.json"
    path.write_text(json.dumps([document(NEW)]), encoding="utf-8")
    status, result = run_json("import_knowledge", str(path), "--as", "olivia-tea")
    assert status != 0 and result["field"] == "[0].tenant"
    assert not Tenant.objects.filter(name=NEW).exists() and not creations()


def test_a_tenant_limited_operators_case_import_cannot_create_a_tenant() -> None:
    with pytest.raises(ValidationFailure) as refused:
        items_import(items=[case(NEW)], actor=limited("olivia-tea", Role.OPERATOR, "teahouse"))
    assert refused.value.field == "[0].scope.tenant"
    assert not Tenant.objects.filter(name=NEW).exists()


def test_a_console_document_names_a_known_tenant(operator: User) -> None:
    from knowledge.schema import parse_document
    from knowledge.services import document_add

    content = parse_document(document(NEW)).content
    with pytest.raises(ValidationFailure) as refused:
        document_add(content=content, actor=operator)
    assert refused.value.field == "tenant"
    assert not Tenant.objects.filter(name=NEW).exists()


def test_tenant_ensure_is_idempotent(operator: User) -> None:
    from django.db import transaction

    with transaction.atomic():
        first, created = tenant_ensure(name=NEW, actor=operator)
        again, created_again = tenant_ensure(name=NEW, actor=operator)
    assert (created, created_again) == (True, False) and first.pk == again.pk
    assert len(creations()) == 1


# --- item 7: background task results are for deployment-wide admins --------------------------


@pytest.fixture
def task_result(db: None) -> DBTaskResult[Any, Any]:
    from django.utils import timezone

    return DBTaskResult.objects.create(
        task_path="curation.tasks.case_index_task",
        args_kwargs={"args": [], "kwargs": {"case_id": "case:" + "1" * 64}},
        enqueued_at=timezone.now(),
        backend_name="default",
        queue_name="default",
        priority=0,
    )


def test_a_tenant_limited_admin_cannot_read_task_results(
    task_result: DBTaskResult[Any, Any],
) -> None:
    client = console(limited("ada-tea", Role.ADMIN, "teahouse"))
    changelist = client.get(reverse("admin:django_tasks_database_dbtaskresult_changelist"))
    detail = client.get(
        reverse("admin:django_tasks_database_dbtaskresult_change", args=[task_result.pk])
    )
    assert changelist.status_code == 403 and detail.status_code == 403
    index = client.get(reverse("admin:index")).content.decode()
    assert "dbtaskresult" not in index.lower()


def test_a_deployment_wide_admin_reads_task_results(
    admin_user: User, task_result: DBTaskResult[Any, Any]
) -> None:
    client = console(admin_user)
    assert (
        client.get(reverse("admin:django_tasks_database_dbtaskresult_changelist")).status_code
        == 200
    )


# --- item 9: forms start with one of the user's own tenants -----------------------------------


@pytest.mark.parametrize(
    "url", ["investigations:investigation-new", "knowledge:search-preview"], ids=["inv", "search"]
)
def test_forms_prefill_one_of_the_users_own_tenants(url: str, reviewer: User) -> None:
    milk = limited("rita-milk", Role.OPERATOR, "milkbar")
    form = console(milk).get(reverse(url)).context["form"]
    assert form.initial["tenant"] == "milkbar"
    assert form.initial["brand"] == ""
    wide = limited("olivia-wide", Role.OPERATOR)
    assert console(wide).get(reverse(url)).context["form"].initial["tenant"] == (
        settings.DEMO_TENANT
    )
    both = limited("olivia-both", Role.OPERATOR, "milkbar", settings.DEMO_TENANT)
    assert console(both).get(reverse(url)).context["form"].initial["tenant"] == (
        settings.DEMO_TENANT
    )
