"""Sign-on's protocol checks and the login page's switches.

The ID token checks run through the console's own views (the start, then the provider's answer);
only the token endpoint's reply is this test's, an ID token it signs with keys it makes: one the
provider publishes and one it does not."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any
from unittest.mock import patch
from urllib.parse import parse_qs, urlsplit

import pytest
from authlib.integrations.django_client import DjangoOAuth2App
from django.contrib.auth.models import User
from django.test import Client
from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
    UnsupportedAlgorithmError,
)
from joserfc.jwk import KeySet, OctKey, RSAKey

from reviewconsole.signon_views import _client, provider_client
from tests.conftest import PASSWORD

ISSUER = "https://login.example.com"
CLIENT_ID = "review-console"
NONCE = "n-0S6_WzA2Mj"


@pytest.fixture(scope="module")
def keys() -> tuple[RSAKey, RSAKey]:
    published = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    # Another key claiming the published key's id: its signatures must not pass.
    impostor = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    return published, impostor


@pytest.fixture
def client_app(keys: tuple[RSAKey, RSAKey], settings: Any, db: None) -> Iterator[DjangoOAuth2App]:
    """The console's own provider client, its discovery already done (nothing leaves the test):
    the provider publishes the first key and has no userinfo endpoint."""
    settings.SSO_ISSUER = ISSUER
    settings.SSO_CLIENT_ID = CLIENT_ID
    settings.SSO_CLIENT_SECRET = "s"
    settings.SSO_ROLE_GROUPS = '{"console-reviewers": "reviewer"}'
    settings.SSO_TENANT_GROUPS = ""
    app = provider_client()
    app.server_metadata.update(
        {
            "_loaded_at": time.time(),
            "issuer": ISSUER,
            "authorization_endpoint": f"{ISSUER}/auth",
            "token_endpoint": f"{ISSUER}/token",
            "jwks": KeySet([keys[0]]).as_dict(private=False),
            # What the provider offers does not widen what the console accepts.
            "id_token_signing_alg_values_supported": ["RS256", "HS256", "none"],
        }
    )
    yield app
    _client.cache_clear()


def _claims(nonce: str | None, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": "mei",
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 300,
        "nonce": nonce,
        "groups": ["console-reviewers"],
    }
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _signed(key: Any, claims: dict[str, Any], alg: str = "RS256") -> str:
    return jwt.encode({"alg": alg, "kid": "k1"}, claims, key)


def _answer(app: DjangoOAuth2App, id_token: Callable[[str], str]) -> tuple[Client, Any]:
    """A sign-on through the console's views: started (state and nonce in the session), then
    the provider's answer, whose token endpoint returns ``id_token(nonce)``."""
    browser = Client()
    started = browser.get("/accounts/sso/")
    query = parse_qs(urlsplit(started["Location"]).query)
    token = {"access_token": "at", "token_type": "Bearer", "id_token": id_token(query["nonce"][0])}
    with patch.object(app, "fetch_access_token", return_value=token) as exchange:
        answer = browser.get(f"/accounts/sso/callback/?code=c0de&state={query['state'][0]}")
    # The code went to the token endpoint with the PKCE verifier kept for it.
    assert exchange.call_args.kwargs["code"] == "c0de"
    assert exchange.call_args.kwargs["code_verifier"]
    return browser, answer


def test_a_valid_id_token_logs_the_person_in(client_app: DjangoOAuth2App, keys: Any) -> None:
    browser, answer = _answer(client_app, lambda nonce: _signed(keys[0], _claims(nonce)))
    assert answer.status_code == 302 and answer["Location"] == "/"
    user = User.objects.get(sign_on__subject="mei")
    assert browser.session["_auth_user_id"] == str(user.pk)


