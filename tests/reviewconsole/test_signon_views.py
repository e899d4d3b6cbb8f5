"""Sign-on's protocol checks and the login page's switches.

The ID token checks run through the same function the callback uses (Authlib's validation with
the console's options) on tokens this test signs with keys it makes: one the provider publishes
and one it does not."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth
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

from reviewconsole.signon_views import _client, provider_client, validated_claims
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
def client_app(keys: tuple[RSAKey, RSAKey], settings: Any) -> DjangoOAuth2App:
    settings.SSO_ISSUER = ISSUER
    settings.SSO_CLIENT_ID = CLIENT_ID
    settings.SSO_CLIENT_SECRET = "s"
    app: DjangoOAuth2App = OAuth().register(
        name="test",
        client_id=CLIENT_ID,
        client_secret="s",
        server_metadata_url=f"{ISSUER}/.well-known/openid-configuration",
        client_kwargs={"scope": "openid", "code_challenge_method": "S256"},
    )
    # What discovery would have fetched, so nothing leaves the test.
    app.server_metadata.update(
        {
            "_loaded_at": time.time(),
            "issuer": ISSUER,
            "jwks": KeySet([keys[0]]).as_dict(private=False),
            "id_token_signing_alg_values_supported": ["RS256", "HS256", "none"],
        }
    )
    return app


def _claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": "mei",
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 300,
        "nonce": NONCE,
        "groups": ["console-reviewers"],
    }
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _signed(key: Any, claims: dict[str, Any], alg: str = "RS256") -> str:
    return jwt.encode({"alg": alg, "kid": "k1"}, claims, key)


def _check(app: DjangoOAuth2App, id_token: str, nonce: str = NONCE) -> dict[str, Any]:
    return validated_claims(app, {"id_token": id_token, "access_token": "at"}, nonce)


def test_a_valid_id_token_gives_its_claims(client_app: DjangoOAuth2App, keys: Any) -> None:
    claims = _check(client_app, _signed(keys[0], _claims()))
    assert claims["sub"] == "mei" and claims["groups"] == ["console-reviewers"]


def _tampered_signature(token: str) -> str:
    head, body, signature = token.split(".")
    flipped = ("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
    return f"{head}.{body}.{flipped}"


def _tampered_claims(keys: Any) -> str:
    head, _body, signature = _signed(keys[0], _claims()).split(".")
    _h, body, _s = _signed(keys[0], _claims(groups=["console-admins"])).split(".")
    return f"{head}.{body}.{signature}"


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
def test_a_bad_id_token_is_refused(
    client_app: DjangoOAuth2App, keys: Any, bad: str, refusal: type[JoseError]
) -> None:
    past = int(time.time()) - 3600
    token = {
        "tampered signature": lambda: _tampered_signature(_signed(keys[0], _claims())),
        "tampered claims": lambda: _tampered_claims(keys),
        "signed by an unpublished key": lambda: _signed(keys[1], _claims()),
        "expired": lambda: _signed(keys[0], _claims(iat=past - 300, exp=past)),
        "another audience": lambda: _signed(keys[0], _claims(aud="another-client")),
        "another issuer": lambda: _signed(keys[0], _claims(iss="https://evil.example.com")),
        "no issuer": lambda: _signed(keys[0], _claims(iss=None)),
        "another nonce": lambda: _signed(keys[0], _claims(nonce="replayed")),
        "no nonce": lambda: _signed(keys[0], _claims(nonce=None)),
        "HS256 with the client secret": lambda: _signed(
            OctKey.import_key("s" * 32), _claims(), alg="HS256"
        ),
        "unsigned": lambda: ".".join(_signed(keys[0], _claims()).split(".")[:2]) + ".",
    }[bad]()
    with pytest.raises(refusal):
        _check(client_app, token)


def test_only_the_configured_algorithms_are_accepted(
    client_app: DjangoOAuth2App, keys: Any, settings: Any
) -> None:
    settings.SSO_ID_TOKEN_ALGORITHMS = "ES256"
    with pytest.raises(JoseError):
        _check(client_app, _signed(keys[0], _claims()))


def test_a_discovery_document_naming_another_issuer_is_refused(
    client_app: DjangoOAuth2App, keys: Any
) -> None:
    client_app.server_metadata["issuer"] = "https://evil.example.com"
    with pytest.raises(OAuthError):
        _check(client_app, _signed(keys[0], _claims()))


# --- The login page's switches -------------------------------------------------------------------


@pytest.fixture
def passwords_off(settings: Any, keys: Any, db: None) -> Iterator[None]:
    settings.PASSWORD_LOGIN = False
    settings.SSO_ISSUER = ISSUER
    settings.SSO_CLIENT_ID = CLIENT_ID
    # The provider as discovery would have found it: no request leaves the test.
    provider_client().server_metadata.update(
        {
            "_loaded_at": time.time(),
            "issuer": ISSUER,
            "authorization_endpoint": f"{ISSUER}/auth",
            "token_endpoint": f"{ISSUER}/token",
            "jwks": KeySet([keys[0]]).as_dict(private=False),
        }
    )
    yield
    _client.cache_clear()


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
