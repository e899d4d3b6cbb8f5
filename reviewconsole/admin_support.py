"""Shared Django admin pieces: read-only views of hashed content, scoped to the user's tenants."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from reviewconsole.tenancy import is_deployment_wide, visible


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    """Rows that only services write: listed and shown, never added, changed or deleted here."""

    # The lookup to the row's tenant; rows without one are shown to deployment-wide users only.
    tenant_field: str | None = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        return visible(rows, request.user, self.tenant_field) if self.tenant_field else rows

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self.tenant_field is None and not is_deployment_wide(request.user):
            return False
        return super().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline[Any, Any]):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
