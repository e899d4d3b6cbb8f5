"""Django admin for the experience memory: hashed content and history are read-only.

Review decisions go through the console (services with four eyes and audit), not through
admin edits, so every model here is view-only.
"""

from __future__ import annotations

from django.contrib import admin

from experience.cases.models import Case, Evidence, EvidenceCheck, Skill, SkillCase
from experience.index.models import IndexDelta, IndexEntry, IndexPosting, IndexScope
from experience.lessons.models import Lesson, LessonCase, LessonConflict, LessonMergeProposal
from experience.runs.models import Reference, RevocationImpact, Run, RunCitation, RunFollowUp
from reviewconsole.admin_support import ReadOnlyAdmin, ReadOnlyInline
from reviewconsole.scopes import SCOPE_FIELDS
from textsearch.admin import DeltaAdmin, EntryAdmin, PostingAdmin


class EvidenceInline(ReadOnlyInline):
    model = Evidence
    fields = ("key", "source_id", "excerpt")
    readonly_fields = fields


@admin.register(Case)
class CaseAdmin(ReadOnlyAdmin):
    tenant_field = "tenant"
    list_display = ("id", "title", "incident", "store", "deployment", "status", "submitted_by")
    list_filter = ("status", *SCOPE_FIELDS, "submitted_via")
    search_fields = ("id", "title", "incident", "summary")
    inlines = (EvidenceInline,)


@admin.register(Skill)
class SkillAdmin(ReadOnlyAdmin):
    tenant_field = "tenant"
    list_display = ("id", "title", "store", "deployment", "status", "submitted_by")
    list_filter = ("status", *SCOPE_FIELDS)
    search_fields = ("id", "title", "when")


@admin.register(SkillCase)
class SkillCaseAdmin(ReadOnlyAdmin):
    tenant_field = "skill__tenant"
    list_display = ("skill", "case", "position")
    search_fields = ("skill__id", "case__id")


@admin.register(Evidence)
class EvidenceAdmin(ReadOnlyAdmin):
    tenant_field = "case__tenant"
    list_display = ("case", "key", "source_id")
    search_fields = ("case__id", "source_id", "excerpt")


@admin.register(EvidenceCheck)
class EvidenceCheckAdmin(ReadOnlyAdmin):
    tenant_field = "evidence__case__tenant"
    list_display = ("evidence", "checked_by", "checked_at")
    list_filter = ("checked_by",)


@admin.register(Reference)
class ReferenceAdmin(ReadOnlyAdmin):
    list_display = ("run_id", "item_id", "item_type", "read_at")
    list_filter = ("item_type",)
    search_fields = ("run_id", "item_id")


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    tenant_field = "tenant"
    list_display = ("run_id", "skill_id", "status", "tool_calls", "started_at")
    list_filter = ("status", "deployment")
    search_fields = ("run_id", "skill_id")


@admin.register(RunCitation)
class RunCitationAdmin(ReadOnlyAdmin):
    list_display = ("run_id_text", "document_id")
    search_fields = ("run_id_text", "document_id")


@admin.register(RevocationImpact)
class RevocationImpactAdmin(ReadOnlyAdmin):
    list_display = ("item_id", "item_type", "revoked_by", "created_at")
    list_filter = ("item_type",)
    search_fields = ("item_id",)


class LessonCaseInline(ReadOnlyInline):
    model = LessonCase
    fields = ("case", "relation", "position")
    readonly_fields = fields


@admin.register(Lesson)
class LessonAdmin(ReadOnlyAdmin):
    tenant_field = "tenant"
    list_display = ("id", "title", "lesson_type", "store", "deployment", "status", "submitted_by")
    list_filter = ("status", "lesson_type", *SCOPE_FIELDS)
    search_fields = ("id", "title", "scene_description", "conclusion")
    inlines = (LessonCaseInline,)


@admin.register(LessonConflict)
class LessonConflictAdmin(ReadOnlyAdmin):
    tenant_field = "tenant"
    list_display = ("pk", "lesson_a", "lesson_b", "found_by", "status", "detected_at")
    list_filter = ("status", "found_by", "detected_on")
    search_fields = ("lesson_a__id", "lesson_b__id")


@admin.register(LessonMergeProposal)
class LessonMergeProposalAdmin(ReadOnlyAdmin):
    tenant_field = "candidate__tenant"
    list_display = ("pk", "candidate", "target", "similarity", "proposed_at")
    search_fields = ("candidate__id", "target__id")


# Run owners and outcomes (experience.runs.models).
from experience.runs.models import RunOutcome, RunOwner  # noqa: E402


@admin.register(RunOutcome)
class RunOutcomeAdmin(ReadOnlyAdmin):
    list_display = ("run_id", "outcome", "reported_by", "reported_at")
    list_filter = ("outcome",)
    search_fields = ("run_id", "note")


@admin.register(RunOwner)
class RunOwnerAdmin(ReadOnlyAdmin):
    tenant_field = "tenant"
    list_display = ("run_id", "name", "owner", "tenant", "first_read_at")
    search_fields = ("run_id", "name")


@admin.register(RunFollowUp)
class RunFollowUpAdmin(ReadOnlyAdmin):
    """Flagged by revocations, cleared in the console (audited); never edited here."""

    list_display = ("run_id", "flagged_at", "followed_up_by", "followed_up_at")
    list_filter = ("followed_up_at",)
    search_fields = ("run_id",)


# The retrieval index is derived from approved memory and rebuilt from it; shown for inspection.
@admin.register(IndexScope)
class IndexScopeAdmin(ReadOnlyAdmin):
    tenant_field = "tenant"
    list_display = (*SCOPE_FIELDS, "stamp")


@admin.register(IndexEntry)
class IndexEntryAdmin(EntryAdmin):
    list_display = ("item_id", "kind", "title", "scope")
    list_filter = ("kind",)


@admin.register(IndexPosting)
class IndexPostingAdmin(PostingAdmin):
    pass


@admin.register(IndexDelta)
class IndexDeltaAdmin(DeltaAdmin):
    """A change waiting to be merged into its scope's array and posting lists."""
