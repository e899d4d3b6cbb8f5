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
from curation.domain.similarity import ComparedEntry
from curation.forms import LinkFilterForm, LinkResolveForm
from curation.models import NearDuplicate
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
from reviewconsole.errors import ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.links import item_url
from reviewconsole.permissions import REVIEW_CASE as REVIEW
from reviewconsole.permissions import VIEW_CASE
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404, paginate, render_page
from textsearch.worddiff import Segment, closest, new_side, old_side, word_diff


def similar_url(case_id: str) -> str:
    return reverse("curation:case-similar", args=[itemids.digest_of(case_id)])


def _safe_next(request: HtmxHttpRequest, candidate: str, fallback: str) -> str:
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return fallback


# --- near-duplicates and incidents ------------------------------------------------------------


def similarity_phrase(link: NearDuplicate) -> str:
    """A pair's similarity named by the measure that found it, the same words on every page:
    ``words`` is the Jaccard similarity of the two cases' tokens (``curation.domain.similarity``),
    ``meaning`` the cosine of their embeddings (``semantic.duplicates``)."""
    percent = round(link.similarity * 100)
    if link.found_by == "meaning":
        return gettext("%(percent)s%% similar in meaning") % {"percent": percent}
    return gettext("%(percent)s%% similar in wording") % {"percent": percent}


# What each measure is, said once on the comparison.
MEASURE_EXPLAINED = {
    "words": _(
        "Similar in wording: the share of words (in Chinese, of adjacent character pairs) that "
        "the two cases' titles, summaries, observations and diagnoses have in common."
    ),
    "meaning": _(
        "Similar in meaning: how close the language model places the two cases' texts, "
        "although their words differ."
    ),
}


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
                "similarity": similarity_phrase(entry.link),
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
            "similarity": similarity_phrase(link),
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
    "title": _("Title"),
    "summary": _("Summary"),
    "scope": _("Scope"),
    "observations": _("Observations"),
    "diagnosis": _("Diagnosis"),
    "counterevidence": _("Counterevidence"),
    "outcome": _("Outcome"),
}


def _roles(left: Case, right: Case) -> tuple[str, str]:
    """What each side of a pair is: a candidate beside the case it resembles (named approved
    only when it is), else the newer beside the older."""
    if left.status == Status.CANDIDATE:
        if right.status == Status.APPROVED:
            return str(_("Candidate")), str(_("Approved case it resembles"))
        if right.status == Status.CANDIDATE:
            return str(_("Candidate")), str(_("Another candidate it resembles"))
        return str(_("Candidate")), str(_("Case it resembles"))
    if left.submitted_at >= right.submitted_at:
        return str(_("Newer case")), str(_("Older case"))
    return str(_("Older case")), str(_("Newer case"))


def _scope_text(case: Case) -> str:
    return " · ".join(f"{name}: {getattr(case, name)}" for name in SCOPE_FIELDS)


def _marked(
    texts: tuple[str, ...] | list[str], others: tuple[str, ...] | list[str], *, new: bool
) -> list[dict[str, Any]]:
    """Each text of one side, word by word against the closest text of the other side (the
    left side is the new one, the right the old): its kept words and what only it says."""
    out = []
    for text in texts:
        index = closest(text, others)
        segments: tuple[Segment, ...] = ()
        if index is not None:
            if new:
                segments = new_side(word_diff(others[index], text))
            else:
                segments = old_side(word_diff(text, others[index]))
        out.append({"text": text, "segments": segments})
    return out


def _cell(
    entries: tuple[ComparedEntry, ...], others: tuple[ComparedEntry, ...], *, new: bool
) -> list[dict[str, Any]]:
    """A section's statements of one case as the cell shows them, each statement and excerpt
    with its words marked against the closest one of the other case (``closest``: none when
    nothing there is alike)."""
    their_texts = [o.text for o in others]
    their_evidence = [excerpt for o in others for excerpt in o.evidence]
    cells = []
    for entry in entries:
        cells.append(
            {
                "match": entry.match,
                "text": entry.text,
                "segments": _marked([entry.text], their_texts, new=new)[0]["segments"],
                "detail": entry.detail,
                "evidence": _marked(entry.evidence, their_evidence, new=new),
            }
        )
    return cells


def _heading_rows(left: Case, right: Case) -> list[dict[str, Any]]:
    """Title, summary and scope of the two cases, word by word (the left case as the new text)."""
    rows = []
    for name, old, new in (
        ("title", right.title, left.title),
        ("summary", right.summary, left.summary),
        ("scope", _scope_text(right), _scope_text(left)),
    ):
        segments = word_diff(old, new)
        rows.append(
            {
                "section": name,
                "label": COMPARED_LABELS[name],
                "differs": old != new,
                "left": new_side(segments),
                "right": old_side(segments),
            }
        )
    return rows


@require_GET
@console_view(VIEW_CASE)
def link_compare(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Two similar cases side by side, field by field, the words that differ marked, with the
    decision beside them: one incident or two, and the candidate's own review."""
    comparison = or_404(near_duplicate_comparison(pk, request.user))
    link = comparison.link
    left, right = comparison.left, comparison.right
    candidate = left if left.status == Status.CANDIDATE else None
    left_role, right_role = _roles(left, right)
    heading_rows = _heading_rows(left, right)
    return render_page(
        request,
        "curation/link_compare.html",
        {
            "link": link,
            "left": left,
            "right": right,
            "heading_rows": heading_rows,
            "rows": [
                {
                    "row": row,
                    "label": COMPARED_LABELS[row.section],
                    "left": _cell(row.left, row.right, new=True),
                    "right": _cell(row.right, row.left, new=False),
                }
                for row in comparison.rows
            ],
            "differences": sum(1 for row in heading_rows if row["differs"])
            + sum(1 for row in comparison.rows if row.differs),
            "similarity": similarity_phrase(link),
            "measure": MEASURE_EXPLAINED.get(link.found_by, MEASURE_EXPLAINED["words"]),
            "compare_url": reverse("curation:link-compare", args=[link.pk]),
            "resolve_url": reverse("curation:link-resolve", args=[link.pk]),
            "can_review": request.user.has_perm(REVIEW),
            "candidate": candidate,
            "left_role": left_role,
            "right_role": right_role,
            # What a marked word is, on each side.
            "ins_label": gettext("only in: %(role)s") % {"role": left_role},
            "del_label": gettext("only in: %(role)s") % {"role": right_role},
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
