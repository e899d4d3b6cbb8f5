"""Stored investigations in the admin: view-only, of the user's tenants (the service writes them)."""

from __future__ import annotations

from django.contrib import admin

from investigations.models import Investigation, InvestigationRequest
from reviewconsole.admin_support import ReadOnlyAdmin


@admin.register(Investigation)
class InvestigationAdmin(ReadOnlyAdmin):
    tenant_field = "tenant"
    list_display = ("run_id", "started_at", "status", "provider", "tool_calls", "tenant", "actor")
    list_filter = ("status", "provider", "tenant")
    search_fields = ("run_id", "text")
    readonly_fields = (
        "run_id",
        "text",
        "tenant",
        "brand",
        "store",
        "campaign",
        "deployment",
        "context",
        "provider",
        "status",
        "reason",
        "answer",
        "verification",
        "raw_answer",
        "missing",
        "steps",
        "tool_calls",
        "budget",
        "started_at",
        "finished_at",
        "actor",
    )


@admin.register(InvestigationRequest)
class InvestigationRequestAdmin(ReadOnlyAdmin):
    """Tickets entered on the console and their background runs (the finished run is linked)."""

    tenant_field = "tenant"
    list_display = ("run_id", "created_at", "state", "tenant", "actor", "investigation")
    list_filter = ("state", "tenant")
    search_fields = ("run_id", "text")
    readonly_fields = (
        "run_id",
        "tenant",
        "text",
        "arguments",
        "state",
        "steps",
        "error",
        "investigation",
        "actor",
        "created_at",
        "updated_at",
    )
