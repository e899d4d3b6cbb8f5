"""Incident merges: the list, and merging one incident id into another."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from curation import incidents
from curation.forms import IncidentMergeForm
from curation.selectors.incidents import merge_list
from curation.views import PER_PAGE
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import REVIEW_CASE as REVIEW
from reviewconsole.permissions import VIEW_CASE
from reviewconsole.tenancy import NOT_IN_TENANT
from reviewconsole.views import (
    HtmxHttpRequest,
    console_view,
    finish,
    paginate,
    refusal_as_403,
    render_page,
)


@require_http_methods(["GET", "POST"])
@console_view(VIEW_CASE)
def incident_list(request: HtmxHttpRequest) -> HttpResponse:
    form = IncidentMergeForm(request.POST or None)
    status = 200
    if request.method == "POST":
        with refusal_as_403():
            incidents.incident_merge_require(actor=acting_user(request))
        if form.is_valid():
            data = form.cleaned_data
            try:
                incidents.incident_merge(
                    tenant=data["tenant"].strip(),
                    brand=data["brand"].strip(),
                    alias=data["alias"],
                    into=data["into"],
                    actor=acting_user(request),
                    reason=data["reason"],
                )
            except ValidationFailure as failure:
                form.add_error(
                    failure.field if failure.field in form.fields else None, failure.message
                )
            except PermissionRefused as refused:
                form.add_error(
                    "tenant" if refused.unmet == NOT_IN_TENANT else None, refused.message
                )
            else:
                messages.success(request, gettext("Recorded as one incident."))
                return finish(request, reverse("curation:incident-list"))
        status = 422
    page = paginate(request, merge_list(request.user), PER_PAGE)
    return render_page(
        request,
        "curation/incident_list.html",
        {
            "form": form,
            "page_obj": page,
            "merges": page.object_list,
            "can_review": request.user.has_perm(REVIEW),
        },
        partial="merge-results",
        status=status,
    )
