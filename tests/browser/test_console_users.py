"""In Chromium: an admin creates a user on the console's user page and changes its tenants; the
list shows the role and the tenants in the console's style, with no staff or superuser column."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from reviewconsole.models import Action, Event
from reviewconsole.services import user_role
from tests.browser.conftest import PHONE, login, screen


def test_an_admin_creates_a_user_and_changes_its_tenants(page: Any, admin_user: User) -> None:
    login(page, admin_user.username)
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Users").click()
    page.wait_for_url("**/users/")
    page.get_by_role("link", name="New user").click()
    page.wait_for_url("**/users/new/")

    page.fill("#id_username", "rosa")
    page.fill("#id_email", "rosa@example.test")
    page.select_option("#id_role", "reviewer")
    page.get_by_label("teahouse").check()
    screen(page, "users/user-new")
    page.get_by_role("button", name="Create user").click()
    page.wait_for_url("**/users/")
    page.locator(".messages").get_by_text("User rosa created.").wait_for()

    rosa = User.objects.get(username="rosa")
    assert user_role(rosa) == "reviewer"
    row = page.locator("tr", has=page.get_by_role("link", name="rosa"))
    assert "reviewer" in row.inner_text() and "teahouse" in row.inner_text()
    head = page.locator("table.user-table thead").inner_text()
    assert "STAFF" not in head.upper() and "SUPERUSER" not in head.upper()
    screen(page, "users/user-list")

    page.get_by_role("link", name="rosa").click()
    page.wait_for_url("**/users/rosa/")
    page.get_by_label("milkbar").check()
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/users/")
    assert (
        "milkbar, teahouse"
        in page.locator("tr", has=page.get_by_role("link", name="rosa")).inner_text()
    )
    assert Event.objects.filter(action=Action.USER_TENANTS_SET, target="user:rosa").exists()

    # Their own account: the admin may not drop their own admin role.
    page.goto(f"/users/{admin_user.username}/")
    page.select_option("#id_role", "reviewer")
    page.get_by_role("button", name="Save").click()
    assert "you may not change your own role" in page.locator("#user-form-errors").inner_text()
    assert user_role(User.objects.get(pk=admin_user.pk)) == "admin"
    page.set_viewport_size(PHONE)
    page.goto("/users/")
    screen(page, "users/user-list-390")
