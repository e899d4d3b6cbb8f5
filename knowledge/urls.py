from django.urls import path

from knowledge import lexicon_views, views

app_name = "knowledge"

# ``<key>/v<N>/`` resolves the key among the tenants the user sees; ``<tenant>/<key>/v<N>/`` names
# the tenant (what ``Document.get_absolute_url`` and the pages link to): keys are per tenant.
DOCUMENT_PAGES = [
    ("", views.document_detail, "document-detail"),
    ("new-version/", views.document_new_version, "document-new-version"),
    ("checklist/", views.document_checklist, "document-checklist"),
    ("submit/", views.document_submit_view, "document-submit"),
    ("review/", views.document_review, "document-review"),
    ("revoke/", views.document_revoke_view, "document-revoke"),
]

urlpatterns = [
    path("", views.document_list, name="document-list"),
    path("new/", views.document_new, name="document-new"),
    path("search/", views.search_preview, name="search-preview"),
    path("lexicon/", lexicon_views.lexicon, name="lexicon"),
    *(
        path(f"<slug:doc_key>/v<int:version>/{suffix}", view, name=name)
        for suffix, view, name in DOCUMENT_PAGES
    ),
    *(
        path(f"<path:tenant>/<slug:doc_key>/v<int:version>/{suffix}", view, name=f"tenant-{name}")
        for suffix, view, name in DOCUMENT_PAGES
    ),
]
