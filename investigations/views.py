"""Console pages: investigate a ticket, and read a stored investigation with its citations.

Reviewers and operators (the knowledge search permission) may investigate; the memory tools are
offered only to who may use experience. The run happens on the server with the scripted
provider; the page shows each step with the tool's full result and the verified answer, each
citation linked to its evidence.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import retarget

from investigations.forms import InvestigationForm
from investigations.models import Investigation
from investigations.selectors import RECENT, investigation_get, investigations_for
from investigations.services import investigation_run
from reviewconsole import clock
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.links import item_url
from reviewconsole.permissions import SEARCH_KNOWLEDGE
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404, render_page


def _field(name: str, form: InvestigationForm) -> str | None:
    name = name.removeprefix("scope.")
    return name if name in form.fields else None


def presented(investigation: Investigation) -> dict[str, Any]:
    """The stored run, with each citation's evidence page and whether its quote was checked."""
    answer = investigation.answer or {}
    refused = {
        detail.get("id")
        for detail in investigation.verification.get("details", [])
        if detail.get("id")
    }
    citations = [
        {**citation, "url": item_url(citation["id"]), "refused": citation["id"] in refused}
        for citation in answer.get("citations", [])
    ]
    steps = [{**step, "evidence": _evidence_of(step.get("result"))} for step in investigation.steps]
    return {"investigation": investigation, "citations": citations, "steps": steps}


def _evidence_of(result: Any) -> list[dict[str, Any]]:
    if not isinstance(result, dict):
        return []
    items = [*result.get("evidence", []), *result.get("items", [])]
    return [
        {
            "id": item.get("id"),
            "quote": item.get("quote") or item.get("title"),
            "url": item_url(str(item.get("id"))),
        }
        for item in items
        if isinstance(item, dict) and item.get("id")
    ]


@require_http_methods(["GET", "POST"])
@console_view(SEARCH_KNOWLEDGE)
def investigation_new(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = InvestigationForm(request.POST)
        if form.is_valid():
            try:
                investigation = investigation_run(
                    actor=request.user,  # type: ignore[arg-type]
                    **form.investigation_arguments(),
                )
            except (ValidationFailure, PermissionRefused) as failure:
                field = (
                    _field(failure.field, form)
                    if isinstance(failure, ValidationFailure)
                    else "tenant"
                )
                form.add_error(field, failure.message)
            else:
                if request.htmx:
                    return render_page(
                        request,
                        "investigations/investigation_detail.html",
                        presented(investigation),
                        partial="investigation-result",
                    )
                return finish(request, investigation.get_absolute_url())
        response = render_page(
            request,
            "investigations/investigation_form.html",
            {"form": form, "recent": investigations_for(request.user)[:RECENT]},
            partial="investigation-form",
            status=422,
        )
        # The form posts into the result area; a refused form replaces the form instead.
        return retarget(response, "#investigation-form") if request.htmx else response
    form = InvestigationForm(initial=InvestigationForm.initial_values(clock.now()))
    return render_page(
        request,
        "investigations/investigation_form.html",
        {"form": form, "recent": investigations_for(request.user)[:RECENT]},
    )


@require_GET
@console_view(SEARCH_KNOWLEDGE)
def investigation_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    investigation = or_404(investigation_get(pk, request.user))
    return render_page(
        request,
        "investigations/investigation_detail.html",
        presented(investigation),
        partial="investigation-result",
    )
