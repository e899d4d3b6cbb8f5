from typing import Any

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from agentapi.api import api
from agentapi.oauth_views import oauth_urlpatterns, well_known_urlpatterns
from console.views import dashboard
from reviewconsole import claim_views, signon_views, user_views, views


class FaviconView(RedirectView):
    """``/favicon.ico``, which browsers and tools ask for whatever the page links: the icon."""

    permanent = True

    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        return static("console/favicon.svg")


urlpatterns = [
    path("", dashboard, name="home"),
    path("favicon.ico", FaviconView.as_view(), name="favicon"),
    path("accounts/login/", signon_views.ConsoleLoginView.as_view(), name="login"),
    path("accounts/logout/", signon_views.logout, name="logout"),
    path("accounts/sso/", signon_views.sso_login, name="sso-login"),
    path("accounts/sso/callback/", signon_views.sso_callback, name="sso-callback"),
    path("audit/", views.event_list, name="event-list"),
    path("audit/export.csv", views.event_export, name="event-export"),
    path("time-zone/", views.time_zone, name="time-zone"),
    path("users/", user_views.user_list, name="user-list"),
    path("users/new/", user_views.user_new, name="user-new"),
    path("users/<str:username>/", user_views.user_edit, name="user-edit"),
    path("claims/", claim_views.claim, name="claim"),
    path("knowledge/", include("knowledge.urls")),
    path("evaluation/", include("evaluation.urls")),
    path("curation/", include("curation.urls")),
    path("investigations/", include("investigations.urls")),
    path("", include("experience.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    # Before the admin's own: with passwords off, its login page is the console's.
    path("admin/login/", signon_views.admin_login, name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("oauth/", include((oauth_urlpatterns, "oauth2_provider"))),
    *well_known_urlpatterns,
]
