from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from agentapi.api import api
from reviewconsole import views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
]
