"""The admin's user pages keep the Content-Security-Policy (issue: two policy errors were once
reported there). The ``page`` fixture fails a test on any policy error the browser logs; this
walks every user page an admin opens."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.browser.conftest import login

pytestmark = pytest.mark.browser


def test_the_admins_user_pages_break_no_policy(page: Any, admin_user: User, reviewer: User) -> None:
    violations: list[str] = []
    page.on(
        "console",
        lambda message: violations.append(message.text) if message.type == "error" else None,
    )
    login(page, admin_user.username)
    for path in (
        "/admin/",
        "/admin/auth/user/",
        "/admin/auth/user/add/",
        f"/admin/auth/user/{reviewer.pk}/change/",
        f"/admin/auth/user/{reviewer.pk}/history/",
        f"/admin/auth/user/{admin_user.pk}/password/",  # only ones own
        "/admin/auth/group/",
    ):
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        expect(page.locator("#content")).to_be_visible()
    assert not [text for text in violations if "Content Security Policy" in text], violations
