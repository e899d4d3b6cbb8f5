"""Browsers: which web pages may call the agent API and the MCP endpoint (CORS).

Only the origins named in ``CONSOLE_CORS_ALLOWED_ORIGINS`` (none by default): their preflight is
answered ``204`` with the methods and headers a client sends, and their answers carry
``Access-Control-Allow-Origin`` and expose the headers a client must read (``WWW-Authenticate``
on a 401, ``Retry-After`` on a 429, ``Mcp-Session-Id``, ``Location``). Any other origin's
preflight is refused ``403`` with a message naming the setting. No credentials are allowed: a
browser client sends the agent's token as a bearer header, never the console's session cookie
(docs/agents.md, Browsers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import patch_vary_headers

ORIGIN_REFUSED = (
    "origin {origin} may not call this server from a browser: only the origins listed in "
    "CONSOLE_CORS_ALLOWED_ORIGINS may (none by default)"
)
REQUEST_HEADERS = (
    "Authorization",
    "Content-Type",
    "Accept",
    "MCP-Protocol-Version",
    "Mcp-Session-Id",
    "Mcp-Method",
    "Mcp-Name",
    "Last-Event-ID",
)
EXPOSED_HEADERS = ("WWW-Authenticate", "Retry-After", "Mcp-Session-Id", "Location")
PREFLIGHT_MAX_AGE = 600
API_PREFIX = "/api/"


@dataclass(frozen=True)
class BrowserOrigins:
    origins: frozenset[str]

    @classmethod
    def configured(cls) -> BrowserOrigins:
        return cls(frozenset(settings.CONSOLE_CORS_ALLOWED_ORIGINS))

    def allows(self, origin: str) -> bool:
        return origin in self.origins

    def preflight_headers(self, origin: str, methods: Iterable[str]) -> dict[str, str]:
        return {
            **self.answer_headers(origin),
            "Access-Control-Allow-Methods": ", ".join(methods),
            "Access-Control-Allow-Headers": ", ".join(REQUEST_HEADERS),
            "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE),
        }

    @staticmethod
    def answer_headers(origin: str) -> dict[str, str]:
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Expose-Headers": ", ".join(EXPOSED_HEADERS),
            "Vary": "Origin",
        }


def is_preflight(method: str, headers: Mapping[str, str]) -> bool:
    """A browser's CORS preflight (given its ``Origin``): ``OPTIONS`` naming the method it will
    send. ``headers`` are read case-insensitively (Django's and Starlette's both are)."""
    return method == "OPTIONS" and headers.get("Access-Control-Request-Method") is not None


class ApiCorsMiddleware:
    """The agent API (``/api/``) for the allowed browser origins; other paths untouched."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        origins = BrowserOrigins.configured()
        origin = request.headers.get("Origin")
        if origin is not None and is_preflight(request.method or "", request.headers):
            if not origins.allows(origin):
                return JsonResponse({"detail": ORIGIN_REFUSED.format(origin=origin)}, status=403)
            return _with_headers(
                HttpResponse(status=204), origins.preflight_headers(origin, ("GET", "POST"))
            )
        response = self.get_response(request)
        if origin is not None and origins.allows(origin):
            _with_headers(response, origins.answer_headers(origin))
        return response


def _with_headers(response: HttpResponse, headers: dict[str, str]) -> HttpResponse:
    for name, value in headers.items():
        if name == "Vary":
            patch_vary_headers(response, [value])
        else:
            response[name] = value
    return response
