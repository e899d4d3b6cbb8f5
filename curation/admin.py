"""Django admin for curation: read-only. Decisions go through the console's audited services.

Like the console, the admin shows a tenant-limited user only the rows of their tenants.
"""

from __future__ import annotations

from django.contrib import admin

from curation.models import (
    CaseBand,
    CaseSignature,
    IncidentMerge,
    NearDuplicate,
    ReReview,
    SkillProposal,
    Thread,
    ThreadMessage,
)
from reviewconsole.admin_support import ReadOnlyAdmin as _ReadOnlyAdmin
from reviewconsole.admin_support import ReadOnlyInline


class TenantScopedAdmin(_ReadOnlyAdmin):
    tenant_field = "tenant"


class MessageInline(ReadOnlyInline):
    model = ThreadMessage
    fields = ("position", "message_id", "author", "role", "sent_at", "text")
    readonly_fields = fields


@admin.register(Thread)
class ThreadAdmin(TenantScopedAdmin):
    list_display = ("thread_id", "tenant", "title", "imported_by", "imported_at")
    list_filter = ("tenant",)
    search_fields = ("thread_id", "title")
    inlines = (MessageInline,)


@admin.register(NearDuplicate)
class NearDuplicateAdmin(TenantScopedAdmin):
    tenant_field = "case_a__tenant"
    list_display = ("case_a", "case_b", "similarity", "status", "detected_at", "resolved_by")
    list_filter = ("status",)


@admin.register(IncidentMerge)
class IncidentMergeAdmin(TenantScopedAdmin):
    list_display = ("tenant", "brand", "alias", "canonical", "merged_by", "merged_at")
    list_filter = ("tenant", "brand")
    search_fields = ("alias", "canonical", "into")


@admin.register(ReReview)
class ReReviewAdmin(TenantScopedAdmin):
    list_display = ("item_id", "reason", "document_id", "status", "resolution", "detected_at")
    list_filter = ("status", "reason", "item_type")
    search_fields = ("item_id", "title", "document_id")


@admin.register(SkillProposal)
class SkillProposalAdmin(TenantScopedAdmin):
    list_display = ("title", "pattern_kind", "pattern", "store", "deployment", "status")
    list_filter = ("status", "pattern_kind")


@admin.register(CaseSignature)
class CaseSignatureAdmin(TenantScopedAdmin):
    """The near-duplicate index: a case's MinHash signature (derived, never edited)."""

    tenant_field = "case__tenant"
    list_display = ("case", "scope_key", "threshold")
    search_fields = ("case__id",)


@admin.register(CaseBand)
class CaseBandAdmin(TenantScopedAdmin):
    tenant_field = "case__tenant"
    list_display = ("case", "scope_key", "key")
    search_fields = ("case__id", "key")


# After-action reviews drafted from runs (curation.aar_drafts).
from curation.models import (  # noqa: E402
    NotificationOptOut,
    NotificationSent,
    OutboxMail,
    RunDraft,
)


@admin.register(RunDraft)
class RunDraftAdmin(_ReadOnlyAdmin):
    list_display = ("run_id", "kind", "case_id", "attached", "drafted_at")
    list_filter = ("kind", "attached")
    search_fields = ("run_id", "case_id")


@admin.register(NotificationOptOut)
class NotificationOptOutAdmin(_ReadOnlyAdmin):
    list_display = ("user", "since")


@admin.register(NotificationSent)
class NotificationSentAdmin(_ReadOnlyAdmin):
    list_display = ("user", "kind", "key", "sent_at", "mail")
    list_filter = ("kind",)


@admin.register(OutboxMail)
class OutboxMailAdmin(_ReadOnlyAdmin):
    list_display = ("subject", "user", "state", "attempts", "created_at", "finished_at")
    list_filter = ("state",)
    search_fields = ("subject", "last_error")
