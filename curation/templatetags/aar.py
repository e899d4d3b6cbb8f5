"""``{% drafted_from item_id %}``: "drafted from run R" on a case or lesson page, each run linked
to its trace (the investigation's page, or the run page of a skill run); on a lesson page also
who wrote its words (the trace or the review agent), the agent's citations of the trace, and why
its draft was not used when it was refused."""

from __future__ import annotations

from typing import Any

from django import template
from django.db.models import Q
from django.urls import reverse

from curation import aar
from curation.aar_drafts import DRAFTED_BY_MODEL
from curation.models import RunDraft
from investigations.models import Investigation

register = template.Library()


@register.inclusion_tag("curation/_drafted_from.html")
def drafted_from(item_id: str) -> dict[str, Any]:
    drafts = list(RunDraft.objects.filter(Q(case_id=item_id) | Q(lesson_id=item_id)))
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
        lesson = draft.lesson_id == item_id
        runs.append(
            {
                "draft": draft,
                "url": url,
                "attached": draft.lesson_attached if lesson else draft.attached,
                "by_agent": lesson and draft.lesson_drafted_by == DRAFTED_BY_MODEL,
                "citations": draft.lesson_citations if lesson else [],
                "note": draft.lesson_note if lesson else "",
            }
        )
    return {"runs": runs}
