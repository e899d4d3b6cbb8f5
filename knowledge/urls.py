from django.urls import path

from knowledge import views

app_name = "knowledge"

urlpatterns = [
    path("", views.document_list, name="document-list"),
    path("search/", views.search_preview, name="search-preview"),
    path("<slug:doc_key>/v<int:version>/", views.document_detail, name="document-detail"),
]
