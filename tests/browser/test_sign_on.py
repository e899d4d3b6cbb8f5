"""Single sign-on in a real browser against a real, independent OpenID Connect provider.

The provider is npm's ``oidc-provider`` (tests/oidc/provider.mjs, pinned in its
package-lock.json, installed by scripts/ensure_oidc_provider.sh), one process per test session
on 127.0.0.1; its people and their groups are a JSON file the tests rewrite between logins (the
provider reads it at every sign-in).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from playwright.sync_api import expect

from reviewconsole.models import Action, Event, SignOnIdentity
from reviewconsole.services import tenant_create, user_role, user_tenants
from tests.browser.conftest import screen

pytestmark = pytest.mark.browser

OIDC_DIR = Path(django_settings.BASE_DIR) / "tests" / "oidc"
CLIENT_ID = "review-console"
CLIENT_SECRET = "a-test-only-client-secret"
PROVIDER_NAME = "Teahouse SSO"
ROLE_GROUPS = {"console-reviewers": "reviewer", "console-admins": "admin"}
TENANT_GROUPS = {"teahouse-staff": ["teahouse"]}


def _provider_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed (scripts/ensure_oidc_provider.sh installs it)"
    if not (OIDC_DIR / "node_modules" / "oidc-provider").is_dir():
        return "tests/oidc is not installed (scripts/ensure_oidc_provider.sh installs it)"
    return None


@pytest.fixture(scope="session")
def oidc_provider(
    live_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One provider process for the session, its client registered for this live server."""
    missing = _provider_missing()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the OpenID provider is required in CI: {missing}")
        pytest.skip(missing)
    accounts = tmp_path_factory.mktemp("oidc") / "accounts.json"
    accounts.write_text("{}", encoding="utf-8")
    process = subprocess.Popen(  # noqa: S603
        [shutil.which("node") or "node", str(OIDC_DIR / "provider.mjs")],
        env={
            **os.environ,
            "CONSOLE_URL": live_server.url,
            "CLIENT_ID": CLIENT_ID,
            "CLIENT_SECRET": CLIENT_SECRET,
            "ACCOUNTS_FILE": str(accounts),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        # The first line is written once the provider listens; EOF means it died.
        first = process.stdout.readline()
        assert first, "the OpenID provider exited before it listened"
        issuer = json.loads(first)["issuer"]
        yield {"issuer": issuer, "accounts": accounts}
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def sign_on(oidc_provider: dict[str, Any], settings: Any) -> Callable[[dict[str, Any]], None]:
    """Point the console at the provider; the returned function sets the provider's people."""
    settings.SSO_ISSUER = oidc_provider["issuer"]
    settings.SSO_CLIENT_ID = CLIENT_ID
    settings.SSO_CLIENT_SECRET = CLIENT_SECRET
    settings.SSO_PROVIDER_NAME = PROVIDER_NAME
    settings.SSO_ROLE_GROUPS = json.dumps(ROLE_GROUPS)
    settings.SSO_TENANT_GROUPS = json.dumps(TENANT_GROUPS)
    tenant_create(name="teahouse", actor=None)

    def people(accounts: dict[str, Any]) -> None:
        oidc_provider["accounts"].write_text(json.dumps(accounts), encoding="utf-8")

    return people


def _local_only(page: Any) -> None:
    """The provider's pages import a web font; nothing leaves this machine."""
    page.context.route(
        re.compile(r"^https?://(?!(127\.0\.0\.1|localhost)[:/]).*"), lambda route: route.abort()
    )


def _sign_in_at_provider(page: Any, login: str) -> None:
    page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").click()
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password: the provider's development login")
    page.get_by_role("button", name="Sign-in").click()


def _sign_on_events(username: str) -> list[Event]:
    return [
        event
        for event in Event.objects.filter(target=f"user:{username}").order_by("id")
        if event.details.get("via") == "sign-on"
    ]


def test_a_person_signs_on_gets_the_role_their_groups_name_and_loses_it_with_the_group(
    page: Any, sign_on: Callable[[dict[str, Any]], None], settings: Any
) -> None:
    settings.PASSWORD_LOGIN = False
    _local_only(page)
    sign_on(
        {
            "mei": {
                "groups": ["console-reviewers", "teahouse-staff", "canteen"],
                "email": "mei@example.com",
                "email_verified": True,
                "given_name": "Mei",
            }
        }
    )
    page.goto("/accounts/login/")
    # Passwords off: the page offers sign-on only.
    expect(page.locator("#id_password")).to_have_count(0)
    screen(page, "sign-on/login-sign-on-only")
    callbacks: list[str] = []
    page.on(
        "request",
        lambda request: (
            callbacks.append(request.url) if "/accounts/sso/callback/" in request.url else None
        ),
    )
    _sign_in_at_provider(page, "mei")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()

    user = User.objects.get(sign_on__subject="mei")
    assert user_role(user) == "reviewer"
    assert user_tenants(user) == ["teahouse"]
    assert user.is_staff and not user.is_superuser
    assert not user.has_usable_password()
    assert user.email == "mei@example.com"
    assert SignOnIdentity.objects.get(user=user).issuer == settings.SSO_ISSUER
    (created,) = _sign_on_events(user.username)
    assert created.action == Action.USER_CREATE
    assert created.details["role"] == "reviewer" and created.details["tenants"] == ["teahouse"]
    assert created.actor is None

    # Logout ends the console's session and the provider's (RP-initiated logout).
    page.locator("form[action='/accounts/logout/'] button").click()
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(re.compile(r"/accounts/login/"))
    page.goto("/")
    page.wait_for_url(re.compile(r"/accounts/login/"))

    # The provider's answer replayed (its state used up, its code spent): refused.
    (callback,) = callbacks
    response = page.goto(urlsplit(callback)._replace(netloc=urlsplit(page.url).netloc).geturl())
    assert response.status == 403
    expect(page.get_by_role("alert")).to_contain_text("Signing in through the provider failed")
    page.goto("/")
    page.wait_for_url(re.compile(r"/accounts/login/"))

    # The reviewers' group is taken away at the provider: at the next login the role goes too.
    sign_on({"mei": {"groups": ["teahouse-staff"], "email": "mei@example.com"}})
    page.goto("/accounts/login/")
    _sign_in_at_provider(page, "mei")
    page.wait_for_url(re.compile(r"/accounts/sso/callback/"))
    expect(page.get_by_role("alert")).to_contain_text("gives you no role in this console")
    screen(page, "sign-on/refused-no-role")
    page.goto("/")
    page.wait_for_url(re.compile(r"/accounts/login/"))
    user.refresh_from_db()
    assert user_role(user) is None and not user.is_staff
    removed = _sign_on_events(user.username)[-1]
    assert removed.action == Action.USER_ROLE_SET
    assert removed.details["role"] is None and removed.details["from"] == "reviewer"


def test_an_admins_group_makes_an_admin_never_a_superuser_and_not_the_local_admin(
    page: Any, sign_on: Callable[[dict[str, Any]], None], admin_user: User
) -> None:
    _local_only(page)
    # The provider's "ada" claims the local admin's e-mail: a new account all the same.
    admin_user.email = "ada@example.com"
    admin_user.save()
    sign_on(
        {
            "ada": {
                "groups": ["console-admins", "teahouse-staff"],
                "email": "ada@example.com",
                "email_verified": False,
            }
        }
    )
    page.goto("/accounts/login/")
    # Passwords on (the demo): both ways are offered.
    expect(page.locator("#id_password")).to_be_visible()
    screen(page, "sign-on/login-both")
    _sign_in_at_provider(page, "ada")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    user = User.objects.get(sign_on__subject="ada")
    assert user.pk != admin_user.pk and user.username == "ada-2"
    assert user_role(user) == "admin" and user.is_staff and not user.is_superuser
    assert user.email == ""
    page.goto("/users/")
    expect(page.get_by_role("heading", name="Users")).to_be_visible()
