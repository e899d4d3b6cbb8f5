"""The item views, once for every kind: the page of a case, a skill or a lesson, its live approval
checklist, its review (approve or reject, "and next" through the queue it was opened from) and its
revocation are one set of views over a per-kind description, :class:`ItemPage`.

Every decision is made by the services the description names and every rule by the domain; these
views parse input, call one of them, and show what they said.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.functional import Promise
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from experience.cases.models import Case, Skill
from experience.lessons.models import Lesson
from experience.pages.checklists import (
    CONDITION_LABELS,
    REFUSED,
    Refused,
    conditions,
    refusal_of,
)
from experience.pages.conversations import conversation_context, conversation_views
from experience.pages.forms import ReviewForm
from experience.pages.queue import in_queue, queue_context, queue_filters_of, queue_url
from experience.pages.revocation import (
    IMPACT_CHANGED,
    impact_changed,
    impact_confirmation,
    impact_views,
    revoke_page,
)
from experience.pages.selectors import queue_neighbours
from experience.review.impact import stored_impacts
from reviewconsole import clock
from reviewconsole.claim_views import claim_context
from reviewconsole.identity import acting_user
from reviewconsole.links import item_url
from reviewconsole.permissions import REVIEW_CASE, VIEW_LESSON
from reviewconsole.reasons import MAX_REASON
from reviewconsole.tenancy import tenants_of
from reviewconsole.views import (
    Checklist,
    Condition,
    HtmxHttpRequest,
    console_view,
    finish,
    or_404,
    render_page,
)

Item = Case | Skill | Lesson
View = Callable[..., HttpResponse]

# Every kind's live checklist is the approval-checklist partial of the case page.
CHECKLIST_TEMPLATE = "experience/case_detail.html"


@dataclass(frozen=True)
class ItemPage:
    """What differs between the pages of a case, a skill and a lesson; the flow is the views'
    (:func:`item_views`).

    ``kind`` is also the keyword each service takes its item by (``case_approve(case=…)``)."""

    kind: Literal["case", "skill", "lesson"]
    # The permission every page of the kind needs (deciding needs ``REVIEW_CASE`` as well).
    view_permission: str
    # The item of ``digest`` as the user may see it (None: none, or another tenant's).
    get_visible: Callable[[str, User], Any]
    template: str
    main_partial: str
    # The page's context; a refused decision renders it again with ``reason`` and
    # ``review_errors`` (the review panel) or ``errors`` (the page's own box, a lesson's).
    context: Callable[..., dict[str, Any]]
    # The approval's unmet names (``case_approval_checklist(case=…, reviewer, reason, now)``) and
    # the conditions the checklist lists for an item of the kind.
    unmet: Callable[..., Sequence[str]]
    universe: Callable[[Any], Sequence[str]]
    approve: Callable[..., Any]
    reject: Callable[..., Any]
    revoke: Callable[..., Any]
    # What the page says once a decision is made (the item named by its title).
    decided: str | Promise
    # Where a revocation is asked for: a page of its own (``experience/item_revoke.html``) or
    # the item page's revoke panel, posted to the review view with ``decision=revoke``.
    revoked_from: Literal["own_page", "item_page"] = "own_page"
    # Sending a candidate back with a comment (``experience.review.changes``), and the revision
    # that answers it where the kind has a revision form (cases).
    request_changes: Callable[..., Any] | None = None
    resubmit: Callable[..., Any] | None = None
    # How the checklist words each condition for an item of the kind.
    labels: Mapping[str, Any] = field(default_factory=lambda: CONDITION_LABELS)

    def subject(self, item: Item) -> dict[str, Item]:
        return {self.kind: item}

    def urls(self, item: Item) -> dict[str, str]:
        """The addresses an item page links to: itself, its live checklist, its review, and its
        revoke page where it has one."""
        digest = item.digest
        urls = {
            "detail_url": item.get_absolute_url(),
            "checklist_url": reverse(f"experience:{self.kind}-checklist", args=[digest]),
            "review_url": reverse(f"experience:{self.kind}-review", args=[digest]),
        }
        if self.revoked_from == "own_page":
            urls["revoke_url"] = reverse(f"experience:{self.kind}-revoke", args=[digest])
        return urls

    def checklist(self, item: Item, user: User, reason: str) -> Checklist:
        unmet = self.unmet(**self.subject(item), reviewer=user, reason=reason, now=clock.now())
        return conditions(self.universe(item), unmet, self.labels)

    def panel(
        self,
        request: HtmxHttpRequest,
        item: Item,
        *,
        reason: str = "",
        review_errors: Sequence[Condition] = (),
        evidence_keys: Sequence[str] = (),
    ) -> dict[str, Any]:
        """What every item page shows besides the item (``_review_item.html``): the review panel
        (checklist, reason, what a refused decision left unmet), the stored revocation impacts,
        its addresses, the queue it was opened from, and its conversation (threads may be
        anchored to ``evidence_keys``)."""
        user = acting_user(request)
        checklist = self.checklist(item, user, reason)
        unmet = [condition.name for condition in checklist.items if not condition.met]
        return {
            **conversation_context(item, self.kind, user, evidence_keys=evidence_keys, unmet=unmet),
            "item": item,
            "item_type": self.kind,
            "checklist": checklist,
            "review_form": ReviewForm(initial={"reason": reason}),
            "reason": reason,
            "review_errors": review_errors,
            "impacts": impact_views(stored_impacts(item.id)),
            "can_review": user.has_perm(REVIEW_CASE),
            "expired": item.valid_to <= clock.now(),
            **claim_context(item.id, item.tenant, user, may_claim=user.has_perm(REVIEW_CASE)),
            **self.urls(item),
            **queue_context(request, item.id),
        }


def _decision(
    request: HtmxHttpRequest,
    approve: Callable[..., Any],
    reject: Callable[..., Any],
    labels: Mapping[str, Any] = CONDITION_LABELS,
) -> tuple[Any | None, list[Condition]]:
    """Apply the posted approve/reject decision as the signed-in reviewer; or say what is unmet."""
    form = ReviewForm(request.POST)
    if not form.is_valid():
        return None, [Condition(name, message, False) for name, message in form.problems()]
    decide = approve if form.cleaned_data["decision"] == "approve" else reject
    try:
        return decide(
            actor=acting_user(request),
            reason=form.cleaned_data["reason"],
            take_over=form.cleaned_data["take_over"],
        ), []
    except REFUSED as refused:
        return None, refusal_of(refused, labels)


def review(request: HtmxHttpRequest, item: Item, page: ItemPage) -> HttpResponse:
    """Approve or reject ``item`` with the posted reason; then its page again, or with
    ``then=next`` the next item of the queue it was opened from (the queue when none is left).

    Refused, the review panel comes back with the unmet conditions (422)."""
    reason = str(request.POST.get("reason", ""))[:MAX_REASON]
    following = None
    filters, queue = queue_filters_of(str(request.POST.get("queue", "")))
    then_next = "next" in (request.POST.get("then"), request.GET.get("then"))
    if then_next:  # read before the decision moves the item out of its queue
        following = queue_neighbours(
            filters,
            item.id,
            now=clock.now(),
            tenants=tenants_of(request.user),
            lessons=request.user.has_perm(VIEW_LESSON),
        )[1]
    subject = page.subject(item)
    outcome, errors = _decision(
        request, partial(page.approve, **subject), partial(page.reject, **subject), page.labels
    )
    if outcome is not None:
        messages.success(
            request, str(page.decided) % {"title": item.title, "status": gettext(outcome.status)}
        )
        if not then_next:
            return finish(request, in_queue(item.get_absolute_url(), queue))
        if following is None:
            messages.info(request, gettext("Nothing else waits in this queue."))
            return finish(request, queue_url(queue))
        return finish(request, in_queue(item_url(following), queue))
    item.refresh_from_db()
    return render_page(
        request,
        page.template,
        page.context(request, item, reason=reason, review_errors=errors),
        partial="review-panel",
        status=422,
    )


def refused_on_page(
    request: HtmxHttpRequest, page: ItemPage, item: Item, error: Refused, reason: str
) -> HttpResponse:
    """The item's page again, its main part, with what a refused write left unmet (422)."""
    item.refresh_from_db()
    return render_page(
        request,
        page.template,
        page.context(request, item, errors=refusal_of(error, page.labels), reason=reason),
        partial=page.main_partial,
        status=422,
    )


