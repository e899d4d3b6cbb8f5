"""Logging in: local passwords (the demo; switched off by ``PASSWORD_LOGIN``) and single sign-on
through the company's OpenID Connect provider (docs/operations.md, "Single sign-on").

Sign-on is Authlib's OpenID Connect client: the authorization code flow with PKCE (S256), a
state and a nonce kept in the session for one use, and an ID token whose signature is checked
against the provider's published keys and whose issuer, audience, expiry and nonce are checked
before anything is read from it. What the claims give (role, tenants) is applied by
``reviewconsole.services.user_sign_on``; these views only speak the protocol and render.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any
from urllib.parse import urlencode

import requests
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import login as auth_login
from django.contrib.auth import logout as auth_logout
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext, gettext_noop
from django.views.decorators.http import require_GET, require_POST
from joserfc.errors import JoseError

from reviewconsole.services import SignOnOutcome, user_sign_on
from reviewconsole.signon import (
    INACTIVE,
    NO_ROLE,
    NO_TENANT,
    SignOnMapping,
    parse_role_groups,
    parse_tenant_groups,
)

logger = logging.getLogger(__name__)

LOGIN_TEMPLATE = "reviewconsole/login_form.html"
# The session keys of a sign-on: where to go after it, and the ID token (the logout's hint).
NEXT_KEY = "sso_next"
ID_TOKEN_KEY = "sso_id_token"  # noqa: S105  (a session key, not a secret)
# The backend the session records for a signed-on account (its permissions are read as any
# other account's).
SESSION_BACKEND = "reviewconsole.access.AccessBackend"


def sso_enabled() -> bool:
    return bool(settings.SSO_ISSUER and settings.SSO_CLIENT_ID)


def sign_on_mapping() -> SignOnMapping:
    return SignOnMapping(
        role_groups=parse_role_groups(settings.SSO_ROLE_GROUPS),
        tenant_groups=parse_tenant_groups(settings.SSO_TENANT_GROUPS),
        groups_claim=settings.SSO_GROUPS_CLAIM,
        tenant_claim=settings.SSO_TENANT_CLAIM,
    )


def provider_client() -> DjangoOAuth2App:
    """The provider's client, its discovery document and keys fetched once per configuration."""
    return _client(
        settings.SSO_ISSUER,
        settings.SSO_CLIENT_ID,
        settings.SSO_CLIENT_SECRET,
        settings.SSO_SCOPES,
    )


@cache
def _client(issuer: str, client_id: str, client_secret: str, scopes: str) -> DjangoOAuth2App:
    registry = OAuth()
    client: DjangoOAuth2App = registry.register(
        name="console",
        client_id=client_id,
        client_secret=client_secret or None,
        server_metadata_url=f"{issuer}/.well-known/openid-configuration",
        client_kwargs={
            "scope": scopes,
            "code_challenge_method": "S256",
            # A public client (no secret) proves itself by PKCE alone.
            "token_endpoint_auth_method": ("client_secret_basic" if client_secret else "none"),
            # Every request to the provider (discovery, keys, token, userinfo) gives up after 10 s.
            "default_timeout": 10,
        },
    )
    return client


def provider_metadata(client: DjangoOAuth2App) -> dict[str, Any]:
    """The discovery document, held to the configured issuer (OpenID Connect Discovery 4.3) and
    to the configured signature algorithms, whatever the document offers."""
    metadata: dict[str, Any] = client.load_server_metadata()
    if metadata.get("issuer") != settings.SSO_ISSUER:
        raise OAuthError(description="the discovery document names another issuer")
    metadata["id_token_signing_alg_values_supported"] = [
        name.strip() for name in settings.SSO_ID_TOKEN_ALGORITHMS.split(",") if name.strip()
    ]
    return metadata


