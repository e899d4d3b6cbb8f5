"""Operators maintain documents in the Django admin: versions, never edits in place."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.db.models.options import Options
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from knowledge import hooks
from knowledge.hooks import revocation_preview
from knowledge.models import (
    Document,
    DocumentStore,
    LexiconState,
    PostingList,
    SearchDelta,
    SearchEntry,
    SearchScope,
    Synonym,
)
from knowledge.schema import parse_document
from knowledge.services import (
    NOTHING_CHANGED,
    document_add,
    document_approve,
    document_save_new_version,
    document_unchanged,
    four_eyes_required,
    lexicon_editable,
    require_tenant_kept,
    synonym_delete,
    synonym_set,
)
from reviewconsole import clock
from reviewconsole.admin_support import ReadOnlyAdmin, ReadOnlyInline
from reviewconsole.display import ShownInUtc
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import (
    ADD_SYNONYM,
    APPROVE_DOCUMENT,
    CHANGE_SYNONYM,
    DELETE_SYNONYM,
    REVOKE_DOCUMENT,
    VIEW_DOCUMENT,
)
from reviewconsole.tenancy import is_deployment_wide, visible
from reviewconsole.timeparse import to_utc_iso
from reviewconsole.views import refusal_as_403
from textsearch.admin import DeltaAdmin, EntryAdmin, PostingAdmin

CONTENT_FIELDS = (
    "doc_key",
    "version",
    "tenant",
    "brand",
    "campaign",
    "kind",
    "rule_key",
    "title",
    "text",
    "source",
    "valid_from",
    "valid_to",
    "published_at",
    "requirements",
)


PUBLISHED_AT_HELP = "When this version becomes known; empty means the moment it is saved."


class DocumentForm(forms.ModelForm[Document]):
    stores = forms.CharField(
        help_text="Store codes separated by commas, e.g. store-001, store-004",
        widget=forms.TextInput(attrs={"size": 60}),
    )

    class Meta:
        model = Document
        fields = [*CONTENT_FIELDS]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.published_given = False
        # For a user who may only view documents every field is read-only, so none is in the form.
        fields = self.fields
        if "published_at" in fields:
            fields["published_at"].required = False
            fields["published_at"].help_text = PUBLISHED_AT_HELP
        if self.instance.pk:
            self.initial["stores"] = ", ".join(
                self.instance.store_rows.values_list("store", flat=True)
            )
            # A new version is published when its author says, never when the last one was.
            self.initial["published_at"] = None
            # An instant stored without a local time (before dates were bounded) cannot be
            # edited as one: the author types a new one.
            for name in ("valid_from", "valid_to"):
                if isinstance(self.initial.get(name), ShownInUtc):
                    self.initial[name] = None
            for name in ("version", "doc_key"):
                if name in fields:
                    fields[name].disabled = True
            if "version" in fields:
                fields["version"].help_text = "Saving creates the next version of this key."
        elif "version" in fields:
            fields["version"].required = False
            fields["version"].help_text = "Leave empty for the next free version."

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        stores = [s.strip() for s in str(data.get("stores", "")).split(",") if s.strip()]
        raw = {name: data.get(name) for name in CONTENT_FIELDS}
        raw["version"] = raw["version"] or 1
        raw["rule_key"] = raw["rule_key"] or None
        self.published_given = raw["published_at"] is not None
        if not self.published_given:
            raw["published_at"] = clock.now()
        for name in ("valid_from", "valid_to", "published_at"):
            raw[name] = to_utc_iso(raw[name])
        raw["stores"] = stores
        raw["requirements"] = raw["requirements"] if raw["requirements"] is not None else {}
        try:
            self.parsed = parse_document(raw).content
        except ValidationFailure as failure:
            root = failure.field.split(".")[0].split("[")[0]
            target = root if root in self.fields else None
            self.add_error(target, failure.message if target else str(failure))
            return data
        if self.instance.pk:
            try:
                require_tenant_kept(base=self.instance, tenant=self.parsed.tenant)
            except PermissionRefused as refused:
                self.add_error("tenant", refused.message)
                return data
        if self.instance.pk and document_unchanged(
            base=self.instance, content=self.parsed, published_given=self.published_given
        ):
            self.add_error(None, NOTHING_CHANGED)
        return data


class _SaveRefused(Exception):
    """The service refused a save the form had accepted; its message is already queued."""


class StoreInline(ReadOnlyInline):
    model = DocumentStore
    fields = ("store",)
    readonly_fields = fields
    verbose_name = pgettext_lazy("admin", "store")


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin[Document]):
    form = DocumentForm
    inlines = (StoreInline,)
    list_display = (
        "public_id",
        "title",
        "kind",
        "campaign",
        "status",
        "valid_from",
        "valid_to",
        "published_at",
    )
    list_filter = ("kind", "approved", "revoked", "tenant", "brand", "campaign")
    search_fields = ("doc_key", "title", "text", "rule_key")
    readonly_fields = (
        "content_hash",
        "approved",
        "approved_by",
        "approved_at",
        "revoked",
        "revoked_by",
        "revoked_at",
        "revoked_reason",
        "created_by",
        "created_at",
    )
    actions = ["approve_selected", "revoke_selected"]
    save_on_top = True

    def has_delete_permission(self, request: HttpRequest, obj: Document | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return visible(super().get_queryset(request), request.user)

    def save_model(self, request: HttpRequest, obj: Document, form: Any, change: bool) -> None:
        content = form.parsed
        try:
            if change:
                base = Document.objects.get(pk=obj.pk)
                skipped = {"doc_key", "version"} | (
                    set() if form.published_given else {"published_at"}
                )
                changes = {
                    name: getattr(content, name)
                    for name in content.__dataclass_fields__
                    if name not in skipped
                }
                saved = document_save_new_version(
                    base=base, changes=changes, actor=acting_user(request)
                )
            else:
                saved = document_add(
                    content=content,
                    actor=acting_user(request),
                    next_free_version=not form.cleaned_data.get("version"),
                )
        except (ValidationFailure, PermissionRefused) as exc:
            # The form validated already; this is a race (e.g. the same version saved meanwhile).
            # The refusal rolls the save back and is shown on the form it came from.
            self.message_user(request, str(exc), messages.ERROR)
            raise _SaveRefused from exc
        obj.pk = saved.pk
        obj.version = saved.version
        what = f"Saved {saved.public_id} as a draft" + (
            f", a new version of {saved.doc_key}" if change else ""
        )
        who = "another operator approves" if four_eyes_required() else "approve"
        # A draft is in no reviewer's queue until its author submits it, on its console page.
        self.message_user(
            request,
            f"{what}; submit it for review with a change note on its console page "
            f"({saved.get_absolute_url()}), then {who} it to publish.",
            messages.SUCCESS,
        )

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except _SaveRefused:
            return HttpResponseRedirect(request.get_full_path())

    def response_change(self, request: HttpRequest, obj: Document) -> HttpResponse:
        """A change saved a new version (``obj`` is it now): go there, say nothing more.

        Django's own message would call the old version "changed successfully", which it never
        is, and "save and continue" would reopen the old version.
        """
        preserved: dict[str, Options[Any] | str] = {
            "preserved_filters": self.get_preserved_filters(request),
            "opts": self.opts,
        }
        if "_continue" in request.POST:
            url = reverse("admin:knowledge_document_change", args=[obj.pk])
            return HttpResponseRedirect(add_preserved_filters(preserved, url))
        if "_addanother" in request.POST:
            url = reverse("admin:knowledge_document_add")
            return HttpResponseRedirect(add_preserved_filters(preserved, url))
        return self.response_post_save_change(request, obj)

    @admin.display(description=pgettext_lazy("admin", "stores"))
    def stores(self, obj: Document) -> str:
        """The read-only view of the stores field, for users who may only view documents."""
        return ", ".join(obj.store_rows.values_list("store", flat=True))

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(APPROVE_DOCUMENT)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(REVOKE_DOCUMENT)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """Store rows are written by the service with the new version."""

    @admin.action(
        description=_("Approve selected documents (asks for a reason)"), permissions=["approve"]
    )
    def approve_selected(
        self, request: HttpRequest, queryset: QuerySet[Document]
    ) -> HttpResponse | None:
        return self._lifecycle_action(request, queryset, "approve")

    @admin.action(
        description=_("Revoke selected documents (asks for a reason)"), permissions=["revoke"]
    )
    def revoke_selected(
        self, request: HttpRequest, queryset: QuerySet[Document]
    ) -> HttpResponse | None:
        return self._lifecycle_action(request, queryset, "revoke")

    @staticmethod
    def _decided(document: Document, actor: User, reason: str, verb: str) -> list[str]:
        """Approve or revoke one version; the runs a revocation reached. A revocation goes
        through experience's, which stores what it reached (``knowledge.hooks``)."""
        if verb == "approve":
            document_approve(document=document, actor=actor, reason=reason)
            return []
        impact = hooks.document_revoke(document=document, actor=actor, reason=reason)
        return impact.get("runs", [])

    def _lifecycle_action(
        self, request: HttpRequest, queryset: QuerySet[Document], verb: str
    ) -> HttpResponse | None:
        reason = request.POST.get("reason", "").strip()
        if request.POST.get("confirm") == "yes":
            if not reason:
                self.message_user(request, "A reason is required.", messages.ERROR)
            else:
                done = []
                for document in queryset:
                    try:
                        runs = self._decided(document, acting_user(request), reason, verb)
                    except (ValidationFailure, PermissionRefused) as exc:
                        self.message_user(request, str(exc), messages.WARNING)
                        continue
                    done.append(
                        document.public_id
                        + (f" (runs to re-check: {', '.join(runs)})" if runs else "")
                    )
                if done:
                    self.message_user(request, f"{verb}d: {', '.join(done)}", messages.SUCCESS)
                return None
        # Before revoking, what each version reaches (as on the console's revoke page).
        documents = [
            (
                document,
                revocation_preview(item_id=document.public_id, tenant=document.tenant)["runs"],
            )
            if verb == "revoke"
            else (document, None)
            for document in queryset
        ]
        return TemplateResponse(
            request,
            "admin/knowledge/document/lifecycle_confirm.html",
            {
                **self.admin_site.each_context(request),
                "title": f"{verb.capitalize()} documents",
                "verb": verb,
                "documents": documents,
                "action": f"{verb}_selected",
                "opts": self.model._meta,
                "reason": reason,
            },
        )


