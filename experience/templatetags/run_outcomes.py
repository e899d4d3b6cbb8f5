"""``{% run_outcome_form run_id %}``: the run page's Outcome form and the latest report."""

from __future__ import annotations

from typing import Any

from django import template

from experience.runs.models import Outcome, RunOutcome

register = template.Library()


@register.inclusion_tag("experience/_run_outcome.html", takes_context=True)
def run_outcome_form(context: dict[str, Any], run_id: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "latest": RunOutcome.objects.filter(run_id=run_id).select_related("reported_by").first(),
        "choices": Outcome.choices,
        "csrf_token": context.get("csrf_token"),
    }
