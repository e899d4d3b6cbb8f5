"""The console's user pages: an admin lists, creates and changes users in the console's own pages,
through the user services (their rules and their audit events), never the stock admin's."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import OWN_ROLE, user_role, user_set_role
from tests.ui.conftest import csrf_client, csrf_token

NOW = datetime(2026, 9, 20, 2, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def now(frozen_clock: Callable[[datetime], Any]) -> datetime:
    frozen_clock(NOW)
    return NOW


def _post(client: Client, url: str, data: dict[str, Any]) -> Any:
    return client.post(url, {**data, "csrfmiddlewaretoken": csrf_token(client)})


@pytest.fixture
def limited_admin(db: None) -> User:
    """An admin of tenant teahouse only."""
    return user_set_role(
        username="tina",
        role=Role.ADMIN,
        password="correct-horse-battery-staple",
        tenants=["teahouse"],
    )


def test_the_list_shows_role_and_tenants_in_the_consoles_format(
    admin_user: User, reviewer: User
) -> None:
    user_set_role(username="rita", role=Role.REVIEWER, tenants=["teahouse", "milkbar"])
    client = Client()
    client.force_login(admin_user)

    html = client.get(reverse("user-list")).content.decode()

    row = html.split(">rita</a>", 1)[1].split("</tr>", 1)[0]
    assert "reviewer" in row and "milkbar, teahouse" in row
    # The console's format: date and minutes, as every list of the console shows them.
    assert re.search(r"<time datetime=\"[^\"]+\">\d{4}-\d{2}-\d{2} \d{2}:\d{2}</time>", row)
    assert "never" in row  # rita has not logged in
    # Staff and superuser follow from the role: no columns of them.
    head = html.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert "Staff" not in head and "Superuser" not in head
    # Times as the console shows them: minutes, no seconds, no "a.m.".
    assert "a.m." not in row and "p.m." not in row


def test_an_admin_creates_a_user_audited(admin_user: User) -> None:
    client = csrf_client(admin_user)
    response = _post(
        client,
        reverse("user-new"),
        {"username": "ray", "email": "ray@example.test", "role": "reviewer", "tenants": "teahouse"},
    )

    assert response.status_code in (302, 303)
    ray = User.objects.get(username="ray")
    assert user_role(ray) == Role.REVIEWER and ray.is_staff and not ray.is_superuser
    assert list(ray.tenant_memberships.values_list("tenant", flat=True)) == ["teahouse"]
    event = Event.objects.get(action=Action.USER_CREATE)
    assert (event.actor, event.target) == (admin_user, "user:ray")


def test_a_bad_username_is_named_and_nothing_is_written(admin_user: User) -> None:
    client = csrf_client(admin_user)
    response = _post(client, reverse("user-new"), {"username": "bad name!", "role": "reviewer"})

    assert response.status_code == 422
    form = response.context["form"]
    assert "username" in form.errors
    assert not User.objects.filter(username="bad name!").exists()
    assert not Event.objects.filter(action=Action.USER_CREATE).exists()


def test_an_admin_changes_role_and_tenants_and_deactivates(
    admin_user: User, reviewer: User
) -> None:
    client = csrf_client(admin_user)
    url = reverse("user-edit", args=[reviewer.username])
    assert client.get(url).status_code == 200

    response = _post(client, url, {"role": "operator", "tenants": ["milkbar"]})

    assert response.status_code in (302, 303)
    reviewer.refresh_from_db()
    assert user_role(reviewer) == Role.OPERATOR and not reviewer.is_active
    assert list(reviewer.tenant_memberships.values_list("tenant", flat=True)) == ["milkbar"]
    actions = set(Event.objects.filter(target="user:rita").values_list("action", flat=True))
    assert {Action.USER_ROLE_SET, Action.USER_TENANTS_SET, Action.USER_ACTIVE_SET} <= actions


def test_an_admin_cannot_remove_their_own_admin_role(admin_user: User) -> None:
    client = csrf_client(admin_user)
    url = reverse("user-edit", args=[admin_user.username])

    response = _post(client, url, {"role": "reviewer", "is_active": "on"})

    assert response.status_code == 422
    assert response.context["form"].errors["role"] == [OWN_ROLE]
    admin_user.refresh_from_db()
    assert user_role(admin_user) == Role.ADMIN
    assert not Event.objects.filter(action=Action.USER_ROLE_SET, actor=admin_user).exists()


def test_an_admin_cannot_deactivate_themselves(admin_user: User) -> None:
    client = csrf_client(admin_user)
    response = _post(client, reverse("user-edit", args=[admin_user.username]), {"role": "admin"})
    assert response.status_code == 422
    admin_user.refresh_from_db()
    assert admin_user.is_active


def test_a_tenant_limited_admin_sees_and_gives_only_its_tenants(
    limited_admin: User, make_user: Callable[[str, str], User]
) -> None:
    outside = make_user("otto", Role.REVIEWER)
    user_set_role(username="otto", role=Role.REVIEWER, tenants=["coffeehouse"])
    client = csrf_client(limited_admin)

    assert "otto" not in client.get(reverse("user-list")).content.decode()
    assert client.get(reverse("user-edit", args=[outside.username])).status_code == 404
    response = _post(
        client, reverse("user-new"), {"username": "ivy", "role": "reviewer", "tenants": "milkbar"}
    )
    # The form offers only teahouse; a forged value is refused naming the field.
    assert response.status_code == 422 and "tenants" in response.context["form"].errors
    assert not User.objects.filter(username="ivy").exists()


def test_writes_need_a_csrf_token(admin_user: User, reviewer: User) -> None:
    client = csrf_client(admin_user)
    assert (
        client.post(reverse("user-new"), {"username": "ray", "role": "reviewer"}).status_code == 403
    )
    edit = reverse("user-edit", args=[reviewer.username])
    assert client.post(edit, {"role": "operator", "is_active": "on"}).status_code == 403
    assert not User.objects.filter(username="ray").exists()
    assert user_role(User.objects.get(pk=reviewer.pk)) == Role.REVIEWER


@pytest.mark.parametrize("role", ["operator", "reviewer"])
def test_the_pages_refuse_anyone_but_admins(
    role: str, make_user: Callable[[str, str], User], reviewer: User
) -> None:
    user = make_user(f"{role}-x", role)
    client = csrf_client(user)
    for url in (
        reverse("user-list"),
        reverse("user-new"),
        reverse("user-edit", args=[reviewer.username]),
    ):
        assert client.get(url).status_code == 403
    response = _post(client, reverse("user-new"), {"username": "ray", "role": "admin"})
    assert response.status_code == 403
    assert not User.objects.filter(username="ray").exists()


def test_the_user_pages_read_in_chinese(admin_user: User, reviewer: User) -> None:
    client = Client()
    client.force_login(admin_user)
    listing = client.get(reverse("user-list"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "最近登录" in listing and "审核人" in listing and "所有租户" in listing
    assert "Last login" not in listing and "every tenant" not in listing
    form = client.get(reverse("user-new"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "新建用户" in form and "初始密码" in form and "Initial password" not in form


def test_the_list_reads_a_fixed_number_of_queries_however_many_users(admin_user: User) -> None:
    client = Client()
    client.force_login(admin_user)

    def counted() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("user-list")).status_code == 200
        return len(queries)

    counted()  # the first request of a process reads what later ones reuse
    few = counted()
    for n in range(5):
        user_set_role(username=f"extra{n}", role=Role.REVIEWER, tenants=["teahouse"])
    assert counted() == few
