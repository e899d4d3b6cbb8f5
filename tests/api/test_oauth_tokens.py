"""OAuth access tokens at the HTTP API, in process: stored as checksums only, accepted only
for the API's resource, revoked in the admin (audited, the refresh token with it) and refused
at the next request, counted against the account's rate with its static tokens, and their
reads the account's, as a static token's are (tests/mcp/test_oauth.py drives the whole flow
over real servers)."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, RefreshToken, set_token_value

from agentapi import oauth
from agentapi.services import token_create
from experience.runs.models import Reference, RunOwner
from reviewconsole.models import Action, Event
from tests.api.conftest import BearerClient, Demo, retrieve_body

pytestmark = pytest.mark.django_db

CALLBACK = "http://127.0.0.1:9/callback"


def _issued(
    user: User, *, scope: str = "agent tenant:*", resource: str | None = None, refresh: bool = False
) -> tuple[str, AccessToken]:
    """An access token as the token endpoint stores it (hashed at rest, audience-bound)."""
    application, _ = Application.objects.get_or_create(
        client_id="test-client",
        defaults={
            "name": "test client",
            "client_type": Application.CLIENT_PUBLIC,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": CALLBACK,
        },
    )
    text = oauth.access_token_text(None)
    token = AccessToken(
        user=user,
        application=application,
        scope=scope,
        expires=timezone.now() + timedelta(hours=1),
        resource=[resource or oauth.api_resource()],
    )
    set_token_value(token, text)
    token.save()
    if refresh:
        row = RefreshToken(user=user, application=application, access_token=token)
        set_token_value(row, oauth.refresh_token_text(None))
        row.save()
    return text, token


def test_an_oauth_token_acts_as_its_agent_and_is_stored_as_its_checksum_only(agent: User) -> None:
    text, token = _issued(agent)
    response = BearerClient(text).get("/api/v1/ping")
    assert response.status_code == 200, response.content
    assert response.json()["user"] == agent.username
    token.refresh_from_db()
    assert token.token == ""
    assert token.token_checksum == hashlib.sha256(text.encode()).hexdigest()


def test_a_token_for_another_resource_or_without_the_agent_scope_is_401(agent: User) -> None:
    for text in (
        _issued(agent, resource="https://elsewhere.example/api/v1")[0],
        _issued(agent, resource=oauth.mcp_resource())[0],
        _issued(agent, scope="tenant:*")[0],
        _issued(agent, scope="agent")[0],  # no tenant at all
    ):
        response = BearerClient(text).get("/api/v1/ping")
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith('Bearer error="invalid_token"')


def test_revoking_in_the_admin_cuts_the_next_request_and_is_audited(
    agent: User, admin_user: User
) -> None:
    text, token = _issued(agent, refresh=True)
    assert BearerClient(text).get("/api/v1/ping").status_code == 200
    browser = Client()
    browser.force_login(admin_user)
    answered = browser.post(
        "/admin/oauth2_provider/accesstoken/",
        {"action": "revoke_tokens", "_selected_action": [token.pk]},
    )
    assert answered.status_code == 302, answered.content[:2000]
    assert not AccessToken.objects.filter(pk=token.pk).exists()
    assert RefreshToken.objects.get(user=agent).revoked is not None  # cannot mint another
    event = Event.objects.get(action=Action.AGENT_OAUTH_REVOKE)
    assert (event.actor, event.details["user"]) == (admin_user, agent.username)
    assert BearerClient(text).get("/api/v1/ping").status_code == 401


def test_oauth_and_static_tokens_share_the_accounts_rate(agent: User, settings: Any) -> None:
    settings.CONSOLE_API_RATE = "3/m"
    oauth_client = BearerClient(_issued(agent)[0])
    static_client = BearerClient(token_create(user=agent, name="static").text)
    answers = [client.get("/api/v1/ping").status_code for client in (oauth_client, static_client)]
    answers += [oauth_client.get("/api/v1/ping").status_code for _ in range(2)]
    assert answers == [200, 200, 200, 429]


def test_reads_through_an_oauth_token_are_the_accounts(agent: User, demo: Demo) -> None:
    client = BearerClient(_issued(agent, scope="agent tenant:teahouse")[0])
    response = client.post_json("/api/v1/experience/retrieve", retrieve_body(run_id="oauth-run-1"))
    assert response.status_code == 200, response.content
    run = RunOwner.objects.get(name="oauth-run-1")
    assert run.owner == agent
    assert Reference.objects.filter(run_id=run.run_id).count() == len(response.json()["items"]) > 0
