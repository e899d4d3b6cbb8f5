"""Tokens: shown once, stored hashed, revocable; commands, admin and 401s."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from agentapi.auth import token_user
from agentapi.models import ApiToken
from agentapi.services import token_create, token_revoke
from agentapi.tokens import token_prefix
from reviewconsole import clock
from reviewconsole.models import Action, Event
from tests.api.conftest import BearerClient
from tests.helpers import run_json

pytestmark = pytest.mark.django_db


def test_only_the_hash_of_a_token_is_stored(agent: User) -> None:
    issued = token_create(user=agent, name="ci")
    row = ApiToken.objects.get()
    assert row.token_hash == hashlib.sha256(issued.text.encode()).hexdigest()
    assert row.prefix == token_prefix(issued.text)
    secret = issued.text.split("_", 2)[2]
    stored = [str(value) for value in ApiToken.objects.values().get().values()]
    assert not any(secret in value for value in stored)


def test_create_token_prints_the_token_once_as_json(agent: User) -> None:
    status, result = run_json("create_token", "agent-7", "--name", "support bot")
    assert status == 0
    assert result["user"] == "agent-7"
    assert result["name"] == "support bot"
    assert token_user(result["token"]) == agent
    event = Event.objects.get(action=Action.AGENT_TOKEN_CREATE)
    assert event.target == f"token:{result['prefix']}"
    assert result["token"] not in str(event.details)


def test_create_token_prints_only_the_token_on_stdout(agent: User) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("create_token", "agent-7", stdout=out, stderr=err)
    token = out.getvalue().strip()
    assert token_user(token) == agent
    assert "not shown again" in err.getvalue()
    assert token not in err.getvalue()


def test_create_token_refuses_an_unknown_user_naming_the_argument(db: None) -> None:
    status, result = run_json("create_token", "nobody")
    assert status == 1
    assert result["field"] == "USER"
    assert "nobody" in result["error"]
    assert not ApiToken.objects.exists()


def test_create_token_refuses_an_inactive_user(agent: User) -> None:
    agent.is_active = False
    agent.save()
    status, result = run_json("create_token", "agent-7")
    assert status == 1
    assert result["field"] == "USER"


def test_revoke_token_by_prefix(agent: User) -> None:
    issued = token_create(user=agent)
    status, result = run_json("revoke_token", issued.token.prefix, "--reason", "leaked")
    assert status == 0
    assert result["prefix"] == issued.token.prefix
    assert token_user(issued.text) is None
    event = Event.objects.get(action=Action.AGENT_TOKEN_REVOKE)
    assert event.reason == "leaked"


def test_revoking_twice_or_an_unknown_prefix_is_refused(agent: User) -> None:
    issued = token_create(user=agent)
    assert run_json("revoke_token", issued.text)[0] == 0
    status, result = run_json("revoke_token", issued.token.prefix)
    assert status == 1
    assert result["field"] == "token"
    status, result = run_json("revoke_token", "0123456789ab")
    assert (status, result["field"]) == (1, "PREFIX")


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer",
        "Bearer ",
        "Bearer not-a-token",
        "Bearer rca_0123456789ab_" + "x" * 43,
        "Token rca_0123456789ab_" + "x" * 43,
        "Basic YWdlbnQtNzpwYXNzd29yZA==",
    ],
)
def test_missing_or_malformed_credentials_are_401(header: str | None, agent: User) -> None:
    headers = {"Authorization": header} if header is not None else {}
    response = Client(headers=headers).get("/api/v1/ping")
    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_a_token_with_the_right_prefix_but_wrong_secret_is_401(agent: User) -> None:
    issued = token_create(user=agent)
    forged = issued.text[:-4] + ("AAAA" if not issued.text.endswith("AAAA") else "BBBB")
    assert BearerClient(forged).get("/api/v1/ping").status_code == 401


def test_a_revoked_token_is_401(agent: User) -> None:
    issued = token_create(user=agent)
    client = BearerClient(issued.text)
    assert client.get("/api/v1/ping").status_code == 200
    token_revoke(token=issued.token)
    assert client.get("/api/v1/ping").status_code == 401


def test_the_token_of_an_inactive_user_is_401(agent: User) -> None:
    issued = token_create(user=agent)
    agent.is_active = False
    agent.save()
    assert BearerClient(issued.text).get("/api/v1/ping").status_code == 401


def test_last_use_is_recorded_at_most_once_a_minute(
    agent: User, frozen_clock: Callable[..., object]
) -> None:
    start = clock.now()
    frozen_clock(start)
    issued = token_create(user=agent)
    client = BearerClient(issued.text)
    client.get("/api/v1/ping")
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start
    frozen_clock(start + timedelta(seconds=30))
    client.get("/api/v1/ping")
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start
    frozen_clock(start + timedelta(minutes=2))
    client.get("/api/v1/ping")
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start + timedelta(minutes=2)


# --- admin ----------------------------------------------------------------------------------


@pytest.fixture
def superuser(db: None) -> User:
    return User.objects.create_superuser("root", password="root-password-for-tests")


def test_admin_lists_tokens_without_any_secret(superuser: User, agent: User) -> None:
    issued = token_create(user=agent, name="bot")
    browser = Client()
    browser.force_login(superuser)
    listing = browser.get("/admin/agentapi/apitoken/")
    assert listing.status_code == 200
    page = listing.content.decode()
    assert issued.token.prefix in page
    assert issued.text not in page
    assert issued.token.token_hash not in page
    detail = browser.get(f"/admin/agentapi/apitoken/{issued.token.pk}/change/")
    assert detail.status_code == 200
    assert issued.token.token_hash not in detail.content.decode()
    assert browser.get("/admin/agentapi/apitoken/add/").status_code == 403


def test_admin_revoke_action(superuser: User, agent: User) -> None:
    issued = token_create(user=agent)
    browser = Client()
    browser.force_login(superuser)
    response = browser.post(
        "/admin/agentapi/apitoken/",
        {"action": "revoke", "_selected_action": [issued.token.pk]},
    )
    assert response.status_code == 302
    assert token_user(issued.text) is None
    event = Event.objects.get(action=Action.AGENT_TOKEN_REVOKE)
    assert event.actor == superuser
