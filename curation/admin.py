"""Django admin for curation: read-only. Decisions go through the console's audited services.

Like the console, the admin shows a tenant-limited user only the rows of their tenants.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from curation.models import (
    IncidentMerge,
    NearDuplicate,
    ReReview,
    SkillProposal,
    Thread,
    ThreadMessage,
)
from reviewconsole.tenancy import visible


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    # The lookup to the row's tenant.
    tenant_field = "tenant"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return visible(super().get_queryset(request), request.user, self.tenant_field)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MessageInline(admin.TabularInline[ThreadMessage, Thread]):
    model = ThreadMessage
    fields = ("position", "message_id", "author", "role", "sent_at", "text")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = ("thread_id", "tenant", "title", "imported_by", "imported_at")
    list_filter = ("tenant",)
    search_fields = ("thread_id", "title")
    inlines = (MessageInline,)


@admin.register(NearDuplicate)
class NearDuplicateAdmin(ReadOnlyAdmin):
    tenant_field = "case_a__tenant"
    list_display = ("case_a", "case_b", "similarity", "status", "detected_at", "resolved_by")
    list_filter = ("status",)


@admin.register(IncidentMerge)
class IncidentMergeAdmin(ReadOnlyAdmin):
    list_display = ("tenant", "brand", "alias", "canonical", "merged_by", "merged_at")
    list_filter = ("tenant", "brand")
    search_fields = ("alias", "canonical", "into")


@admin.register(ReReview)
class ReReviewAdmin(ReadOnlyAdmin):
    list_display = ("item_id", "reason", "document_id", "status", "resolution", "detected_at")
    list_filter = ("status", "reason", "item_type")
    search_fields = ("item_id", "title", "document_id")


@admin.register(SkillProposal)
class SkillProposalAdmin(ReadOnlyAdmin):
    list_display = ("title", "pattern_kind", "pattern", "store", "deployment", "status")
    list_filter = ("status", "pattern_kind")
