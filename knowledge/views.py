"""Knowledge pages for operators and reviewers: documents, versions, and a search preview."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from knowledge.conclusions import with_allowed_conclusions
from knowledge.forms import DocumentFilterForm, SearchPreviewForm
from knowledge.models import Document
from knowledge.search import search_knowledge
from knowledge.selectors import (
    document_get,
    document_get_visible,
    document_lines,
    document_stores,
    document_versions,
    documents_visible,
)
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.links import item_url
from reviewconsole.permissions import SEARCH_KNOWLEDGE, VIEW_DOCUMENT
from reviewconsole.tenancy import NOT_IN_TENANT_MESSAGE, may_access
from reviewconsole.views import (
    HtmxHttpRequest,
    console_view,
    diff_lines,
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
def document_detail(request: HtmxHttpRequest, doc_key: str, version: int) -> HttpResponse:
    document = or_404(document_get_visible(doc_key, version, request.user))
    versions = list(document_versions(doc_key))
    against = _against(request, document, versions)
    diff = None
    if against is not None:
        other = document_get(doc_key, against)
        assert other is not None
        old, new = (other, document) if against < version else (document, other)
        diff = diff_lines(
            document_lines(old),
            document_lines(new),
            old_label=old.public_id,
            new_label=new.public_id,
        )
    return render_page(
        request,
        "knowledge/document_detail.html",
        {
            "document": document,
            "stores": document_stores(document),
            "versions": versions,
            "against": against,
            "diff": diff,
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
        else SearchPreviewForm(initial=SearchPreviewForm.initial_values(clock.now()))
    )
    result = None
    if bound and form.is_valid() and not may_access(request.user, form.cleaned_data["tenant"]):
        form.add_error("tenant", NOT_IN_TENANT_MESSAGE)
    if bound and form.is_valid():
        try:
            result = with_allowed_conclusions(
                search_knowledge(form.cleaned_data["query"], form.context())
            )
            for item in result["evidence"]:
                item["url"] = item_url(item["id"])
        except ValidationFailure as failure:
            form.add_error(failure.field if failure.field in form.fields else None, failure.message)
    return render_page(
        request,
        "knowledge/search_preview.html",
        {"form": form, "result": result},
        partial="search-results",
        status=422 if bound and form.errors else 200,
    )