def _tampered_signature(token: str) -> str:
    head, body, signature = token.split(".")
    flipped = ("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
    return f"{head}.{body}.{flipped}"


def _tampered_claims(keys: Any, nonce: str) -> str:
    head, _body, signature = _signed(keys[0], _claims(nonce)).split(".")
    _h, body, _s = _signed(keys[0], _claims(nonce, groups=["console-admins"])).split(".")
    return f"{head}.{body}.{signature}"


PAST = int(time.time()) - 3600
BAD_TOKENS: dict[str, Callable[[Any, str], str]] = {
    "tampered signature": lambda keys, n: _tampered_signature(_signed(keys[0], _claims(n))),
    "tampered claims": _tampered_claims,
    "signed by an unpublished key": lambda keys, n: _signed(keys[1], _claims(n)),
    "expired": lambda keys, n: _signed(keys[0], _claims(n, iat=PAST - 300, exp=PAST)),
    "another audience": lambda keys, n: _signed(keys[0], _claims(n, aud="another-client")),
    "another issuer": lambda keys, n: _signed(keys[0], _claims(n, iss="https://evil.example")),
    "no issuer": lambda keys, n: _signed(keys[0], _claims(n, iss=None)),
    "another nonce": lambda keys, n: _signed(keys[0], _claims("replayed")),
    "no nonce": lambda keys, n: _signed(keys[0], _claims(None)),
    "HS256 with the client secret": lambda keys, n: _signed(
        OctKey.import_key("s" * 32), _claims(n), alg="HS256"
    ),
    "unsigned": lambda keys, n: ".".join(_signed(keys[0], _claims(n)).split(".")[:2]) + ".",
}


@pytest.mark.parametrize(
    ("bad", "refusal"),
    [
        ("tampered signature", BadSignatureError),
        ("tampered claims", BadSignatureError),
        ("signed by an unpublished key", BadSignatureError),
        ("expired", ExpiredTokenError),
        ("another audience", InvalidClaimError),
        ("another issuer", InvalidClaimError),
        ("no issuer", MissingClaimError),
        ("another nonce", InvalidClaimError),
        ("no nonce", MissingClaimError),
        ("HS256 with the client secret", UnsupportedAlgorithmError),
        ("unsigned", BadSignatureError),
    ],
)
def test_a_bad_id_token_is_refused_and_logs_no_one_in(
    client_app: DjangoOAuth2App,
    keys: Any,
    bad: str,
    refusal: type[JoseError],
    caplog: pytest.LogCaptureFixture,
) -> None:
    browser, answer = _answer(client_app, lambda nonce: BAD_TOKENS[bad](keys, nonce))
    assert answer.status_code == 403
    assert b"Signing in through the provider failed" in answer.content
    assert "_auth_user_id" not in browser.session
    assert not User.objects.filter(sign_on__subject="mei").exists()
    # Refused for this fault, not another.
    assert f"sign-on refused: {refusal.__name__}" in caplog.text


def test_only_the_configured_algorithms_are_accepted(
    client_app: DjangoOAuth2App, keys: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.SSO_ID_TOKEN_ALGORITHMS = "ES256"
    _browser, answer = _answer(client_app, lambda nonce: _signed(keys[0], _claims(nonce)))
    assert answer.status_code == 403
    assert "sign-on refused: UnsupportedAlgorithmError" in caplog.text


def test_a_discovery_document_naming_another_issuer_is_refused(
    client_app: DjangoOAuth2App,
) -> None:
    client_app.server_metadata["issuer"] = "https://evil.example.com"
    answer = Client().get("/accounts/sso/")
    assert answer.status_code == 502
    assert b"Signing in through the provider failed" in answer.content


# --- The login page's switches -------------------------------------------------------------------


@pytest.fixture
def passwords_off(settings: Any, client_app: DjangoOAuth2App) -> None:
    settings.PASSWORD_LOGIN = False


def test_with_passwords_off_the_page_offers_sign_on_only_and_a_posted_password_is_refused(
    passwords_off: None, reviewer: User
) -> None:
    browser = Client()
    page = browser.get("/accounts/login/")
    assert page.status_code == 200
    assert b'id="sign-on"' in page.content and b'name="password"' not in page.content
    posted = browser.post("/accounts/login/", {"username": "rita", "password": PASSWORD})
    assert posted.status_code == 403
    assert b"Password login is switched off" in posted.content
    assert "_auth_user_id" not in browser.session
    # No other path checks a password either: the admin's login page is the console's.
    assert not browser.login(username="rita", password=PASSWORD)
    admin_login = browser.get("/admin/login/?next=/admin/")
    assert admin_login.status_code == 302
    assert admin_login["Location"] == "/accounts/login/?next=%2Fadmin%2F"
    assert (
        browser.post("/admin/login/", {"username": "rita", "password": PASSWORD}).status_code == 302
    )
    assert "_auth_user_id" not in browser.session


def test_with_passwords_on_and_no_provider_the_page_is_as_it_was(reviewer: User) -> None:
    browser = Client()
    page = browser.get("/accounts/login/")
    assert b'name="password"' in page.content and b'id="sign-on"' not in page.content
    assert browser.get("/accounts/sso/").status_code == 404
    assert browser.get("/accounts/sso/callback/?code=x&state=y").status_code == 404
    posted = browser.post("/accounts/login/", {"username": "rita", "password": PASSWORD})
    assert posted.status_code == 302 and browser.session["_auth_user_id"] == str(reviewer.pk)


def test_a_callback_with_no_state_of_this_session_is_refused(passwords_off: None) -> None:
    browser = Client()
    started = browser.get("/accounts/sso/?next=/queue/")
    # To the provider, with PKCE (S256), a state and a nonce.
    assert started.status_code == 302
    location = started["Location"]
    assert location.startswith(f"{ISSUER}/auth?")
    for part in ("code_challenge_method=S256", "code_challenge=", "state=", "nonce="):
        assert part in location
    # A forged answer, or one replayed into another session: no state of this session names
    # it, so nothing is exchanged (the token endpoint is never asked).
    answer = browser.get("/accounts/sso/callback/?code=stolen&state=forged")
    assert answer.status_code == 403
    assert b"Signing in through the provider failed" in answer.content
    assert "_auth_user_id" not in browser.session


def test_a_next_address_elsewhere_is_dropped(passwords_off: None) -> None:
    browser = Client()
    browser.get("/accounts/sso/?next=https://evil.example.com/")
    assert browser.session["sso_next"] == ""
