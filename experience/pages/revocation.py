"""Revocation on the pages: what a revocation reaches (previewed, confirmed, stored) as the pages
show it, and the revoke page of a case or a skill."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.core.review import Impact, ReviewOutcome, ReviewRefused
from experience.lessons.models import Lesson, LessonConflict
from experience.pages.checklists import refusal_of
from experience.pages.forms import RevokeForm
from experience.pages.selectors import skills_by_id
from experience.review.impact import impact_stored, revocation_impact, stored_impacts
from experience.runs.models import RevocationImpact
from reviewconsole.errors import PermissionRefused
from reviewconsole.identity import acting_user
from reviewconsole.links import item_url
from reviewconsole.views import Condition, HtmxHttpRequest, finish, render_page


def run_url(run_id: str) -> str:
    return reverse("experience:run-detail", args=[run_id])


@dataclass
class ImpactView:
    """An impact as the pages show it (``_review_item.html#impact-lists``): each part of
    :class:`~experience.core.review.Impact` with what a reader follows (titles, links)."""

    record: RevocationImpact | None
    skills: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, str]] = field(default_factory=list)
    lessons: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    context_blocks: list[dict[str, str]] = field(default_factory=list)
    # What the confirmation compares with the impact it recomputes (``previewed_impact``).
    signature: str = ""


def impact_views(records: Iterable[RevocationImpact]) -> list[ImpactView]:
    """Each stored revocation impact, as the pages show it."""
    records = list(records)
    impacts = [impact_stored(record) for record in records]
    names = _impact_names(impacts)
    return [
        impact_view(impact, record, names) for impact, record in zip(impacts, records, strict=True)
    ]


def impact_preview(item_id: str) -> ImpactView:
    """What revoking ``item_id`` would reach now (``revocation_impact``), as the pages show it."""
    impact = revocation_impact(item_id)
    return impact_view(impact, None, _impact_names([impact]), item_id=item_id)


@dataclass(frozen=True)
class _ImpactNames:
    skills: dict[str, Skill]
    lessons: dict[str, Lesson]
    conflicts: dict[int, LessonConflict]


def _impact_names(impacts: Sequence[Impact]) -> _ImpactNames:
    """The skills, lessons and conflicts the impacts name, one query per kind."""
    skill_ids = sorted({s for impact in impacts for s in impact.skills})
    lesson_ids = sorted({lesson for impact in impacts for lesson in impact.lessons})
    conflict_ids = sorted({c for impact in impacts for c in impact.conflicts})
    return _ImpactNames(
        skills=skills_by_id(skill_ids) if skill_ids else {},
        lessons={
            lesson.id: lesson
            for lesson in Lesson.objects.filter(pk__in=lesson_ids).only("id", "title", "status")
        }
        if lesson_ids
        else {},
        conflicts=LessonConflict.objects.select_related("lesson_a", "lesson_b").in_bulk(
            conflict_ids
        )
        if conflict_ids
        else {},
    )


def impact_view(
    impact: Impact,
    record: RevocationImpact | None,
    names: _ImpactNames | None = None,
    *,
    item_id: str = "",
) -> ImpactView:
    """``impact`` (of revoking ``item_id``, or of the revocation ``record`` stored) with the
    titles and links a page shows."""
    names = names or _impact_names([impact])
    # The lessons that leave retrieval: those a case leaves unavailable, or the lesson revoked.
    reached = {*impact.lessons, record.item_id if record is not None else item_id}
    conflicts = []
    for pk in impact.conflicts:
        conflict = names.conflicts.get(pk)
        sides = [conflict.lesson_a, conflict.lesson_b] if conflict is not None else []
        conflicts.append(
            {
                "pk": pk,
                "url": conflict.get_absolute_url() if conflict is not None else "",
                # The side the revocation takes out (revoked or left unavailable), first.
                "sides": sorted(
                    ({"id": s.id, "title": s.title, "reached": s.id in reached} for s in sides),
                    key=lambda side: not side["reached"],
                ),
            }
        )
    return ImpactView(
        record,
        skills=[_item_entry(skill_id, names.skills) for skill_id in impact.skills],
        runs=[{"run_id": run_id, "url": run_url(run_id)} for run_id in impact.runs],
        lessons=[_item_entry(lesson_id, names.lessons) for lesson_id in impact.lessons],
        conflicts=conflicts,
        context_blocks=[
            {"run_id": run_id, "url": run_url(run_id)} for run_id in impact.context_blocks
        ],
        signature=impact_signature(impact),
    )


def impact_signature(impact: Impact) -> str:
    """The impact as one text, which a confirmation compares with what it recomputed."""
    return json.dumps(impact.as_json(), sort_keys=True, separators=(",", ":"))


def impact_reach(impact: Impact) -> str:
    """What a confirmed revocation reached, every part of its impact counted."""
    return gettext(
        "It reached %(skills)d skill(s), %(lessons)d lesson(s), %(conflicts)d conflict(s) and "
        "%(runs)d run(s) (%(blocks)d through a context block); the list is stored below."
    ) % {
        "skills": len(impact.skills),
        "lessons": len(impact.lessons),
        "conflicts": len(impact.conflicts),
        "runs": len(impact.runs),
        "blocks": len(impact.context_blocks),
    }


def impact_confirmation(impact: Impact) -> str:
    """The sentence a confirmed revocation answers with."""
    return f"{gettext('Revoked.')} {impact_reach(impact)}"


IMPACT_CHANGED = _(
    "The impact changed between your preview and the confirmation; the stored list is the one "
    "computed at confirmation."
)


def impact_changed(data: Mapping[str, Any], impact: Impact) -> bool:
    """Whether the impact a confirmation recomputed differs from the one its form previewed
    (``previewed_impact``; a form of before it had that, ``previewed_skills`` and
    ``previewed_runs``)."""
    previewed = data.get("previewed_impact")
    if previewed is not None:
        return str(previewed) != impact_signature(impact)
    return (
        _ids(str(data.get("previewed_skills", ""))),
        _ids(str(data.get("previewed_runs", ""))),
    ) != (sorted(impact.skills), sorted(impact.runs))


def _item_entry(item_id: str, titles: Mapping[str, Skill | Lesson]) -> dict[str, Any]:
    """A skill or lesson an impact names: its link, title and status (blank if it is gone)."""
    item = titles.get(item_id)
    return {
        "id": item_id,
        "url": item_url(item_id),
        "title": item.title if item else "",
        "status": item.status if item else "",
    }


def _ids(text: str) -> list[str]:
    return sorted(part for part in text.split(",") if part)


def revoke_page(
    request: HtmxHttpRequest,
    item: Case | Skill,
    item_type: str,
    revoke: Callable[..., ReviewOutcome],
    *,
    detail_url: str,
    revoke_url: str,
) -> HttpResponse:
    """The revoke page of ``item``: GET previews the impact; POST revokes (``revoke``, the kind's
    service bound to the item), and the service recomputes and stores the impact."""
    errors: list[Condition] = []
    form = RevokeForm(request.POST or None)
    if request.method == "POST" and not form.is_valid():
        errors = [Condition(name, message, False) for name, message in form.problems()]
    elif request.method == "POST":
        try:
            outcome = revoke(actor=acting_user(request), reason=form.cleaned_data["reason"])
        except (ReviewRefused, PermissionRefused) as refused:
            errors = refusal_of(refused)
        else:
            messages.success(request, impact_confirmation(outcome.impact))
            if impact_changed(form.data, outcome.impact):
                messages.warning(request, str(IMPACT_CHANGED))
            return finish(request, detail_url)
        item.refresh_from_db()
    preview = impact_preview(item.id) if item.status == Status.APPROVED else None
    context = {
        "item": item,
        "item_type": item_type,
        "detail_url": detail_url,
        "revoke_url": revoke_url,
        "preview": preview,
        "previewed_skills": ",".join(s["id"] for s in preview.skills) if preview else "",
        "previewed_runs": ",".join(r["run_id"] for r in preview.runs) if preview else "",
        "previewed_impact": preview.signature if preview else "",
        "form": form,
        "errors": errors,
        "impacts": impact_views(stored_impacts(item.id)),
    }
    return render_page(
        request,
        "experience/item_revoke.html",
        context,
        partial="revoke-form",
        status=422 if errors else 200,
    )
