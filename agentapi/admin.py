"""Agent API tokens in the admin: listed and revocable; the token text is never stored or shown.

Tokens are issued only on the shell (`manage.py create_token`), and only to agents.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from agentapi.models import ApiToken, LiveRun, RateCount
from agentapi.services import token_revoke
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import REVOKE_APITOKEN
from reviewconsole.services import users_manageable_by
from reviewconsole.tenancy import is_deployment_wide


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = ("prefix", "name", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "created_at")
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    # token_hash is left out on purpose: nothing about the secret is shown.
    fields = ("prefix", "name", "user", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        # The tokens of the users this admin manages: a tenant-limited admin sees its tenants'.
        manageable = users_manageable_by(acting_user(request)).values("pk")
        return super().get_queryset(request).filter(user__in=manageable)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Tokens are issued by `manage.py create_token`, which shows the token text once.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(REVOKE_APITOKEN)

    @admin.action(description=_("Revoke selected tokens"), permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        actor = acting_user(request)
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                token_revoke(token=token, actor=actor, reason="revoked in the admin")
            except (ValidationFailure, PermissionRefused):
                continue  # revoked meanwhile by someone else, or its user left this admin's reach
            revoked += 1
        self.message_user(request, f"{revoked} token(s) revoked.", messages.SUCCESS)


@admin.register(RateCount)
class RateCountAdmin(admin.ModelAdmin[RateCount]):
    """The agent API's request counts per account and window: read-only, deployment-wide users."""

    list_display = ("key", "period_seconds", "period_index", "hits")
    readonly_fields = list_display

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: RateCount | None = None) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: RateCount | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: RateCount | None = None) -> bool:
        return False


@admin.register(LiveRun)
class LiveRunAdmin(admin.ModelAdmin[LiveRun]):
    """Live investigations answered within MCP calls, as the limit counts them: read-only,
    deployment-wide users (a row left by a dead process stops counting by itself)."""

    list_display = ("actor", "started_at")
    readonly_fields = list_display

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: LiveRun | None = None) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: LiveRun | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: LiveRun | None = None) -> bool:
        return False
