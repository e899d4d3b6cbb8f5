"""The dashboard: what waits on the user, and cards that count the lists they open."""

from __future__ import annotations

from types import SimpleNamespace

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from console.selectors import claimed_items, dashboard_cards, waiting_on
from experience.runs.followups import runs_to_follow_up_count
from reviewconsole import clock
from reviewconsole.identity import acting_user
from reviewconsole.permissions import VIEW_RUN
from reviewconsole.views import HtmxHttpRequest, console_view, render_page


@require_GET
@console_view()
def dashboard(request: HtmxHttpRequest) -> HttpResponse:
    user = acting_user(request)
    now = clock.now()
    cards = dashboard_cards(now=now, user=user)
    follow_ups = runs_to_follow_up_count(user) if user.has_perm(VIEW_RUN) else None
    waiting = waiting_on(user, now)
    return render_page(
        request,
        "console/dashboard_home.html",
        {
            "cards": cards,
            # Each card's number by its name (``counts.candidates``), for pages and tests.
            "counts": SimpleNamespace(**{name: card.count for name, card in cards.items()}),
            "runs_to_follow_up": follow_ups,
            "waiting": waiting,
            "claimed": claimed_items(waiting.claimed, now),
        },
    )