def id_token_claims_options() -> dict[str, Any]:
    """What the ID token must say besides its signature: this issuer, this client as audience."""
    return {
        "iss": {"essential": True, "value": settings.SSO_ISSUER},
        "aud": {"essential": True, "values": [settings.SSO_CLIENT_ID]},
        "sub": {"essential": True},
    }


# --- Views ---------------------------------------------------------------------------------------


REFUSALS = {
    NO_ROLE: gettext_noop(
        "Your account at the provider gives you no role in this console. Ask an admin to add "
        "you to one of the console's groups."
    ),
    NO_TENANT: gettext_noop(
        "Your account at the provider gives you no tenant of this console. Ask an admin to add "
        "you to a tenant's group."
    ),
    INACTIVE: gettext_noop("This account is deactivated. Ask an admin."),
}
SIGN_ON_FAILED = gettext_noop(
    "Signing in through the provider failed. Try again; if it fails again, ask an admin."
)
PASSWORDS_OFF = gettext_noop("Password login is switched off here: sign in through the provider.")


class ConsoleLoginView(LoginView):
    """The login page: the sign-on button when configured, the password form while passwords
    are on. With passwords off a posted password is refused before it is checked."""

    template_name = LOGIN_TEMPLATE
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.PASSWORD_LOGIN:
            return login_page(request, error=gettext(PASSWORDS_OFF), status=403)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(login_options())
        return context


def login_options() -> dict[str, Any]:
    return {
        "sso_enabled": sso_enabled(),
        "sso_provider_name": settings.SSO_PROVIDER_NAME,
        "password_login": settings.PASSWORD_LOGIN,
    }


def login_page(request: HttpRequest, *, error: str, status: int) -> HttpResponse:
    """The login page with one error (a refused sign-on, a refused password post)."""
    next_url = request.session.pop(NEXT_KEY, "") if hasattr(request, "session") else ""
    return render(
        request,
        LOGIN_TEMPLATE,
        {
            "sign_on_error": error,
            "next": next_url,
            "form": AuthenticationForm(request) if settings.PASSWORD_LOGIN else None,
            **login_options(),
        },
        status=status,
    )


@require_GET
def sso_login(request: HttpRequest) -> HttpResponse:
    """Send the browser to the provider: authorization code, PKCE S256, a fresh state and
    nonce kept in the session for the callback."""
    if not sso_enabled():
        return HttpResponse(status=404)
    next_url = request.GET.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    request.session[NEXT_KEY] = next_url if safe else ""
    client = provider_client()
    try:
        provider_metadata(client)
        response: HttpResponse = client.authorize_redirect(request, _callback_url(request))
    except (OAuthError, requests.RequestException, ValueError) as failure:
        logger.warning("sign-on could not reach the provider: %s", failure)
        return login_page(request, error=gettext(SIGN_ON_FAILED), status=502)
    return response


