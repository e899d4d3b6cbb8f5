"""Held-out tickets and replay reports in the admin: view-only.

Registration goes through ``hold_out``/``replay`` (leak check, audit), not admin edits.
"""

from __future__ import annotations

from django.contrib import admin

from evaluation.models import HeldoutRun, HeldoutTicket, ReplayReport
from reviewconsole.admin_support import ReadOnlyAdmin, ReadOnlyInline


class HeldoutRunInline(ReadOnlyInline):
    model = HeldoutRun
    fields = ("run_id",)
    readonly_fields = fields


@admin.register(HeldoutTicket)
class HeldoutTicketAdmin(ReadOnlyAdmin):
    list_display = ("ticket_id", "ticket_set", "tenant", "registered_at", "registered_by")
    list_filter = ("ticket_set",)
    search_fields = ("ticket_id", "runs__run_id")
    inlines = [HeldoutRunInline]
    tenant_field = "tenant"


@admin.register(ReplayReport)
class ReplayReportAdmin(ReadOnlyAdmin):
    list_display = ("pk", "created_at", "ticket_set", "tenant", "memory", "tickets", "created_by")
    list_filter = ("memory", "ticket_set")
    exclude = ("chart",)
    tenant_field = "tenant"
    readonly_fields = (
        "created_at",
        "created_by",
        "ticket_set",
        "tenant",
        "set_hash",
        "memory",
        "tickets",
        "with_memory",
        "without_memory",
        "result",
    )
