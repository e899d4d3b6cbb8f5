"""The MCP tools over Streamable HTTP, the MCP specification's remote transport (docs/contracts.md,
MCP).

One ASGI application (served by ``manage.py mcp_server --http``, under uvicorn):

- ``POST /mcp`` — the MCP endpoint (any other method is 405: no server-initiated stream, no
  session to end). Every request must carry ``Authorization: Bearer <agent token>`` (a static
  agent token, or an OAuth access token issued for this endpoint); the SDK's
  ``BearerAuthBackend`` checks it through ``ConsoleTokens`` (the API's validator,
  ``agentapi.auth.token_user``) and ``RequireAgent`` answers ``401`` with ``WWW-Authenticate:
  Bearer`` otherwise. A tool call then authenticates its request's token again and acts as its
  user (``agentapi.mcp_server.build_http_server``): the identity is the token's, never an argument.
- ``GET /healthz`` — ``{"ok": true}`` while the process serves (no token, nothing read).
- ``GET /.well-known/oauth-protected-resource`` and ``…/oauth-protected-resource/mcp`` — the
  endpoint's RFC 9728 metadata (its resource identifier, the console as its authorization
  server); every other ``/.well-known/…`` path is a JSON 404 and ``/register`` a JSON answer
  (registration happens at the authorization server): none of them asks for a token, so an
  OAuth client that was handed a bad token ends at "invalid token", never at a 401 from
  discovery. A 401 carries ``WWW-Authenticate: Bearer … resource_metadata="…"``
  (agentapi/oauth.py).

The transport is stateless and answers JSON (no SSE stream, no ``Mcp-Session-Id``): every
request stands alone, so several processes behind a load balancer serve any request, and a
revoked token fails on its next request whichever process gets it. Host and Origin headers are
checked against ``ALLOWED_HOSTS`` (DNS rebinding protection).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agentapi import oauth
from agentapi.auth import token_user
from agentapi.mcp_server import build_http_server
from reviewconsole.health import HEALTH_PATH

MCP_PATH = oauth.MCP_PATH
WELL_KNOWN = "/.well-known/"
REGISTER_PATH = "/register"


def _agent(token: str) -> int | None:
    close_old_connections()
    try:
        user = token_user(token, resource=oauth.mcp_resource())
        return None if user is None else user.pk
    finally:
        close_old_connections()


class ConsoleTokens:
    """The SDK's ``TokenVerifier`` for agent tokens: a valid, unrevoked token of an active agent
    (a static agent token, or an OAuth access token issued for this endpoint) is an access token
    whose subject is its user; anything else is None (a 401)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        user_id = await sync_to_async(_agent, thread_sensitive=False)(token)
        if user_id is None:
            return None
        return AccessToken(
            token=token, client_id=f"agent:{user_id}", subject=str(user_id), scopes=[]
        )


def transport_security() -> TransportSecuritySettings:
    """Host and Origin checks from ``ALLOWED_HOSTS`` (``*`` switches them off, as in Django).
    A host is accepted with any port; an Origin header, when a client sends one, must be one of
    these hosts over http or https."""
    hosts = [host for host in settings.ALLOWED_HOSTS if host]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts = [form for host in hosts for form in (host, f"{host}:*")]
    allowed_origins = [
        form
        for host in hosts
        for scheme in ("http", "https")
        for form in (f"{scheme}://{host}", f"{scheme}://{host}:*")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )


class McpHttpApp:
    """``/healthz`` open, everything else behind the bearer token; the lifespan (which runs the
    SDK's session manager) goes to the MCP application."""

    def __init__(self) -> None:
        server = build_http_server()
        self.mcp = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            transport_security=transport_security(),
        )
        self.guarded: ASGIApp = AuthenticationMiddleware(
            RequireAgent(self.mcp), backend=BearerAuthBackend(ConsoleTokens())
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.mcp(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] == HEALTH_PATH:
            await _health(scope, receive, send)
        elif scope["type"] == "http" and scope["path"].startswith(WELL_KNOWN):
            await _well_known(scope, receive, send)
        elif scope["type"] == "http" and scope["path"].rstrip("/") == REGISTER_PATH:
            await _register(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] == MCP_PATH and scope["method"] != "POST":
            # No stream for the server to open and no session to end: the specification's
            # answer to GET and DELETE on a server without them.
            await _post_only(scope, receive, send)
        else:
            await self.guarded(scope, receive, send)


class RequireAgent:
    """A request the bearer backend found no agent for is a 401 whose challenge names the
    endpoint's protected resource metadata (RFC 9728), with ``error="invalid_token"`` when a
    token was presented (RFC 6750: none when none was)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        presented = "authorization" in Headers(scope=scope)
        challenge = oauth.www_authenticate(oauth.mcp_resource(), token_presented=presented)
        body = {"error": "invalid_token", "error_description": oauth.REFUSED_CREDENTIAL}
        if not presented:
            body["error_description"] = (
                "send Authorization: Bearer <agent token>, or an OAuth access token (the "
                "resource metadata in WWW-Authenticate names the authorization server)"
            )
        response = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge})
        await response(scope, receive, send)


async def _well_known(scope: Scope, receive: Receive, send: Send) -> None:
    """RFC 9728 metadata at the root form and the endpoint's path-suffixed form; any other
    well-known document is not served here (a JSON 404, never a 401)."""
    resource = oauth.mcp_resource()
    path = scope["path"].rstrip("/")
    served = {oauth.PROTECTED_RESOURCE_WELL_KNOWN, _path_of(oauth.metadata_url(resource))}
    if path in served:
        document = oauth.resource_metadata(resource)
        await JSONResponse(document, headers={"Access-Control-Allow-Origin": "*"})(
            scope, receive, send
        )
        return
    body = {
        "error": "not_found",
        "error_description": (
            f"not served here; the authorization server's metadata is at {oauth.issuer()}"
            "/.well-known/oauth-authorization-server"
        ),
    }
    await JSONResponse(body, status_code=404)(scope, receive, send)


def _path_of(url: str) -> str:
    return "/" + url.split("://", 1)[1].partition("/")[2]


async def _register(scope: Scope, receive: Receive, send: Send) -> None:
    """Clients register with the authorization server, not here: while dynamic registration
    is off, the same refusal the authorization server gives (403); while on, where to go."""
    if not oauth.dynamic_registration_on():
        await JSONResponse(oauth.REGISTRATION_OFF, status_code=403)(scope, receive, send)
        return
    body = {
        "error": "not_found",
        "error_description": f"register at {oauth.issuer()}/oauth/register/",
    }
    await JSONResponse(body, status_code=404)(scope, receive, send)


async def _health(scope: Scope, receive: Receive, send: Send) -> None:
    body: dict[str, Any] = {"ok": True}
    await JSONResponse(body)(scope, receive, send)


async def _post_only(scope: Scope, receive: Receive, send: Send) -> None:
    body = {"error": "method_not_allowed", "error_description": "POST JSON-RPC messages here"}
    await JSONResponse(body, status_code=405, headers={"Allow": "POST"})(scope, receive, send)


def application() -> McpHttpApp:
    return McpHttpApp()
