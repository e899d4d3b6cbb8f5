from django.urls import path, register_converter

from curation import views
from experience.urls import DigestConverter

register_converter(DigestConverter, "curation_digest")

app_name = "curation"

urlpatterns = [
    path("", views.home, name="home"),
    path("threads/", views.thread_list, name="thread-list"),
    # ``threads/<id>/`` resolves the id among the tenants the user sees; the tenant-qualified
    # form names the tenant (what ``Thread.get_absolute_url`` and the pages link to).
    path("threads/<str:thread_id>/", views.thread_detail, name="thread-detail"),
    path("threads/<str:thread_id>/preview/", views.thread_preview, name="thread-preview"),
    path("threads/<str:thread_id>/build/", views.thread_build, name="thread-build"),
    path(
        "tenants/<path:tenant>/threads/<str:thread_id>/",
        views.thread_detail,
        name="tenant-thread-detail",
    ),
    path(
        "tenants/<path:tenant>/threads/<str:thread_id>/preview/",
        views.thread_preview,
        name="tenant-thread-preview",
    ),
    path(
        "tenants/<path:tenant>/threads/<str:thread_id>/build/",
        views.thread_build,
        name="tenant-thread-build",
    ),
    path("cases/<curation_digest:digest>/similar/", views.case_similar, name="case-similar"),
    path("similar/", views.link_list, name="link-list"),
    path("similar/<int:pk>/", views.link_compare, name="link-compare"),
    path("similar/<int:pk>/resolve/", views.link_resolve, name="link-resolve"),
    path("incidents/", views.incident_list, name="incident-list"),
    path("rereview/", views.rereview_list, name="rereview-list"),
    path("rereview/<int:pk>/recertify/", views.rereview_recertify, name="rereview-recertify"),
    path("rereview/<int:pk>/confirm/", views.rereview_confirm, name="rereview-confirm"),
    path("proposals/", views.proposal_list, name="proposal-list"),
    path("proposals/<int:pk>/", views.proposal_detail, name="proposal-detail"),
    path("proposals/<int:pk>/adopt/", views.proposal_adopt, name="proposal-adopt"),
    path("proposals/<int:pk>/dismiss/", views.proposal_dismiss, name="proposal-dismiss"),
    path("skills/<curation_digest:digest>/support/", views.skill_support, name="skill-support"),
]

# Reviewer notifications on or off (curation.notification_views).
from curation import notification_views  # noqa: E402

urlpatterns += [
    path(
        "notifications/",
        notification_views.notification_settings,
        name="notifications",
    ),
]
