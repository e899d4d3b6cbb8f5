"""The curation home page: how much waits in each queue."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from curation.selectors.queues import queue_counts
from reviewconsole.permissions import VIEW_CASE
from reviewconsole.views import HtmxHttpRequest, console_view, render_page

# --- home --------------------------------------------------------------------------------------


@require_GET
@console_view(VIEW_CASE)
def home(request: HtmxHttpRequest) -> HttpResponse:
    return render_page(
        request, "curation/curation_home.html", {"counts": queue_counts(request.user)}
    )