@admin.register(Synonym)
class SynonymAdmin(admin.ModelAdmin[Synonym]):
    """The lexicon's rule (one lexicon for every tenant, so deployment-wide operators only) is
    the service's: the admin offers what ``lexicon_editable`` allows and writes through
    ``synonym_set``/``synonym_delete``, which refuse anyone else."""

    list_display = ("term", "canonical", "updated_at")
    search_fields = ("term", "canonical")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return lexicon_editable(request.user, ADD_SYNONYM)

    def has_change_permission(self, request: HttpRequest, obj: Synonym | None = None) -> bool:
        return lexicon_editable(request.user, CHANGE_SYNONYM)

    def has_delete_permission(self, request: HttpRequest, obj: Synonym | None = None) -> bool:
        return lexicon_editable(request.user, DELETE_SYNONYM)

    def save_model(self, request: HttpRequest, obj: Synonym, form: Any, change: bool) -> None:
        with refusal_as_403():
            if change:
                old = Synonym.objects.get(pk=obj.pk)
                if old.term != obj.term:
                    synonym_delete(synonym=old, actor=acting_user(request))
            saved = synonym_set(term=obj.term, canonical=obj.canonical, actor=acting_user(request))
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Synonym) -> None:
        with refusal_as_403():
            synonym_delete(synonym=obj, actor=acting_user(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Synonym]) -> None:
        with refusal_as_403():
            for synonym in queryset:
                synonym_delete(synonym=synonym, actor=acting_user(request))


# --- the search index: derived from approved documents by the services, never edited ----------


class IndexAdmin(ReadOnlyAdmin):
    """Whoever may view documents may view what the index holds of them (own tenants only)."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self.tenant_field is None and not is_deployment_wide(request.user):
            return False
        return request.user.has_perm(VIEW_DOCUMENT)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)


@admin.register(SearchScope)
class SearchScopeAdmin(IndexAdmin):
    tenant_field = "tenant"
    list_display = ("tenant", "brand", "campaign", "store", "multi_version")
    exclude = ("arrays",)


@admin.register(SearchEntry)
class SearchEntryAdmin(IndexAdmin, EntryAdmin):
    list_display = ("public_id", "scope", "has_newer", "rule_contested")


@admin.register(PostingList)
class PostingListAdmin(IndexAdmin, PostingAdmin):
    pass


@admin.register(SearchDelta)
class SearchDeltaAdmin(IndexAdmin, DeltaAdmin):
    pass


@admin.register(LexiconState)
class LexiconStateAdmin(IndexAdmin):
    list_display = ("stamp",)
