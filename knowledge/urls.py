from django.urls import path

from knowledge import views

app_name = "knowledge"

urlpatterns = [
    path("", views.document_list, name="document-list"),
    path("new/", views.document_new, name="document-new"),
    path("search/", views.search_preview, name="search-preview"),
    path("<slug:doc_key>/v<int:version>/", views.document_detail, name="document-detail"),
    path(
        "<slug:doc_key>/v<int:version>/new-version/",
        views.document_new_version,
        name="document-new-version",
    ),
    path(
        "<slug:doc_key>/v<int:version>/checklist/",
        views.document_checklist,
        name="document-checklist",
    ),
    path("<slug:doc_key>/v<int:version>/review/", views.document_review, name="document-review"),
    path(
        "<slug:doc_key>/v<int:version>/revoke/", views.document_revoke_view, name="document-revoke"
    ),
]
