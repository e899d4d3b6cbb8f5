"""The review queue a reviewer works through, and the queue an item page was opened from (its
previous and next items, "Approve and next")."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpResponse, QueryDict
from django.urls import reverse
from django.views.decorators.http import require_GET

from experience.core.models import Status
from experience.pages.availability import availability_views
from experience.pages.forms import QueueFilterForm
from experience.pages.scope_options import scope_values
from experience.pages.selectors import QueueFilters, queue_neighbours, review_queue_rows
from reviewconsole import clock
from reviewconsole.claims import claims_on
from reviewconsole.formfields import offer_values
from reviewconsole.links import item_url
from reviewconsole.permissions import VIEW_CASE, VIEW_LESSON, VIEW_SKILL
from reviewconsole.tenancy import tenants_of
from reviewconsole.views import HtmxHttpRequest, console_view, paginate, render_page

QUEUE_PER_PAGE = 25


# --- the queue a reviewer works through ------------------------------------------------------------


def queue_filters_of(text: str) -> tuple[QueueFilters, str]:
    """The queue filter carried by an item page (``?queue=…``), and its query string again."""
    data = QueryDict(text[:1000], mutable=True)
    data.setdefault("status", Status.CANDIDATE)
    form = QueueFilterForm(data)
    return form.queue_filters(), text[:1000]


def in_queue(url: str | None, queue: str) -> str:
    """An item page's address that remembers the queue filter it was opened from."""
    if not url:
        return ""
    return f"{url}?{urlencode({'queue': queue})}" if queue else url


def queue_url(queue: str) -> str:
    base = reverse("experience:queue")
    return f"{base}?{queue}" if queue else base


def queue_context(request: HtmxHttpRequest, item_id: str) -> dict[str, Any]:
    """The previous and next item of the queue this page was opened from (j and k, and
    "Approve and next"); the queue of candidates when the page names none."""
    # A refused decision renders the panel again from the POST: it keeps the queue it came from.
    carried = request.GET.get("queue") or request.POST.get("queue") or ""
    filters, queue = queue_filters_of(str(carried))
    previous, following = queue_neighbours(
        filters,
        item_id,
        now=clock.now(),
        tenants=tenants_of(request.user),
        lessons=request.user.has_perm(VIEW_LESSON),
    )
    return {
        "queue": queue,
        "queue_url": queue_url(queue),
        "previous_url": in_queue(item_url(previous), queue) if previous else "",
        "next_url": in_queue(item_url(following), queue) if following else "",
    }


# --- queue -------------------------------------------------------------------------------------


def queue_listed(
    data: QueryDict, user: User | AnonymousUser, now: datetime
) -> tuple[QueueFilterForm, Any]:
    """The filter form of the query ``data`` and the rows the queue lists for it, as ``user``
    may see them: the one definition of what a queue address shows, read by the queue and by
    every dashboard card that links to it (``console.selectors``), so a card counts its list."""
    data = data.copy()
    data.setdefault("status", Status.CANDIDATE)  # the queue opens on what waits for review
    form = QueueFilterForm(data)
    rows = review_queue_rows(
        form.queue_filters(),
        now=now,
        tenants=tenants_of(user),
        lessons=user.has_perm(VIEW_LESSON),
    )
    return form, rows


@require_GET
@console_view(VIEW_CASE, VIEW_SKILL)
def queue(request: HtmxHttpRequest) -> HttpResponse:
    form, listed = queue_listed(request.GET, request.user, clock.now())
    page = paginate(request, listed, QUEUE_PER_PAGE)
    # The scope filters offer the values that exist, read only when the form renders (a full page).
    offer_values(form, lambda: scope_values(request.user))
    # Each item page remembers this filter, so its "Approve and next" stays in this queue.
    remembered = request.GET.copy()
    remembered.pop("page", None)
    queue = remembered.urlencode()
    now = clock.now()
    states = availability_views(page.object_list, now)
    # Who holds each item (one query for the page): others see it before they open one.
    held = claims_on([row["id"] for row in page.object_list], request.user, now)
    rows = [
        {
            **row,
            "url": in_queue(item_url(row["id"]), queue),
            "availability": states[row["id"]],
            "claim": held.get(row["id"]),
        }
        for row in page.object_list
    ]
    return render_page(
        request,
        "experience/queue_list.html",
        {"form": form, "page_obj": page, "rows": rows},
        partial="queue-results",
    )
