"""Stored investigations in the admin: view-only, of the user's tenants (the service writes them)."""

from __future__ import annotations

from django.contrib import admin

from investigations.models import Investigation
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
