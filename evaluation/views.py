"""Console pages of the replay evaluation: stored reports, one report, its chart and JSON.

Any console role (reviewers, operators, admins) may read them; agents are service accounts and
get 403 like on every console page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse, JsonResponse
from django.utils.translation import get_language, pgettext_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from evaluation.chart import chart_title, cjk_font, render_chart
from evaluation.domain import METRICS, WITH, WITHOUT
from evaluation.selectors import heldout_count, report_chart, report_get, reports_recent
from reviewconsole.views import HtmxHttpRequest, console_view, or_404, paginate, render_page

REPORTS_PER_PAGE = 25
METRIC_LABELS = {
    "missed_checks": _("Missed required checks"),
    "wrong_causes": _("Wrong-cause claims"),
    "correct_causes": _("Correct-cause claims"),
    "necessary_followups": _("Necessary follow-up questions"),
    "unnecessary_followups": _("Unnecessary follow-up questions"),
    "tool_calls": _("Tool calls"),
    "calls_to_cause": _("Calls to the true cause"),
}

LOWER, HIGHER = pgettext_lazy("better", "lower"), pgettext_lazy("better", "higher")
# Necessary questions are the ones a ticket needed: neither direction is better.
BETTER = {
    "missed_checks": LOWER,
    "wrong_causes": LOWER,
    "correct_causes": HIGHER,
    "unnecessary_followups": LOWER,
    "tool_calls": LOWER,
    "calls_to_cause": LOWER,
}


@dataclass(frozen=True)
class Pair:
    """One metric of a report: with memory, without memory."""

    name: str
    label: str
    with_memory: int
    without_memory: int

    @property
    def better(self) -> str:
        """Which way the count is better: correct causes up, every cost and miss down."""
        return str(BETTER.get(self.name, ""))


def pairs(with_memory: dict[str, Any], without_memory: dict[str, Any]) -> list[Pair]:
    return [
        Pair(
            name,
            str(METRIC_LABELS[name]),
            int(with_memory.get(name, 0)),
            int(without_memory.get(name, 0)),
        )
        for name in METRICS
    ]


@require_GET
@console_view()
def report_list(request: HtmxHttpRequest) -> HttpResponse:
    page = paginate(request, reports_recent(request.user), REPORTS_PER_PAGE)
    rows = [
        {"report": report, "pairs": pairs(report.with_memory, report.without_memory)}
        for report in page.object_list
    ]
    return render_page(
        request,
        "evaluation/report_list.html",
        # The count is shown above the results only: a callable keeps it out of fragments.
        {
            "page_obj": page,
            "rows": rows,
            "metrics": pairs({}, {}),
            "heldout": lambda: heldout_count(request.user),
        },
        partial="report-results",
    )


@require_GET
@console_view()
def report_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    report = or_404(report_get(pk, request.user))
    result = report.result
    situations = [
        {**group, "pairs": pairs(group[WITH], group[WITHOUT])}
        for group in result.get("situations", [])
    ]
    names = [group["situation"] for group in situations]
    chosen = request.GET.get("situation", "")
    tickets = [
        # Each ticket reads as two rows, with memory and without.
        {**ticket, "arms": [ticket.get(WITH) or {}, ticket.get(WITHOUT) or {}]}
        for ticket in result.get("tickets", [])
        if chosen not in names or ticket["situation"] == chosen
    ]
    return render_page(
        request,
        "evaluation/report_detail.html",
        {
            "report": report,
            # The ticket set's hash in little room; the whole on hover.
            "set_hash_short": report.set_hash[:12],
            "result": result,
            "totals": pairs(report.with_memory, report.without_memory),
            "situations": situations,
            "situation_names": names,
            "chosen": chosen if chosen in names else "",
            "tickets": tickets,
        },
        partial="ticket-results",
    )


@require_GET
@console_view()
def report_chart_png(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The stored chart (English); in another language, the chart drawn again from the report's
    totals in that language, where a font for it is installed (the page's address names the
    language, so a browser caches each apart)."""
    font = cjk_font()
    if font is not None and not (get_language() or "en").startswith("en"):
        report = or_404(report_get(pk, request.user))
        chart = render_chart(
            title=chart_title(
                ticket_set=report.ticket_set, tickets=report.tickets, memory=report.memory
            ),
            with_memory=report.with_memory,
            without_memory=report.without_memory,
            font=font,
        )
    else:
        chart = or_404(report_chart(pk, request.user))
    response = HttpResponse(chart, content_type="image/png")
    response["Cache-Control"] = "private, max-age=86400, immutable"
    return response


@require_GET
@console_view()
def report_json(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    report = or_404(report_get(pk, request.user))
    response = JsonResponse(
        {"ok": True, "report": report.pk, **report.result},
        json_dumps_params={"ensure_ascii": False, "indent": 2},
    )
    response["Content-Disposition"] = f'attachment; filename="replay-{report.pk}.json"'
    return response
