"""``{% drafted_from item_id %}``: "drafted from run R" on a case or lesson page, each run linked
to its trace (the investigation's page, or the run page of a skill run); on a lesson page also
who wrote its words (the trace or the review agent), the agent's citations of the trace, and why
its draft was not used when it was refused.

``{{ case.title|aar_title }}`` and ``{{ text|aar_labels }}``: a draft's words are stored content
(content-addressed, quoted verbatim by the review agent's citations, compared for near-duplicates),
so they stay as drafted, in English; a page says the labels the drafter put around them (the
title's "AAR of skill run R:", the summary's "Goal:", "Result:", …) in the reader's language."""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.db.models import Q
from django.urls import reverse
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from curation import aar
from curation.aar_drafts import DRAFTED_BY_MODEL
from curation.models import RunDraft
from investigations.models import Investigation
from reviewconsole.links import may_open

register = template.Library()

# The kind of run a draft was drafted from, as a noun ("drafted from skill run R").
KIND_NAMES = {
    aar.SKILL_RUN: pgettext_lazy("run kind", "skill run"),
    aar.INVESTIGATION: pgettext_lazy("run kind", "investigation"),
}
LINE_LABELS = {
    "Goal": _("Goal"),
    "Result": _("Result"),
    "Key decisions": _("Key decisions"),
    "Why": _("Why"),
    "Reusable": _("Reusable"),
}
_KINDS = "|".join(re.escape(kind) for kind in KIND_NAMES)
TITLE = re.compile(rf"AAR of ({_KINDS}) (\S+): (.*)", re.S)
LINE = re.compile(rf"({'|'.join(re.escape(label) for label in LINE_LABELS)}): (.*)", re.S)
RESULT = re.compile(rf"the ({_KINDS}) (.*)", re.S)
PRECONDITION = re.compile(rf"An? ({_KINDS}) in this scope whose checks were: (.*)", re.S)


def kind_name(kind: str) -> str:
    """A run kind (``skill run``, ``investigation``) in the reader's language."""
    name = KIND_NAMES.get(kind)
    return str(name) if name is not None else kind


@register.filter
def run_kind(value: object) -> str:
    return kind_name(str(value or ""))


@register.filter
def aar_title(value: object) -> str:
    """``AAR of skill run R: goal`` with its label in the reader's language."""
    text = str(value or "")
    found = TITLE.fullmatch(text)
    if found is None:
        return text
    kind, run, goal = found.groups()
    return gettext("AAR of %(kind)s %(run)s: %(goal)s") % {
        "kind": kind_name(kind),
        "run": run,
        "goal": goal,
    }


def _line(line: str) -> str:
    found = LINE.fullmatch(line)
    if found is not None:
        label, rest = found.groups()
        result = RESULT.fullmatch(rest) if label == "Result" else None
        if result is not None:
            rest = gettext("the %(kind)s %(rest)s") % {
                "kind": kind_name(result.group(1)),
                "rest": result.group(2),
            }
        return gettext("%(label)s: %(text)s") % {"label": LINE_LABELS[label], "text": rest}
    found = PRECONDITION.fullmatch(line)
    if found is not None:
        return gettext("%(kind)s in this scope whose checks were: %(checks)s") % {
            "kind": kind_name(found.group(1)).capitalize(),
            "checks": found.group(2),
        }
    return line


@register.filter
def aar_labels(value: object) -> str:
    """A draft's summary or precondition, each line's label in the reader's language."""
    return "\n".join(_line(line) for line in str(value or "").split("\n"))


@register.inclusion_tag("curation/_drafted_from.html", takes_context=True)
def drafted_from(context: template.Context, item_id: str) -> dict[str, Any]:
    request = context.get("request")
    viewer = getattr(request, "user", None)
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
                # Linked only where the viewer may open it (an operator may not open run pages).
                "url": url if may_open(viewer, url) else "",
                "attached": draft.lesson_attached if lesson else draft.attached,
                "by_agent": lesson and draft.lesson_drafted_by == DRAFTED_BY_MODEL,
                "citations": draft.lesson_citations if lesson else [],
                "note": draft.lesson_note if lesson else "",
            }
        )
    return {"runs": runs}
