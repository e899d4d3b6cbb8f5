"""The admin of OAuth access tokens (django-oauth-toolkit's, registered through its
``ACCESS_TOKEN_ADMIN_CLASS`` setting): revoking one revokes its refresh token with it, so the
client cannot mint another, and is audited."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from oauth2_provider.admin import AccessTokenAdmin

from reviewconsole import permissions as P
from reviewconsole.audit import event_record
from reviewconsole.models import Action


class AgentAccessTokenAdmin(AccessTokenAdmin):  # type: ignore[misc]
    """Read-only but for revoking: whoever may see and revoke agents' static API tokens (the
    admin role) may see and revoke their OAuth tokens too; no one edits a token."""

    list_display = ("pk", "user", "application", "scope", "resource", "expires")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm(P.VIEW_APITOKEN)) or bool(
            super().has_view_permission(request, obj)
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(P.REVOKE_APITOKEN))

    @admin.action(
        description="Revoke selected access tokens (and their refresh tokens)",
        permissions=["revoke"],
    )
    @transaction.atomic
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for token in queryset.select_related("application", "user"):
            event_record(
                actor=request.user,
                action=Action.AGENT_OAUTH_REVOKE,
                target=f"oauth-token:{token.pk}",
                details={
                    "user": token.user.get_username() if token.user else None,
                    "client_id": token.application.client_id if token.application else None,
                    "scope": token.scope,
                },
            )
        super().revoke_tokens(request, queryset)