@require_GET
def sso_callback(request: HttpRequest) -> HttpResponse:
    """The provider's answer: the code is exchanged (with the PKCE verifier), the ID token
    checked, the claims applied; a person the mapping refuses is not logged in."""
    if not sso_enabled():
        return HttpResponse(status=404)
    client = provider_client()
    try:
        provider_metadata(client)
        token = _exchange(client, request)
        claims = _with_userinfo(client, token, token["userinfo"])
    except (OAuthError, JoseError, requests.RequestException, KeyError, ValueError) as failure:
        logger.warning("sign-on refused: %s: %s", type(failure).__name__, failure)
        return login_page(request, error=gettext(SIGN_ON_FAILED), status=403)
    try:
        outcome = _sign_on(claims)
    except IntegrityError:
        # Two first sign-ins of one person at once: the other made the account; use it.
        outcome = _sign_on(claims)
    if outcome.refusal is not None or outcome.user is None:
        logger.warning("sign-on of %s refused: %s", claims.get("sub"), outcome.refusal)
        message = REFUSALS.get(outcome.refusal or "", SIGN_ON_FAILED)
        return login_page(request, error=gettext(message), status=403)
    next_url = request.session.pop(NEXT_KEY, "")
    auth_login(request, outcome.user, backend=SESSION_BACKEND)
    request.session[ID_TOKEN_KEY] = token["id_token"]
    return HttpResponseRedirect(next_url or reverse(settings.LOGIN_REDIRECT_URL))


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    """Log out of the console; a signed-on session also ends at the provider (RP-initiated
    logout), through a page that sends the browser on (a redirect answering the form would be
    a form target outside the console, which its Content-Security-Policy forbids)."""
    id_token = request.session.get(ID_TOKEN_KEY)
    auth_logout(request)
    login_url = reverse(settings.LOGOUT_REDIRECT_URL)
    if not (id_token and sso_enabled() and settings.SSO_PROVIDER_LOGOUT):
        return HttpResponseRedirect(login_url)
    try:
        end_session = provider_metadata(provider_client()).get("end_session_endpoint")
    except (OAuthError, requests.RequestException, ValueError) as failure:
        logger.warning("sign-on logout could not reach the provider: %s", failure)
        end_session = None
    if not end_session:
        return HttpResponseRedirect(login_url)
    query = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": settings.SSO_CLIENT_ID,
            "post_logout_redirect_uri": _absolute(request, login_url),
        }
    )
    return render(
        request,
        "reviewconsole/logout_provider.html",
        # The base template's head sends the browser on (``refresh_url``): the console's
        # content-security policy forbids a form answer that redirects to another site.
        {"end_session_url": f"{end_session}?{query}", "refresh_url": f"{end_session}?{query}"},
    )


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin's own login page while passwords are on; with passwords off, the console's
    (which offers sign-on only)."""
    if settings.PASSWORD_LOGIN:
        return admin.site.login(request)
    target = reverse("login")
    next_url = request.GET.get("next", "")
    return HttpResponseRedirect(f"{target}?{urlencode({'next': next_url})}" if next_url else target)


# --- Helpers -------------------------------------------------------------------------------------


def _sign_on(claims: dict[str, Any]) -> SignOnOutcome:
    return user_sign_on(
        issuer=settings.SSO_ISSUER,
        claims=claims,
        mapping=sign_on_mapping(),
        username_claim=settings.SSO_USERNAME_CLAIM,
    )


def _exchange(client: DjangoOAuth2App, request: HttpRequest) -> dict[str, Any]:
    """The code exchanged for tokens, the ID token validated (the state is used up here: a
    replayed answer finds none)."""
    token: dict[str, Any] = client.authorize_access_token(
        request,
        claims_options=id_token_claims_options(),
        leeway=settings.SSO_CLOCK_SKEW_SECONDS,
    )
    if "userinfo" not in token or "id_token" not in token:
        raise OAuthError(description="the token response holds no ID token")
    return token


def _with_userinfo(
    client: DjangoOAuth2App, token: dict[str, Any], id_claims: dict[str, Any]
) -> dict[str, Any]:
    """The ID token's claims, completed by the userinfo endpoint's (providers put groups in
    either); the ID token's own claims win, and the two must name the same subject."""
    claims = dict(id_claims)
    if not client.load_server_metadata().get("userinfo_endpoint"):
        return claims
    info = dict(client.userinfo(token=token))
    if info.get("sub") != claims.get("sub"):
        raise OAuthError(description="userinfo names another subject than the ID token")
    return {**info, **claims}


def _callback_url(request: HttpRequest) -> str:
    return _absolute(request, reverse("sso-callback"))


def _absolute(request: HttpRequest, path: str) -> str:
    """An address of the console as the provider knows it: under ``CONSOLE_BASE_URL`` when set
    (behind a proxy), else as this request reached it."""
    base = settings.CONSOLE_BASE_URL.rstrip("/")
    return f"{base}{path}" if base else request.build_absolute_uri(path)
