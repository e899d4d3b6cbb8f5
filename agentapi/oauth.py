"""OAuth 2.1 for agents, as the MCP authorization specification describes (docs/agents.md,
Connecting with OAuth).

The console is the authorization server (django-oauth-toolkit under ``/oauth/``: authorization
code with PKCE S256 only, RFC 8414 metadata, RFC 7591 registration when
``CONSOLE_OAUTH_DYNAMIC_REGISTRATION`` is on); the HTTP API and the MCP endpoint are resource
servers, each its own resource (RFC 8707): a token names the resource it was issued for and is
accepted there only.

Scopes: ``agent`` (acting in the agent role; every token needs it) and one ``tenant:NAME`` per
tenant the token may reach, or ``tenant:*`` for every tenant of the user who consented. What a
token reaches is re-read at each request: the consenting user's memberships (and role, and
activity) of now, narrowed to the token's tenant scopes, so a token never carries more than its
user has. Tokens are stored as SHA-256 checksums only (RFC 9700 token storage).
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.scopes import BaseScopes
from oauthlib.oauth2.rfc6749 import errors

from reviewconsole.audit import event_record
from reviewconsole.models import Action
from reviewconsole.roles import TOKEN_ROLE
from reviewconsole.tenancy import tenants_of

SCOPE_AGENT = "agent"
TENANT_SCOPE_PREFIX = "tenant:"
SCOPE_ALL_TENANTS = "tenant:*"
DEFAULT_SCOPES = (SCOPE_AGENT, SCOPE_ALL_TENANTS)
# The shape of the tokens this server issues: the access token's scheme tells the validator
# which kind of token it was handed (``rca_`` tokens are static agent tokens).
ACCESS_TOKEN_SCHEME = "rco"  # noqa: S105 - a prefix, not a secret
REFRESH_TOKEN_SCHEME = "rcr"  # noqa: S105 - a prefix, not a secret
API_PATH = "/api/v1"
MCP_PATH = "/mcp"
PROTECTED_RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource"

NOT_AN_AGENT = (
    "only an active account in the agent role may authorise an agent client: it acts as that "
    "account"
)
NO_TENANT = "the consenting account is a member of none of the requested tenants"
UNKNOWN_RESOURCE = "name this server's resource (RFC 8707): the MCP endpoint {mcp} or the API {api}"


def issuer() -> str:
    """The authorization server's issuer identifier: the console's public address."""
    return str(settings.CONSOLE_OAUTH_ISSUER).rstrip("/")


def api_resource() -> str:
    return str(settings.CONSOLE_OAUTH_API_RESOURCE or f"{issuer()}{API_PATH}").rstrip("/")


def mcp_resource() -> str:
    return str(settings.CONSOLE_OAUTH_MCP_RESOURCE).rstrip("/")


def resources() -> tuple[str, str]:
    return (mcp_resource(), api_resource())


def canonical(uri: str) -> str:
    """A resource URI compared as RFC 8707 asks: scheme and host lower-case, no trailing slash."""
    parts = urlsplit(uri.strip())
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}{query}"


def is_our_resource(uri: str) -> bool:
    return canonical(uri) in {canonical(resource) for resource in resources()}


def metadata_url(resource: str) -> str:
    """RFC 9728: the protected resource metadata of ``resource`` at its origin's well-known
    path, the resource's own path appended."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{PROTECTED_RESOURCE_WELL_KNOWN}{parts.path}"


