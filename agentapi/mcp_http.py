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
revoked token fails on its next request whichever process gets it. Before the SDK reads a
message, ``agentapi.jsonrpc_gate`` answers what JSON-RPC and the protocol version header say
(parse errors, invalid requests, batches under 2025-03-26).

Browsers (``agentapi.cors``): a request with an ``Origin`` header is served only when that origin
is in ``CONSOLE_CORS_ALLOWED_ORIGINS`` or names one of ``ALLOWED_HOSTS`` (DNS rebinding
protection, which the MCP transport specification requires, whatever ``ALLOWED_HOSTS`` says);
any other is ``403``. The Host header is checked against ``ALLOWED_HOSTS`` (``*``: any).
Preflights (``OPTIONS``) of the listed origins are answered ``204``, others ``403``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    RequestBodyLimitMiddleware,
    TransportSecuritySettings,
)
from starlette.datastructures import Headers
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentapi import oauth
from agentapi.auth import token_user
from agentapi.cors import ORIGIN_REFUSED, BrowserOrigins, is_preflight
from agentapi.jsonrpc_gate import JsonRpcGate
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


def _named_hosts() -> list[str]:
    return [host for host in settings.ALLOWED_HOSTS if host and host != "*"]


def transport_security() -> TransportSecuritySettings:
    """The SDK's Host and Origin checks from ``ALLOWED_HOSTS`` (``*`` switches its checks off,
    as in Django; ``origin_allowed`` still checks every Origin). A host is accepted with any
    port; an Origin header, when a client sends one, must be one of these hosts over http or
    https, or a listed browser origin."""
    if "*" in settings.ALLOWED_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = _named_hosts()
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
        allowed_origins=[*allowed_origins, *settings.CONSOLE_CORS_ALLOWED_ORIGINS],
    )


def origin_allowed(origin: str, browsers: BrowserOrigins) -> bool:
    """A listed browser origin, or an http(s) origin on one of the named ``ALLOWED_HOSTS`` (any
    port): a page whose host name is not the server's (DNS rebinding) is refused even when
    ``ALLOWED_HOSTS`` is ``*``."""
    if browsers.allows(origin):
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.hostname in _named_hosts()


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
        gate = RequestBodyLimitMiddleware(JsonRpcGate(self.mcp), DEFAULT_MAX_REQUEST_BODY_SIZE)
        self.guarded: ASGIApp = AuthenticationMiddleware(
            RequireAgent(gate), backend=BearerAuthBackend(ConsoleTokens())
        )
        self.browsers = BrowserOrigins.configured()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.mcp(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] == HEALTH_PATH:
            await _health(scope, receive, send)
        elif scope["type"] == "http" and scope["path"].startswith(WELL_KNOWN):
            await _well_known(scope, receive, send)
        elif scope["type"] == "http" and scope["path"].rstrip("/") == REGISTER_PATH:
            await _register(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] == MCP_PATH:
            await self._mcp_request(scope, receive, send)
        else:
            await self.guarded(scope, receive, send)

    async def _mcp_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin, self.browsers):
            await _origin_refused(origin)(scope, receive, send)
        elif origin is not None and is_preflight(scope["method"], headers):
            if not self.browsers.allows(origin):
                await _origin_refused(origin)(scope, receive, send)
            else:
                answer = self.browsers.preflight_headers(origin, ("POST",))
                await Response(status_code=204, headers=answer)(scope, receive, send)
        elif scope["method"] != "POST":
            # No stream for the server to open and no session to end: the specification's
            # answer to GET and DELETE on a server without them.
            await _post_only(scope, receive, send)
        elif origin is not None and self.browsers.allows(origin):
            await self.guarded(
                scope, receive, _with_headers(send, self.browsers.answer_headers(origin))
            )
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


def _origin_refused(origin: str) -> Response:
    body = {"error": "forbidden_origin", "error_description": ORIGIN_REFUSED.format(origin=origin)}
    return JSONResponse(body, status_code=403)


def _with_headers(send: Send, extra: dict[str, str]) -> Send:
    """``send`` adding ``extra`` headers to the response's start."""
    encoded = [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in extra.items()
    ]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *encoded]}
        await send(message)

    return sending


async def _post_only(scope: Scope, receive: Receive, send: Send) -> None:
    body = {"error": "method_not_allowed", "error_description": "POST JSON-RPC messages here"}
    await JSONResponse(body, status_code=405, headers={"Allow": "POST, OPTIONS"})(
        scope, receive, send
    )


def application() -> McpHttpApp:
    return McpHttpApp()
