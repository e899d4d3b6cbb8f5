"""Held-out tickets and replay reports in the admin: view-only.

Registration goes through ``hold_out``/``replay`` (leak check, audit), not admin edits.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from evaluation.models import HeldoutRun, HeldoutTicket, ReplayReport


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class HeldoutRunInline(admin.TabularInline[HeldoutRun, HeldoutTicket]):
    model = HeldoutRun
    fields = ("run_id",)
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(HeldoutTicket)
class HeldoutTicketAdmin(ReadOnlyAdmin):
    list_display = ("ticket_id", "ticket_set", "registered_at", "registered_by")
    list_filter = ("ticket_set",)
    search_fields = ("ticket_id", "runs__run_id")
    inlines = [HeldoutRunInline]


@admin.register(ReplayReport)
class ReplayReportAdmin(ReadOnlyAdmin):
    list_display = ("pk", "created_at", "ticket_set", "memory", "tickets", "created_by")
    list_filter = ("memory", "ticket_set")
    exclude = ("chart",)
    readonly_fields = (
        "created_at",
        "created_by",
        "ticket_set",
        "set_hash",
        "memory",
        "tickets",
        "with_memory",
        "without_memory",
        "result",
    )
