"""``{% drafted_from case_id %}``: "drafted from run R" on a case page, each run linked to its
trace (the investigation's page, or the run page of a skill run)."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from curation import aar
from curation.models import RunDraft
from investigations.models import Investigation

register = template.Library()


@register.inclusion_tag("curation/_drafted_from.html")
def drafted_from(case_id: str) -> dict[str, Any]:
    drafts = list(RunDraft.objects.filter(case_id=case_id))
    pages = dict(
        Investigation.objects.filter(
            run_id__in=[d.run_id for d in drafts if d.kind == aar.INVESTIGATION]
        ).values_list("run_id", "pk")
    )
    runs = []
    for draft in drafts:
        if draft.run_id in pages and draft.kind == aar.INVESTIGATION:
            url = reverse("investigations:investigation-detail", args=[pages[draft.run_id]])
        else:
            url = reverse("experience:run-detail", args=[draft.run_id])
        runs.append({"draft": draft, "url": url})
    return {"runs": runs}
