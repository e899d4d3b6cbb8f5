"""The page where a console user turns reviewer notifications on or off (login, CSRF)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from curation.notifications import notifications_set, opted_out
from reviewconsole.views import HtmxHttpRequest, console_view, finish, render_page


@require_http_methods(["GET", "POST"])
@console_view()
def notification_settings(request: HtmxHttpRequest) -> HttpResponse:
    user = request.user
    assert isinstance(user, User)  # console_view let only signed-in users through
    if request.method == "POST":
        enabled = request.POST.get("enabled") == "1"
        notifications_set(user=user, enabled=enabled)
        messages.success(
            request, gettext("Notifications on") if enabled else gettext("Notifications off")
        )
        return finish(request, reverse("curation:notifications"))
    return render_page(
        request,
        "curation/notification_settings.html",
        {"enabled": not opted_out(user), "email": user.email},
    )
