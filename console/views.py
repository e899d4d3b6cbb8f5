"""The dashboard: what waits for a reviewer, over every app's items the user may see."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from console.selectors import dashboard_counts
from experience.runs.followups import runs_to_follow_up_count
from reviewconsole import clock
from reviewconsole.permissions import VIEW_DOCUMENT, VIEW_RUN
from reviewconsole.views import HtmxHttpRequest, console_view, render_page


@require_GET
@console_view()
def dashboard(request: HtmxHttpRequest) -> HttpResponse:
    counts = dashboard_counts(
        now=clock.now(), with_documents=request.user.has_perm(VIEW_DOCUMENT), user=request.user
    )
    follow_ups = runs_to_follow_up_count(request.user) if request.user.has_perm(VIEW_RUN) else None
    return render_page(
        request,
        "console/dashboard_home.html",
        {"counts": counts, "runs_to_follow_up": follow_ups},
    )