def resource_metadata(resource: str) -> dict[str, Any]:
    """The RFC 9728 document of ``resource``: who issues its tokens, which scopes it reads."""
    return {
        "resource": resource,
        "authorization_servers": [issuer()],
        "scopes_supported": list(DEFAULT_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "Experience review console (agent tools)",
    }


def dynamic_registration_on() -> bool:
    return bool(getattr(settings, "CONSOLE_OAUTH_DYNAMIC_REGISTRATION", False))


REGISTRATION_OFF = {
    "error": "registration_not_supported",
    "error_description": (
        "dynamic client registration is switched off on this server "
        "(CONSOLE_OAUTH_DYNAMIC_REGISTRATION); ask an administrator for a pre-registered "
        "client id, or connect with an agent token (Authorization: Bearer rca_...)"
    ),
}


def token_tenants(scopes: list[str] | set[str]) -> frozenset[str] | None:
    """The tenants a token's scopes name: None for ``tenant:*`` (all of its user's)."""
    if SCOPE_ALL_TENANTS in scopes:
        return None
    return frozenset(
        scope[len(TENANT_SCOPE_PREFIX) :]
        for scope in scopes
        if scope.startswith(TENANT_SCOPE_PREFIX) and len(scope) > len(TENANT_SCOPE_PREFIX)
    )


def is_agent(user: Any) -> bool:
    return (
        isinstance(user, User) and user.is_active and user.groups.filter(name=TOKEN_ROLE).exists()
    )


def granted_scopes(user: User, requested: list[str]) -> list[str]:
    """What the consent of ``user`` grants of ``requested``: ``agent`` and the tenant scopes
    the user holds (``tenant:*`` stays: it means the user's own tenants, read at each use)."""
    own = tenants_of(user)
    granted = [SCOPE_AGENT] if SCOPE_AGENT in requested else []
    for scope in requested:
        if scope == SCOPE_ALL_TENANTS:
            granted.append(scope)
        elif scope.startswith(TENANT_SCOPE_PREFIX):
            tenant = scope[len(TENANT_SCOPE_PREFIX) :]
            if own is None or tenant in own:
                granted.append(scope)
    return granted


# --- django-oauth-toolkit hooks ----------------------------------------------------------------


def access_token_text(request: Any, refresh_token: bool = False) -> str:
    """``ACCESS_TOKEN_GENERATOR``: ``rco_…`` (its scheme tells it from a static ``rca_`` token)."""
    return f"{ACCESS_TOKEN_SCHEME}_{secrets.token_urlsafe(32)}"


def refresh_token_text(request: Any, refresh_token: bool = False) -> str:
    return f"{REFRESH_TOKEN_SCHEME}_{secrets.token_urlsafe(32)}"


class _ScopeTexts(dict[str, str]):
    """Scope descriptions; any ``tenant:NAME`` has one, whether or not the tenant exists."""

    def __missing__(self, scope: str) -> str:
        if is_tenant_scope(scope):
            return f"The tenant {scope[len(TENANT_SCOPE_PREFIX) :]}"
        raise KeyError(scope)


def is_tenant_scope(scope: str) -> bool:
    name = scope[len(TENANT_SCOPE_PREFIX) :]
    return scope.startswith(TENANT_SCOPE_PREFIX) and bool(name) and name.isprintable()


class AgentScopes(BaseScopes):  # type: ignore[misc]
    """``agent`` and ``tenant:*`` published; ``tenant:NAME`` accepted for any name. The
    tenants of the deployment are never listed (the metadata is public, and an agent does not
    learn which tenants exist): a tenant scope grants what the consenting account holds, which
    for an unknown name is nothing."""

    def get_all_scopes(self) -> dict[str, str]:
        return _ScopeTexts(
            {
                SCOPE_AGENT: "Act as your agent account: search, retrieve, run skills, propose",
                SCOPE_ALL_TENANTS: "Every tenant your account is a member of",
            }
        )

    def get_available_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        return list(DEFAULT_SCOPES)

    def get_default_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        return list(DEFAULT_SCOPES)


class AgentValidator(OAuth2Validator):  # type: ignore[misc]
    """django-oauth-toolkit's validator with the agent rules: the resource must be this
    server's (the API or the MCP endpoint), the consenting user an active agent, the granted
    tenant scopes those the user holds (at least one)."""

    def validate_scopes(
        self, client_id: str, scopes: list[str], client: Any, request: Any, *args: Any, **kw: Any
    ) -> bool:
        return all(scope in DEFAULT_SCOPES or is_tenant_scope(scope) for scope in scopes)

    def _create_authorization_code(self, request: Any, code: Any, expires: Any = None) -> Any:
        if not is_agent(request.user):
            raise errors.AccessDeniedError(description=NOT_AN_AGENT, request=request)
        self._require_our_resources(request, getattr(request, "resource", None) or [])
        scopes = granted_scopes(request.user, list(request.scopes or []))
        if not any(scope.startswith(TENANT_SCOPE_PREFIX) for scope in scopes):
            raise errors.InvalidScopeError(description=NO_TENANT, request=request)
        if SCOPE_AGENT not in scopes:
            raise errors.InvalidScopeError(
                description=f"the scope {SCOPE_AGENT!r} is required", request=request
            )
        request.scopes = scopes
        with transaction.atomic():
            grant = super()._create_authorization_code(request, code, expires)
            event_record(
                actor=request.user,
                action=Action.AGENT_OAUTH_GRANT,
                target=f"oauth-client:{request.client.client_id}",
                details={
                    "client_name": request.client.name,
                    "scope": " ".join(scopes),
                    "resource": list(getattr(request, "resource", None) or []),
                },
            )
        return grant

    def _check_and_set_request_resource(self, request: Any) -> None:
        super()._check_and_set_request_resource(request)
        self._require_our_resources(request, request.resource)

    def _require_our_resources(self, request: Any, named: list[str]) -> None:
        if not named or not all(is_our_resource(uri) for uri in named):
            raise errors.CustomOAuth2Error(
                error="invalid_target",
                description=UNKNOWN_RESOURCE.format(mcp=mcp_resource(), api=api_resource()),
                request=request,
            )


REFUSED_CREDENTIAL = (
    "the token is invalid, expired, revoked, not issued for this resource, or its account may "
    "no longer use it"
)


def www_authenticate(resource: str, *, token_presented: bool) -> str:
    """RFC 6750 and RFC 9728: the challenge of a 401 from ``resource``. A request that
    presented a token is told it is invalid (``invalid_token``); one with none is only told
    where to learn how to get one."""
    parts = []
    if token_presented:
        parts += ['error="invalid_token"', f'error_description="{REFUSED_CREDENTIAL}"']
    parts.append(f'resource_metadata="{metadata_url(resource)}"')
    return "Bearer " + ", ".join(parts)