def revoke_on_page(request: HtmxHttpRequest, item: Item, page: ItemPage) -> HttpResponse:
    """Revoke ``item`` from its page's revoke panel with the posted reason; refused, the page
    again with what is unmet."""
    reason = str(request.POST.get("reason", ""))
    try:
        outcome = page.revoke(**page.subject(item), actor=acting_user(request), reason=reason)
    except REFUSED as error:
        return refused_on_page(request, page, item, error, reason)
    messages.success(request, impact_confirmation(outcome.impact))
    if "previewed_impact" in request.POST and impact_changed(request.POST, outcome.impact):
        messages.warning(request, str(IMPACT_CHANGED))
    return finish(request, item.get_absolute_url())


@dataclass(frozen=True)
class ItemViews:
    """The views of one kind, as the URLconf names them (``revoke``: only where a revocation
    has a page of its own)."""

    detail: View
    checklist: View
    review: View
    revoke: View | None
    changes: View | None = None
    threads: View | None = None
    revise: View | None = None


def _named(view: View, page: ItemPage, action: str) -> View:
    view.__name__ = view.__qualname__ = f"{page.kind}_{action}"
    return view


def item_views(page: ItemPage) -> ItemViews:
    """The one set of item views, bound to ``page``: each needs the kind's view permission, and
    a decision the review permission as well."""
    deciding = (page.view_permission, REVIEW_CASE)

    def visible(request: HtmxHttpRequest, digest: str) -> Any:
        return or_404(page.get_visible(digest, acting_user(request)))

    def detail(request: HtmxHttpRequest, digest: str) -> HttpResponse:
        item = visible(request, digest)
        return render_page(
            request, page.template, page.context(request, item), partial=page.main_partial
        )

    def checklist(request: HtmxHttpRequest, digest: str) -> HttpResponse:
        """The live approval checklist for the reason typed so far."""
        item = visible(request, digest)
        if not request.htmx:
            return HttpResponseRedirect(item.get_absolute_url())
        reason = request.GET.get("reason", "")[:MAX_REASON]
        return render_page(
            request,
            CHECKLIST_TEMPLATE,
            {"checklist": page.checklist(item, acting_user(request), reason), "item": item},
            partial="approval-checklist",
        )

    def decide(request: HtmxHttpRequest, digest: str) -> HttpResponse:
        """Approve or reject; where the item page holds the revoke panel, revoke as well."""
        item = visible(request, digest)
        if page.revoked_from == "item_page" and request.POST.get("decision") == "revoke":
            return revoke_on_page(request, item, page)
        return review(request, item, page)

    def revoke(request: HtmxHttpRequest, digest: str) -> HttpResponse:
        """GET previews the impact; POST revokes, and the service recomputes and stores it."""
        item = visible(request, digest)
        urls = page.urls(item)
        return revoke_page(
            request,
            item,
            page.kind,
            partial(page.revoke, **page.subject(item)),
            detail_url=urls["detail_url"],
            revoke_url=urls["revoke_url"],
        )

    talk = (
        conversation_views(
            kind=page.kind,
            view_permission=page.view_permission,
            get_visible=page.get_visible,
            request_changes=page.request_changes,
            resubmit=page.resubmit,
        )
        if page.request_changes is not None
        else None
    )
    return ItemViews(
        changes=talk.changes if talk else None,
        threads=talk.threads if talk else None,
        revise=talk.revise if talk else None,
        detail=require_GET(console_view(page.view_permission)(_named(detail, page, "detail"))),
        checklist=require_GET(
            console_view(page.view_permission)(_named(checklist, page, "checklist"))
        ),
        review=require_POST(console_view(*deciding)(_named(decide, page, "review"))),
        revoke=require_http_methods(["GET", "POST"])(
            console_view(*deciding)(_named(revoke, page, "revoke"))
        )
        if page.revoked_from == "own_page"
        else None,
    )
