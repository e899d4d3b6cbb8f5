"""The authorization server's pages and documents (agentapi/oauth.py says what they enforce).

- ``/oauth/authorize/`` — django-oauth-toolkit's consent page, for a logged-in agent account
  only; the resource named must be this server's.
- ``/oauth/token/``, ``/oauth/revoke_token/`` — django-oauth-toolkit's.
- ``/oauth/register/`` — RFC 7591 registration while ``CONSOLE_OAUTH_DYNAMIC_REGISTRATION`` is
  on; a JSON refusal (403, ``registration_not_supported``) while it is off.
- ``/.well-known/oauth-authorization-server`` — RFC 8414 metadata (django-oauth-toolkit's).
- ``/.well-known/oauth-protected-resource[/api/v1]`` — RFC 9728 metadata of the HTTP API.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider import views as dot
from oauth2_provider.views.dynamic_client_registration import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)

from agentapi import oauth


class AgentAuthorizationView(dot.AuthorizationView):  # type: ignore[misc]
    """Consent to an agent client, by the agent account it will act as."""

    template_name = "agentapi/oauth_authorize.html"

    # Django's login check runs first (``LoginRequiredMixin``): these see a logged-in user.
    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = self._refusal(request, request.GET.getlist("resource"))
        if refused is not None:
            return refused
        return _redirect_allowed(request, super().get(request, *args, **kwargs))

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = self._refusal(request, None)
        if refused is not None:
            return refused
        return _redirect_allowed(request, super().post(request, *args, **kwargs))

    def _refusal(self, request: HttpRequest, named: list[str] | None) -> HttpResponse | None:
        if not oauth.is_agent(request.user):
            return render(request, self.template_name, {"refused": True}, status=403)
        if named is not None and not (named and all(oauth.is_our_resource(u) for u in named)):
            # RFC 8707: a token for no resource, or for another server's, is not issued here.
            description = oauth.UNKNOWN_RESOURCE.format(
                mcp=oauth.mcp_resource(), api=oauth.api_resource()
            )
            return JsonResponse(
                {"error": "invalid_target", "error_description": description}, status=400
            )
        return None


def _redirect_allowed(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """The consent form's answer redirects to the client: the page's CSP ``form-action`` must
    allow that origin, or a browser stops the redirect."""
    redirect = request.GET.get("redirect_uri") or request.POST.get("redirect_uri")
    parts = urlsplit(redirect or "")
    if parts.scheme in ("http", "https") and parts.netloc:
        response._csp_update = {"form-action": [f"{parts.scheme}://{parts.netloc}"]}  # type: ignore[attr-defined]
    return response


@csrf_exempt
def registration(request: HttpRequest) -> HttpResponse:
    """RFC 7591 while switched on; a clear JSON refusal otherwise (never a 401)."""
    if not oauth.dynamic_registration_on():
        return JsonResponse(oauth.REGISTRATION_OFF, status=403)
    response: HttpResponse = DynamicClientRegistrationView.as_view()(request)
    return response


def protected_resource(request: HttpRequest) -> JsonResponse:
    """RFC 9728: the HTTP API's metadata (at the root form and the path-suffixed one)."""
    response = JsonResponse(oauth.resource_metadata(oauth.api_resource()))
    response["Access-Control-Allow-Origin"] = "*"
    return response


oauth_urlpatterns = [
    path("authorize/", AgentAuthorizationView.as_view(), name="authorize"),
    path("token/", dot.TokenView.as_view(), name="token"),
    path("revoke_token/", dot.RevokeTokenView.as_view(), name="revoke-token"),
    path("register/", registration, name="dcr-register"),
    # RFC 7592: a registered client reads, updates or deletes its own registration.
    path(
        "register/<str:client_id>/",
        DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

well_known_urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        dot.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        protected_resource,
        name="oauth-resource-metadata",
    ),
    path(
        f".well-known/oauth-protected-resource{oauth.API_PATH}",
        protected_resource,
        name="oauth-resource-metadata-api",
    ),
]
