"""The console's Outcome form on a run page: what happened after the run.

Login, the run-view permission and CSRF as on every console page; who may report is decided by
the one service, ``experience.review.outcomes.run_outcome_report`` (a reader of the run or a reviewer).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from experience.review.outcomes import run_outcome_report
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.permissions import VIEW_RUN
from reviewconsole.views import HtmxHttpRequest, console_view, finish


@require_POST
@console_view(VIEW_RUN)
def run_outcome(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    try:
        result = run_outcome_report(
            run_id=run_id,
            outcome=request.POST.get("outcome", ""),
            note=request.POST.get("note", ""),
            actor=request.user,  # type: ignore[arg-type]
            # The page's address holds the run's stored id.
            stored=True,
        )
    except ValidationFailure as failure:
        messages.error(request, f"{failure.field}: {failure.message}")
    except PermissionRefused as refusal:
        messages.error(request, refusal.message)
    else:
        messages.success(request, f"{result.run_id}: {result.outcome}")
    return finish(request, reverse("experience:run-detail", args=[run_id]))
