"""Login throttling and the Content-Security-Policy."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def attempt(client: Client, username: str, password: str) -> int:
    response = client.post(reverse("login"), {"username": username, "password": password})
    return response.status_code


def test_repeated_failures_lock_the_account_even_for_the_right_password(
    reviewer: User,
) -> None:
    client = Client()
    for _ in range(5):
        assert attempt(client, reviewer.username, "wrong-password") in {200, 429}

    assert attempt(client, reviewer.username, PASSWORD) == 429
    assert "_auth_user_id" not in client.session


def test_a_success_before_the_limit_resets_the_count(reviewer: User) -> None:
    client = Client()
    for _ in range(4):
        attempt(client, reviewer.username, "wrong-password")
    assert attempt(client, reviewer.username, PASSWORD) == 302
    client.logout()
    for _ in range(4):
        attempt(client, reviewer.username, "wrong-password")
    assert attempt(client, reviewer.username, PASSWORD) == 302


def test_lockout_is_per_username(reviewer: User, second_reviewer: User) -> None:
    client = Client()
    for _ in range(5):
        attempt(client, reviewer.username, "wrong-password")

    assert attempt(client, second_reviewer.username, PASSWORD) == 302


def test_pages_carry_a_csp_without_unsafe_inline(reviewer: User) -> None:
    response = Client().get(reverse("login"))

    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert "frame-ancestors 'none'" in policy
