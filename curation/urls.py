from django.urls import path, register_converter

from curation.views import home as home_views
from curation.views import incidents as incident_views
from curation.views import proposals as proposal_views
from curation.views import rereview as rereview_views
from curation.views import similarity as similarity_views
from curation.views import threads as thread_views
from experience.urls import DigestConverter

register_converter(DigestConverter, "curation_digest")

app_name = "curation"

urlpatterns = [
    path("", home_views.home, name="home"),
    path("threads/", thread_views.thread_list, name="thread-list"),
    # ``threads/<id>/`` resolves the id among the tenants the user sees; the tenant-qualified
    # form names the tenant (what ``Thread.get_absolute_url`` and the pages link to).
    path("threads/<str:thread_id>/", thread_views.thread_detail, name="thread-detail"),
    path("threads/<str:thread_id>/preview/", thread_views.thread_preview, name="thread-preview"),
    path("threads/<str:thread_id>/build/", thread_views.thread_build, name="thread-build"),
    path(
        "tenants/<path:tenant>/threads/<str:thread_id>/",
        thread_views.thread_detail,
        name="tenant-thread-detail",
    ),
    path(
        "tenants/<path:tenant>/threads/<str:thread_id>/preview/",
        thread_views.thread_preview,
        name="tenant-thread-preview",
    ),
    path(
        "tenants/<path:tenant>/threads/<str:thread_id>/build/",
        thread_views.thread_build,
        name="tenant-thread-build",
    ),
    path(
        "cases/<curation_digest:digest>/similar/",
        similarity_views.case_similar,
        name="case-similar",
    ),
    path("similar/", similarity_views.link_list, name="link-list"),
    path("similar/<int:pk>/", similarity_views.link_compare, name="link-compare"),
    path("similar/<int:pk>/resolve/", similarity_views.link_resolve, name="link-resolve"),
    path("incidents/", incident_views.incident_list, name="incident-list"),
    path("rereview/", rereview_views.rereview_list, name="rereview-list"),
    path(
        "rereview/<int:pk>/recertify/", rereview_views.rereview_recertify, name="rereview-recertify"
    ),
    path("rereview/<int:pk>/confirm/", rereview_views.rereview_confirm, name="rereview-confirm"),
    path("proposals/", proposal_views.proposal_list, name="proposal-list"),
    path("proposals/<int:pk>/", proposal_views.proposal_detail, name="proposal-detail"),
    path("proposals/<int:pk>/adopt/", proposal_views.proposal_adopt, name="proposal-adopt"),
    path("proposals/<int:pk>/dismiss/", proposal_views.proposal_dismiss, name="proposal-dismiss"),
    path(
        "skills/<curation_digest:digest>/support/",
        proposal_views.skill_support,
        name="skill-support",
    ),
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
