"""Knowledge pages for operators and reviewers: documents, versions, and a search preview.

Operators also write here: a new document, the next version of one, approving or rejecting a
draft (four eyes) and revoking a version after seeing what it reaches. Every rule is the one
``knowledge.services`` applies (the same as for imports and the admin); these views parse input,
call one service, and show what it said.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from knowledge import hooks
from knowledge.conclusions import with_allowed_conclusions
from knowledge.forms import (
    DocumentFilterForm,
    DocumentForm,
    DocumentReviewForm,
    DocumentRevokeForm,
    DocumentSubmitForm,
    SearchPreviewForm,
)
from knowledge.hooks import revocation_preview
from knowledge.models import Document
from knowledge.scope_options import document_scope_values
from knowledge.search import search_knowledge
from knowledge.selectors import (
    document_approvers,
    document_get,
    document_get_visible,
    document_revocations,
    document_stores,
    document_versions,
    documents_named,
    documents_visible,
)
from knowledge.services import (
    ALREADY_APPROVED_UNMET,
    ALREADY_REVOKED_UNMET,
    NOT_INDEPENDENT,
    NOT_SUBMITTED,
    OWN_SUBMISSION,
    REASON_UNMET,
    DocumentRefusal,
    document_add,
    document_approve,
    document_review_unmet,
    document_save_new_version,
    document_submit,
    four_eyes_required,
)
from knowledge.versions import requirement_rows, version_diff
from reviewconsole import clock
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.itemids import ItemId
from reviewconsole.links import item_url
from reviewconsole.permissions import (
    ADD_DOCUMENT,
    APPROVE_DOCUMENT,
    NOT_PERMITTED,
    REVOKE_DOCUMENT,
    SEARCH_KNOWLEDGE,
    VIEW_DOCUMENT,
)
from reviewconsole.reasons import MAX_REASON
from reviewconsole.tenancy import NOT_IN_TENANT, NOT_IN_TENANT_MESSAGE, tenants_of
from reviewconsole.views import (
    Checklist,
    Condition,
    HtmxHttpRequest,
    checklist_of,
    console_view,
    finish,
    one_or_tenant_choice,
    or_404,
    paginate,
    render_page,
)

DOCUMENTS_PER_PAGE = 25


@require_GET
@console_view(VIEW_DOCUMENT)
def document_list(request: HtmxHttpRequest) -> HttpResponse:
    form = DocumentFilterForm(request.GET or None)
    filters = form.filters() if form.is_bound and form.is_valid() else {}
    page = paginate(request, documents_visible(request.user, **filters), DOCUMENTS_PER_PAGE)
    return render_page(
        request,
        "knowledge/document_list.html",
        {"form": form, "page_obj": page, "documents": page.object_list},
        partial="document-results",
    )


def _named(
    request: HtmxHttpRequest, doc_key: str, version: int, tenant: str | None
) -> Document | HttpResponse:
    """The version the URL names among the tenants the user sees (in ``tenant`` when the URL
    names one); a tenant choice when a deployment-wide user sees the key in several."""
    user = acting_user(request)
    if tenant is not None:
        return or_404(document_get_visible(doc_key, version, user, tenant))
    named = str(ItemId.document(doc_key, version))
    return one_or_tenant_choice(request, named, documents_named(doc_key, version, user))


def _against(request: HtmxHttpRequest, document: Document, versions: list[Document]) -> int | None:
    """The version to compare with: ``?against=N`` if it exists, else the one just before."""
    numbers = [v.version for v in versions if v.version != document.version]
    requested = request.GET.get("against", "")
    if requested.isdigit() and int(requested) in numbers:
        return int(requested)
    older = [n for n in numbers if n < document.version]
    return max(older) if older else None


@require_GET
@console_view(VIEW_DOCUMENT)
def document_detail(
    request: HtmxHttpRequest, doc_key: str, version: int, tenant: str | None = None
) -> HttpResponse:
    document = _named(request, doc_key, version, tenant)
    if isinstance(document, HttpResponse):
        return document
    # Versions are per (tenant, key): another tenant's versions of this key are another document.
    versions = list(document_versions(document.tenant, doc_key))
    against = _against(request, document, versions)
    diff = None
    if against is not None:
        other = document_get(document.tenant, doc_key, against)
        assert other is not None
        old, new = (other, document) if against < version else (document, other)
        diff = version_diff(old, new)
    return render_page(
        request,
        "knowledge/document_detail.html",
        {
            **_review_context(request, document),
            "stores": document_stores(document),
            "versions": versions,
            "against": against,
            "diff": diff,
            "requirements": requirement_rows(document.requirements),
            "impacts": _stored_impacts(document),
        },
        partial="document-diff",
    )


@require_GET
@console_view(VIEW_DOCUMENT, SEARCH_KNOWLEDGE)
def search_preview(request: HtmxHttpRequest) -> HttpResponse:
    bound = "query" in request.GET
    form = (
        SearchPreviewForm(request.GET)
        if bound
        else SearchPreviewForm(initial=SearchPreviewForm.initial_values(clock.now(), request.user))
    )
    result = None
    if bound and form.is_valid():
        try:
            result = with_allowed_conclusions(
                search_knowledge(
                    form.cleaned_data["query"], form.context(), actor=acting_user(request)
                )
            )
            for item in result["evidence"]:
                item["url"] = item_url(item["id"])
                # Said apart on the page: nothing of the query's words is in it.
                item["meaning_only"] = item["found_by"] == ["vector"]
        except ValidationFailure as failure:
            form.add_error(failure.field if failure.field in form.fields else None, failure.message)
        except PermissionRefused as refused:
            # The page needs the permission, so a refusal here is the form's tenant.
            tenant = refused.unmet == NOT_IN_TENANT
            form.add_error(
                "tenant" if tenant else None, NOT_IN_TENANT_MESSAGE if tenant else refused.message
            )
    return render_page(
        request,
        "knowledge/search_preview.html",
        {"form": form, "result": result},
        partial="search-results",
        status=422 if bound and form.errors else 200,
    )


# --- writing documents -------------------------------------------------------------------------


def _form_page(
    request: HtmxHttpRequest, form: DocumentForm, base: Document | None, status: int = 200
) -> HttpResponse:
    return render_page(
        request,
        "knowledge/document_form.html",
        {"form": form, "base": base},
        partial="document-form",
        status=status,
    )


def _saved(request: HtmxHttpRequest, saved: Document, base: Document | None) -> HttpResponse:
    if base is None:
        message = gettext("Saved %(id)s as a draft.") % {"id": saved.public_id}
    else:
        message = gettext("Saved %(id)s as a draft, a new version of %(key)s.") % {
            "id": saved.public_id,
            "key": saved.doc_key,
        }
    who = gettext(
        "No reviewer sees it until you submit it for review, with a change note, on its page."
    )
    messages.success(request, f"{message} {who}")
    return finish(request, saved.get_absolute_url())


def _save(request: HtmxHttpRequest, base: Document | None) -> HttpResponse:
    user = acting_user(request)

    def scope_values() -> dict[str, set[str]]:
        return document_scope_values(user)

    if request.method != "POST":
        initial = DocumentForm.initial_for(
            base,
            document_stores(base) if base is not None else [],
            tenant=next(iter(sorted(tenants_of(user) or [])), ""),
        )
        form = DocumentForm(initial=initial, base=base, scope_values=scope_values)
        return _form_page(request, form, base)
    form = DocumentForm(request.POST, base=base, scope_values=scope_values)
    if form.is_valid() and form.content is not None:
        try:
            note = form.cleaned_data.get("change_note", "")
            if base is None:
                saved = document_add(content=form.content, actor=user, change_note=note)
            else:
                saved = document_save_new_version(
                    base=base, changes=form.changes(), actor=user, change_note=note
                )
        except ValidationFailure as failure:
            form.add_failure(failure)
        except PermissionRefused as refused:
            # Only the tenant can be refused here: the page itself needs the permission.
            form.add_error("tenant" if refused.unmet == NOT_IN_TENANT else None, str(refused))
        else:
            return _saved(request, saved, base)
    return _form_page(request, form, base, status=422)


@require_http_methods(["GET", "POST"])
@console_view(VIEW_DOCUMENT, ADD_DOCUMENT)
def document_new(request: HtmxHttpRequest) -> HttpResponse:
    return _save(request, None)


@require_http_methods(["GET", "POST"])
@console_view(VIEW_DOCUMENT, ADD_DOCUMENT)
def document_new_version(
    request: HtmxHttpRequest, doc_key: str, version: int, tenant: str | None = None
) -> HttpResponse:
    base = _named(request, doc_key, version, tenant)
    if isinstance(base, HttpResponse):
        return base
    return _save(request, base)


# --- approving and rejecting a draft -----------------------------------------------------------

# What each unmet condition asks for, as a checklist line (names in docs/contracts.md).
CONDITION_LABELS = {
    NOT_PERMITTED: _("You hold the permission this needs"),
    NOT_IN_TENANT: _("You are a member of the document's tenant"),
    REASON_UNMET: _("A reason is written"),
    ALREADY_APPROVED_UNMET: _("It is a draft, not approved yet"),
    NOT_SUBMITTED: _("Its author submitted it for review"),
    ALREADY_REVOKED_UNMET: _("It is not revoked"),
    OWN_SUBMISSION: _("Someone other than its author approves it (four eyes)"),
    NOT_INDEPENDENT: _(
        "The approver's account and the author's are not one person's (neither created the "
        "other with a password, nor did one admin create both)"
    ),
}


def _conditions(universe: Sequence[str], unmet: Iterable[str]) -> list[Condition]:
    return checklist_of(universe, unmet, CONDITION_LABELS).items


def _form_problems(form: forms.Form) -> list[Condition]:
    return [
        Condition(name, f"{name}: {' '.join(str(p) for p in problems)}", False)
        for name, problems in form.errors.items()
    ]


def _checklist(document: Document, request: HtmxHttpRequest, reason: str) -> Checklist:
    universe = [NOT_PERMITTED, REASON_UNMET, ALREADY_APPROVED_UNMET, NOT_SUBMITTED]
    if four_eyes_required():
        universe.append(OWN_SUBMISSION)
    unmet = document_review_unmet(
        document=document, actor=acting_user(request), reason=reason, approve=True
    )
    return Checklist(_conditions(universe, unmet))


def _urls(document: Document) -> dict[str, str]:
    args = document.url_args
    return {
        "detail_url": document.get_absolute_url(),
        "checklist_url": reverse("knowledge:tenant-document-checklist", args=args),
        "review_url": reverse("knowledge:tenant-document-review", args=args),
        "revoke_url": reverse("knowledge:tenant-document-revoke", args=args),
        "new_version_url": reverse("knowledge:tenant-document-new-version", args=args),
        "submit_url": reverse("knowledge:tenant-document-submit", args=args),
    }


def _review_context(
    request: HtmxHttpRequest,
    document: Document,
    *,
    reason: str = "",
    change_note: str = "",
    review_errors: Sequence[Condition] = (),
) -> dict[str, Any]:
    user = acting_user(request)
    submitted = document.status == "submitted"
    return {
        "document": document,
        "item": document,
        "checklist": _checklist(document, request, reason),
        "reason": reason,
        "review_errors": review_errors,
        "can_review": user.has_perm(APPROVE_DOCUMENT),
        "can_revoke": user.has_perm(REVOKE_DOCUMENT),
        "can_write": user.has_perm(ADD_DOCUMENT),
        # Only the author submits a draft (the service refuses anyone else).
        "can_submit": user.has_perm(ADD_DOCUMENT) and document.created_by_id == user.pk,
        "change_note": change_note,
        "approvers": [u.get_username() for u in document_approvers(document)] if submitted else [],
        **_urls(document),
    }


@require_GET
@console_view(VIEW_DOCUMENT)
def document_checklist(
    request: HtmxHttpRequest, doc_key: str, version: int, tenant: str | None = None
) -> HttpResponse:
    """The live approval checklist for the reason typed so far."""
    document = _named(request, doc_key, version, tenant)
    if isinstance(document, HttpResponse):
        return document
    if not request.htmx:
        return HttpResponseRedirect(document.get_absolute_url())
    reason = request.GET.get("reason", "")[:MAX_REASON]
    return render_page(
        request,
        "knowledge/document_detail.html",
        {"checklist": _checklist(document, request, reason), "item": document},
        partial="approval-checklist",
    )


@require_POST
@console_view(VIEW_DOCUMENT, APPROVE_DOCUMENT)
def document_review(
    request: HtmxHttpRequest, doc_key: str, version: int, tenant: str | None = None
) -> HttpResponse:
    """Approve a draft (four eyes), or reject it: a rejected draft is revoked, never published."""
    user = acting_user(request)
    document = _named(request, doc_key, version, tenant)
    if isinstance(document, HttpResponse):
        return document
    form = DocumentReviewForm(request.POST)
    reason = str(request.POST.get("reason", ""))[:MAX_REASON]
    errors: list[Condition] = []
    if not form.is_valid():
        errors = _form_problems(form)
    elif form.cleaned_data["decision"] == "reject" and document.approved:
        # An approved version is taken back by revoking it, after seeing what that reaches.
        errors = [
            Condition(ALREADY_APPROVED_UNMET, str(CONDITION_LABELS[ALREADY_APPROVED_UNMET]), False)
        ]
    else:
        approve = form.cleaned_data["decision"] == "approve"
        # A draft is withdrawn by revoking it, through the one revocation (knowledge.hooks).
        service = document_approve if approve else hooks.document_revoke
        try:
            service(document=document, actor=user, reason=form.cleaned_data["reason"])
        except DocumentRefusal as refused:
            errors = _conditions([], refused.conditions)
        else:
            messages.success(
                request,
                gettext("%(id)s is approved and published.") % {"id": document.public_id}
                if approve
                else gettext("%(id)s is rejected: the draft is withdrawn and never published.")
                % {"id": document.public_id},
            )
            return finish(request, document.get_absolute_url())
    document.refresh_from_db()
    return render_page(
        request,
        "knowledge/document_detail.html",
        _review_context(request, document, reason=reason, review_errors=errors),
        partial="document-review",
        status=422,
    )


@require_POST
@console_view(VIEW_DOCUMENT, ADD_DOCUMENT)
def document_submit_view(
    request: HtmxHttpRequest, doc_key: str, version: int, tenant: str | None = None
) -> HttpResponse:
    """Submit a draft for review with its change note; the approvers are named and mailed."""
    document = _named(request, doc_key, version, tenant)
    if isinstance(document, HttpResponse):
        return document
    form = DocumentSubmitForm(request.POST)
    note = str(request.POST.get("change_note", ""))[:MAX_REASON]
    errors: list[Condition] = []
    if not form.is_valid():
        errors = _form_problems(form)
    else:
        try:
            submission = document_submit(
                document=document, actor=acting_user(request), change_note=note
            )
        except ValidationFailure as failure:
            errors = [Condition(failure.field, f"{failure.field}: {failure.message}", False)]
        except PermissionRefused as refused:
            errors = [Condition(refused.unmet, refused.message, False)]
        else:
            if submission.approvers:
                asked = gettext("Asked to approve: %(names)s.") % {
                    "names": ", ".join(submission.approvers)
                }
            else:
                asked = gettext("No operator of its tenant may approve it yet: ask an admin.")
            messages.success(
                request,
                gettext("%(id)s is submitted for review.") % {"id": document.public_id}
                + " "
                + asked,
            )
            return finish(request, document.get_absolute_url())
    document.refresh_from_db()
    return render_page(
        request,
        "knowledge/document_detail.html",
        _review_context(request, document, change_note=note, review_errors=errors),
        partial="document-review",
        status=422,
    )


# --- revoking ----------------------------------------------------------------------------------


def _run_entries(run_ids: Iterable[str]) -> list[dict[str, str]]:
    return [
        {"run_id": run_id, "url": reverse("experience:run-detail", args=[run_id])}
        for run_id in run_ids
    ]


def _stored_impacts(document: Document) -> list[dict[str, Any]]:
    """Each revocation of ``document`` with the impact kept when it was revoked, shaped as the
    shared stored-impact block shows it."""
    return [
        {
            "record": {
                "revoked_by": {"username": event.actor_name},
                "created_at": event.created_at,
                "reason": event.reason,
                "item_type": "document",
            },
            "skills": [],
            "runs": _run_entries((event.details or {}).get("impact", {}).get("runs", [])),
        }
        for event in document_revocations(document)
    ]


def _ids(text: str) -> list[str]:
    return sorted(part for part in text.split(",") if part)


@require_http_methods(["GET", "POST"])
@console_view(VIEW_DOCUMENT, REVOKE_DOCUMENT)
def document_revoke_view(
    request: HtmxHttpRequest, doc_key: str, version: int, tenant: str | None = None
) -> HttpResponse:
    """GET previews what revoking reaches; POST revokes, and the service recomputes and stores
    the impact (the list shown afterwards is that one)."""
    user = acting_user(request)
    document = _named(request, doc_key, version, tenant)
    if isinstance(document, HttpResponse):
        return document
    form = DocumentRevokeForm(request.POST or None)
    errors: list[Condition] = []
    if request.method == "POST" and not form.is_valid():
        errors = _form_problems(form)
    elif request.method == "POST":
        try:
            impact = hooks.document_revoke(
                document=document, actor=user, reason=form.cleaned_data["reason"]
            )
        except DocumentRefusal as refused:
            errors = _conditions([], refused.conditions)
        else:
            runs = impact.get("runs", [])
            messages.success(
                request,
                gettext(
                    "Revoked. %(runs)d run(s) had read it; the list is stored with the revocation."
                )
                % {"runs": len(runs)},
            )
            if _ids(form.cleaned_data["previewed_runs"]) != sorted(runs):
                messages.warning(
                    request,
                    gettext(
                        "The impact changed between your preview and the confirmation; the stored list is the one computed at confirmation."
                    ),
                )
            return finish(request, document.get_absolute_url())
        document.refresh_from_db()
    preview = None
    if document.status == "approved":
        preview = _run_entries(
            revocation_preview(item_id=document.public_id, tenant=document.tenant).get("runs", [])
        )
    return render_page(
        request,
        "knowledge/document_revoke.html",
        {
            "document": document,
            "item": document,
            "preview_runs": preview,
            "preview_impact": {"runs": preview or []},
            "previewed_runs": ",".join(run["run_id"] for run in preview or []),
            "reason": form.data.get("reason", "") if form.is_bound else "",
            "errors": errors,
            "impacts": _stored_impacts(document),
            **_urls(document),
        },
        partial="revoke-form",
        status=422 if errors else 200,
    )
