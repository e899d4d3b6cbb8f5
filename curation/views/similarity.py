"""Similar cases: a case's near-duplicates, the queue of open pairs, a pair side by side, and the
decision whether a pair is one incident."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_POST

from curation import incidents
from curation.forms import LinkFilterForm, LinkResolveForm
from curation.selectors.incidents import (
    incident_group,
    incident_merges,
    incident_support,
    merge_scope_of,
)
from curation.selectors.similarity import (
    near_duplicate_comparison,
    near_duplicate_get_visible,
    near_duplicate_queue,
    similar_cases,
)
from curation.views import PER_PAGE
from experience.cases.models import Case
from experience.core.models import Status
from experience.pages.selectors import case_get_visible
from reviewconsole import itemids
from reviewconsole.conversations import thread_views_of
from reviewconsole.errors import ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.links import item_url
from reviewconsole.permissions import REVIEW_CASE as REVIEW
from reviewconsole.permissions import VIEW_CASE
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404, paginate, render_page


def similar_url(case_id: str) -> str:
    return reverse("curation:case-similar", args=[itemids.digest_of(case_id)])


def _safe_next(request: HtmxHttpRequest, candidate: str, fallback: str) -> str:
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return fallback


# --- near-duplicates and incidents ------------------------------------------------------------


def _similar_context(request: HtmxHttpRequest, case: Case) -> dict[str, Any]:
    merges = incident_merges(case.tenant, case.brand)
    group = incident_group(case, merges)
    similar = similar_cases(case, merges)
    # Embedded in another page (a case page loading the panel), decisions return to that page.
    embedding = request.htmx.current_url_abs_path if request.htmx else None
    return {
        "case": case,
        "case_url": case.get_absolute_url(),
        "similar_url": similar_url(case.id),
        "back_url": embedding or similar_url(case.id),
        "similar": [
            {
                "entry": entry,
                "url": entry.other.get_absolute_url(),
                "similar_url": similar_url(entry.other.id),
                "resolve_url": reverse("curation:link-resolve", args=[entry.link.pk]),
                "compare_url": reverse("curation:link-compare", args=[entry.link.pk]),
                "percent": round(entry.link.similarity * 100),
            }
            for entry in similar
        ],
        "open_count": sum(1 for e in similar if e.link.status == "open"),
        "group": group,
        "group_cases": [{"case": c, "url": c.get_absolute_url()} for c in group.cases],
        "support": incident_support(group.cases, merges={merge_scope_of(case): merges}),
        "can_review": request.user.has_perm(REVIEW),
    }


@require_GET
@console_view(VIEW_CASE)
def case_similar(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    """Cases possibly describing the same incident; ``#similar-panel`` is a fragment a case page
    can load with ``hx-get`` (its link is the fallback)."""
    case = or_404(case_get_visible(digest, request.user))
    return render_page(
        request,
        "curation/case_similar.html",
        _similar_context(request, case),
        partial="similar-panel",
    )


@require_GET
@console_view(VIEW_CASE)
def link_list(request: HtmxHttpRequest) -> HttpResponse:
    data = request.GET.copy()
    data.setdefault("status", "open")
    form = LinkFilterForm(data)
    status = form.cleaned_data["status"] if form.is_valid() else "open"
    page = paginate(request, near_duplicate_queue(request.user, status=status), PER_PAGE)
    rows = [
        {
            "link": link,
            "a_url": item_url(link.case_a_id),
            "b_url": item_url(link.case_b_id),
            "similar_url": similar_url(link.case_a_id),
            "compare_url": reverse("curation:link-compare", args=[link.pk]),
            "percent": round(link.similarity * 100),
        }
        for link in page.object_list
    ]
    return render_page(
        request,
        "curation/nearduplicate_list.html",
        {"form": form, "page_obj": page, "rows": rows},
        partial="link-results",
    )


# The rows of a comparison, as the page names them.
COMPARED_LABELS = {
    "observations": _("Observations"),
    "diagnosis": _("Diagnosis"),
    "counterevidence": _("Counterevidence"),
    "outcome": _("Outcome"),
}


@require_GET
@console_view(VIEW_CASE)
def link_compare(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Two similar cases side by side, section by section, differences marked, with the
    decision beside them: one incident or two, and the candidate's own review."""
    comparison = or_404(near_duplicate_comparison(pk, request.user))
    link = comparison.link
    candidate = comparison.left if comparison.left.status == Status.CANDIDATE else None
    return render_page(
        request,
        "curation/link_compare.html",
        {
            "link": link,
            "left": comparison.left,
            "right": comparison.right,
            "rows": [
                {"row": row, "label": COMPARED_LABELS[row.section]} for row in comparison.rows
            ],
            "differences": sum(1 for row in comparison.rows if row.differs),
            "percent": round(link.similarity * 100),
            "compare_url": reverse("curation:link-compare", args=[link.pk]),
            "resolve_url": reverse("curation:link-resolve", args=[link.pk]),
            "can_review": request.user.has_perm(REVIEW),
            "candidate": candidate,
            # The review threads on the newer case, beside the comparison.
            "left_threads": thread_views_of(comparison.left.id, comparison.left.tenant),
            "left_role": _("Candidate") if candidate else _("Newer case"),
            "right_role": _("Approved case it resembles") if candidate else _("Older case"),
        },
        partial="compare-main",
    )


@require_POST
@console_view(VIEW_CASE, REVIEW)
def link_resolve(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    link = or_404(near_duplicate_get_visible(pk, request.user))
    form = LinkResolveForm(request.POST)
    fallback = similar_url(link.case_a_id)
    target = _safe_next(request, str(request.POST.get("next", "")), fallback)
    if not form.is_valid():
        messages.error(request, gettext("Choose a decision and give a reason."))
        return finish(request, target)
    try:
        incidents.near_duplicate_resolve(
            link=link,
            decision=form.cleaned_data["decision"],
            canonical=form.cleaned_data["canonical"],
            actor=acting_user(request),
            reason=form.cleaned_data["reason"],
        )
    except ValidationFailure as failure:
        messages.error(request, str(failure))
    else:
        if form.cleaned_data["decision"] == incidents.SAME_INCIDENT:
            messages.success(
                request,
                gettext("Recorded as one incident. Every incident count now counts them once."),
            )
        else:
            messages.success(request, gettext("Recorded as different incidents."))
    return finish(request, target)
