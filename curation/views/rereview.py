"""The re-review queue: entries, re-certifying a case, confirming a skill."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from curation import rereview, scan
from curation.forms import ReasonForm, RecertifyForm, ReReviewFilterForm
from curation.models import ReReview, ReReviewReason, ReReviewStatus
from curation.selectors.rereview import rereview_documents, rereview_get_visible, rereview_queue
from curation.views import PER_PAGE
from experience.core.models import Status
from experience.pages.availability import AvailabilityView, availability_view
from experience.pages.selectors import availabilities, case_for_page
from experience.pages.sentences import outdated_cause_sentence
from knowledge.versions import VersionDiff, version_diff
from reviewconsole import clock, itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.itemrefs import item_titles
from reviewconsole.links import item_url
from reviewconsole.permissions import ADD_CASE, VIEW_CASE, VIEW_SKILL
from reviewconsole.permissions import REVIEW_CASE as REVIEW
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404, paginate, render_page

# --- re-review ---------------------------------------------------------------------------------


def _rereview_revoke_url(entry: ReReview) -> str:
    """Where an entry's item is revoked with its impact previewed: a lesson on its own page."""
    digest = itemids.digest_of(entry.item_id)
    if entry.item_type == "lesson":
        return reverse("experience:lesson-detail", args=[digest]) + "#lesson-revoke"
    name = "experience:case-revoke" if entry.item_type == "case" else "experience:skill-revoke"
    return reverse(name, args=[digest])


def _documents_of(entries: list[ReReview]) -> dict[int, dict[str, Any]]:
    """Per entry: the cited version and the newer one, each with its page, and what changed
    between them (one diff per pair of versions, whatever the number of entries citing it)."""
    documents = rereview_documents(entries)
    diffs: dict[tuple[str, str, str], VersionDiff] = {}
    out: dict[int, dict[str, Any]] = {}
    for entry in entries:
        old = documents.get((entry.tenant, entry.document_id))
        new = documents.get((entry.tenant, entry.detail))
        diff = None
        if old is not None and new is not None and old.version < new.version:
            key = (entry.tenant, entry.document_id, entry.detail)
            diff = diffs.get(key) or diffs.setdefault(key, version_diff(old, new))
        out[entry.pk] = {
            "document_url": old.get_absolute_url() if old is not None else "",
            "newer_url": new.get_absolute_url() if new is not None else "",
            "version_diff": diff,
        }
    return out


def _confirmable(entry: ReReview) -> bool:
    return entry.item_type == "skill" or entry.reason == ReReviewReason.REFUTED


def _availability_of(entries: list[ReReview], user: Any) -> dict[str, AvailabilityView]:
    """Whether each entry's item may be used now, and why not, its cited cases named by title."""
    found = availabilities([entry.item_id for entry in entries], clock.now())
    titles = item_titles((state.subject for state in found.values() if state.subject), user)
    named = {str(item): title for item, title in titles.items()}
    return {
        entry.item_id: availability_view(Status.APPROVED, found.get(entry.item_id), named)
        for entry in entries
    }


@require_GET
@console_view(VIEW_CASE)
def rereview_list(request: HtmxHttpRequest) -> HttpResponse:
    form = ReReviewFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_bound and form.is_valid() else {}
    entries = rereview_queue(
        request.user, status=filters.get("status", ""), reason=filters.get("reason", "")
    )
    page = paginate(request, entries, PER_PAGE)
    shown = list(page.object_list)
    documents = _documents_of(shown)
    states = _availability_of(shown, request.user)
    rows = [
        {
            "entry": entry,
            "url": item_url(entry.item_id),
            "new_url": item_url(entry.new_item_id) if entry.new_item_id else "",
            "recertify_url": reverse("curation:rereview-recertify", args=[entry.pk]),
            "confirm_url": reverse("curation:rereview-confirm", args=[entry.pk]),
            "revoke_url": _rereview_revoke_url(entry),
            "restore_url": reverse(
                "experience:lesson-restore", args=[itemids.digest_of(entry.item_id)]
            )
            if entry.reason == ReReviewReason.OUTDATED
            else "",
            "conflict_url": reverse("experience:lesson-conflict", args=[int(entry.detail)])
            if entry.reason == ReReviewReason.CONFLICT and entry.detail.isdigit()
            else "",
            "cause": outdated_cause_sentence(entry.detail)
            if entry.reason == ReReviewReason.OUTDATED
            else None,
            # An agent's refutation: the runs to look at, and a confirmation for any kind.
            "runs": [
                (run_id, reverse("experience:run-detail", args=[run_id])) for run_id in entry.runs
            ]
            if entry.reason == ReReviewReason.REFUTED
            else [],
            **documents[entry.pk],
            "availability": states[entry.item_id],
            # Confirming says the item holds: never offered for one that may not be used now.
            "confirmable": _confirmable(entry) and states[entry.item_id].available is not False,
            "confirm_withheld": _confirmable(entry) and states[entry.item_id].available is False,
        }
        for entry in shown
    ]
    return render_page(
        request,
        "curation/rereview_list.html",
        {
            "form": form,
            "page_obj": page,
            "rows": rows,
            "can_review": request.user.has_perm(REVIEW),
            "can_submit": request.user.has_perm(ADD_CASE),
            "stale_after_days": scan.stale_after_days(),
        },
        partial="rereview-results",
    )


@require_http_methods(["GET", "POST"])
@console_view(VIEW_CASE, ADD_CASE)
def rereview_recertify(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    entry = or_404(rereview_get_visible(pk, request.user))
    if entry.item_type != "case":
        raise Http404
    old = case_for_page(entry.item_id)
    if old is None:
        raise Http404
    if request.method == "POST":
        form = RecertifyForm(request.POST)
        if form.is_valid():
            try:
                new = rereview.rereview_recertify(
                    entry=entry,
                    valid_from=form.cleaned_data["valid_from"],
                    valid_to=form.cleaned_data["valid_to"],
                    actor=acting_user(request),
                )
            except ValidationFailure as failure:
                form.add_error(
                    failure.field if failure.field in form.fields else None, failure.message
                )
            else:
                messages.success(
                    request,
                    gettext(
                        "New version submitted. Its approval by another reviewer supersedes the old one."
                    ),
                )
                return finish(request, new.get_absolute_url())
        status = 422
    else:
        now = timezone.localtime(clock.now())
        length = old.valid_to - old.valid_from
        form = RecertifyForm(
            initial={
                "valid_from": now.replace(microsecond=0).isoformat(),
                "valid_to": (now + length).replace(microsecond=0).isoformat(),
            }
        )
        status = 200
    return render_page(
        request,
        "curation/rereview_recertify.html",
        {
            "entry": entry,
            **_documents_of([entry])[entry.pk],
            "old": old,
            "old_url": old.get_absolute_url(),
            "form": form,
            "open": entry.status == ReReviewStatus.OPEN and old.status == Status.APPROVED,
        },
        status=status,
    )


@require_POST
@console_view(VIEW_SKILL, REVIEW)
def rereview_confirm(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    entry = or_404(rereview_get_visible(pk, request.user))
    form = ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, gettext("A reason is required."))
    else:
        try:
            rereview.rereview_confirm(
                entry=entry, actor=acting_user(request), reason=form.cleaned_data["reason"]
            )
        except ValidationFailure as failure:
            messages.error(request, failure.message)
        else:
            messages.success(request, gettext("Confirmed; the entry left the re-review queue."))
    return finish(request, reverse("curation:rereview-list"))
