"""The audit log in the admin: read-only, filterable, never edited or deleted."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.http import HttpRequest

from reviewconsole.models import ChainHead, Event, TenantMembership
from reviewconsole.tenancy import is_deployment_wide


@admin.register(Event)
class EventAdmin(admin.ModelAdmin[Event]):
    list_display = ("created_at", "actor_name", "action", "target", "reason")
    list_filter = ("action", "created_at")
    search_fields = ("actor_name", "target", "reason")
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "actor", "actor_name", "action", "target", "reason", "details")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        # Events span every tenant: only deployment-wide users read them.
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        return False


@admin.register(ChainHead)
class ChainHeadAdmin(admin.ModelAdmin[ChainHead]):
    """The audit chain's signed heads: read-only, for the same readers as the audit log."""

    list_display = ("id", "count", "event_id", "hash")
    readonly_fields = ("count", "event_id", "hash", "signature")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: ChainHead | None = None) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: ChainHead | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ChainHead | None = None) -> bool:
        return False


class TenantMembershipInline(admin.TabularInline[TenantMembership, User]):
    """The tenants a user is limited to; none means deployment-wide."""

    model = TenantMembership
    extra = 0
    fields = ("tenant",)


class ConsoleUserAdmin(UserAdmin):
    inlines = (*UserAdmin.inlines, TenantMembershipInline)


admin.site.unregister(User)
admin.site.register(User, ConsoleUserAdmin)
