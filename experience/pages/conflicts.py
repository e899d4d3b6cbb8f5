"""Console pages of lesson conflicts: the queue of open conflicts, and a conflict with its
resolution (keep one lesson; revoke the other or narrow it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods

from experience.core.models import Status
from experience.core.review import Impact
from experience.lessons import selectors as lesson_selectors
from experience.lessons.domain import ConflictSide, favoured_side
from experience.lessons.models import Lesson
from experience.pages.availability import availability_view
from experience.pages.checklists import REFUSED, Refused, refusal_of
from experience.pages.lessons import LESSONS_PER_PAGE
from experience.pages.revocation import (
    IMPACT_CHANGED,
    impact_changed,
    impact_preview,
    impact_reach,
    impact_views,
)
from experience.pages.sentences import CONFLICT_FOUND_ON, conflict_reason_sentence, lesson_type_name
from experience.review import conflicts
from experience.review.impact import stored_impacts
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import RESOLVE_LESSON_CONFLICT, VIEW_LESSON, holds
from reviewconsole.reasons import MAX_REASON
from reviewconsole.views import (
    Condition,
    HtmxHttpRequest,
    console_view,
    finish,
    or_404,
    paginate,
    render_page,
)


@require_GET
@console_view(VIEW_LESSON)
def conflict_list(request: HtmxHttpRequest) -> HttpResponse:
    page = paginate(
        request, lesson_selectors.open_conflicts(acting_user(request)), LESSONS_PER_PAGE
    )
    return render_page(
        request, "experience/lesson_conflict_list.html", {"page": page}, partial="conflict-rows"
    )


# The fields of the resolution form as the page names them, and its refusals as sentences.
CONFLICT_FIELDS: dict[str, Any] = {
    "keep": _("Lesson to keep"),
    "action": _("The other lesson"),
    "precondition": _("Narrower precondition"),
    "conflict": _("Conflict"),
}
CONFLICT_REFUSALS: dict[str, Any] = {
    conflicts.KEEP_REQUIRED: _("Choose which of the two lessons to keep."),
    conflicts.NOT_IN_CONFLICT: _("Choose one of the two lessons of this conflict."),
    conflicts.ACTION_REQUIRED: _("Choose whether to revoke the other lesson or narrow it."),
    conflicts.BAD_RESOLUTION: _("Choose whether to revoke the other lesson or narrow it."),
    conflicts.NARROW_NEEDS_CHANGE: _("A narrowed version needs a new precondition or scene tags."),
    conflicts.NARROW_LEAVES_NO_SUPPORT: _(
        "Every supporting case of this lesson is one the kept lesson cites against it; revoke it "
        "instead of narrowing it."
    ),
    conflicts.CONFLICT_CLOSED: _("This conflict is already resolved."),
}


def _conflict_refusal(error: Refused) -> list[Condition]:
    if not isinstance(error, ValidationFailure):
        return refusal_of(error)
    field = str(CONFLICT_FIELDS.get(error.field, error.field))
    message = str(CONFLICT_REFUSALS.get(error.message, error.message))
    return [Condition(error.field, f"{field}: {message}", False)]


def _conflict_side(lesson: Lesson, other: Lesson, now: datetime) -> dict[str, Any]:
    """One lesson of a conflict as it stands now (its availability and confidence, the figures
    the banner is worded from), and what keeping it does: revoking the other reaches what the
    preview every revocation shows lists."""
    return {
        "lesson": lesson,
        "type_name": lesson_type_name(lesson.lesson_type),
        "confidence": lesson_selectors.lesson_confidence(lesson, now),
        "availability": availability_view(
            lesson.status, lesson_selectors.lesson_availability(lesson, now)
        ),
        "other": other,
        "other_type_name": lesson_type_name(other.lesson_type),
        "revoking_other": impact_preview(other.id) if other.status == Status.APPROVED else None,
    }


def _in_retrieval(side: dict[str, Any]) -> bool:
    return side["lesson"].status == Status.APPROVED and side["availability"].available is True


def _standing(sides: list[dict[str, Any]]) -> dict[str, Any]:
    """Which side is better supported now, by the design's rule (``favoured_side``: a side in
    retrieval over one that is not, then the higher confidence), read from the figures the page
    shows beside each side; and, for each side, whether keeping it (and revoking the other)
    leaves no lesson of the conflict in retrieval."""
    weighed = [
        ConflictSide(side["lesson"].id, _in_retrieval(side), side["confidence"].value)
        for side in sides
    ]
    favoured_id = favoured_side(weighed[0], weighed[1])
    favoured = next((side for side in sides if side["lesson"].id == favoured_id), None)
    for side, other in zip(sides, reversed(sides), strict=True):
        side["in_retrieval"] = _in_retrieval(side)
        side["other_in_retrieval"] = _in_retrieval(other)
        side["other_confidence"] = other["confidence"]
        side["keeping_leaves_none"] = not side["in_retrieval"]
    return {
        "favoured_now": favoured,
        "none_in_retrieval": not any(side["in_retrieval"] for side in sides),
    }


def _previewed_impact_changed(post: Any, keep: str, impact: Impact) -> bool:
    """Whether revoking the other lesson reached something else than the preview beside the
    kept one showed (its fields end in ``_KEEP``); a form that sent none is not compared."""
    previewed = {
        name: post[f"{name}_{keep}"]
        for name in ("previewed_impact", "previewed_runs")
        if f"{name}_{keep}" in post
    }
    return bool(previewed) and impact_changed(previewed, impact)


NONE_LEFT_IN_RETRIEVAL = _(
    "Neither lesson of this conflict is in retrieval now: the kept lesson is unavailable too."
)


@require_http_methods(["GET", "POST"])
@console_view(VIEW_LESSON)
def conflict_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    user = acting_user(request)
    conflict = or_404(lesson_selectors.conflict_get_visible(user, pk))
    errors: list[Condition] = []
    keep = str(request.POST.get("keep", ""))
    action = str(request.POST.get("action", ""))
    if request.method == "POST":
        try:
            resolution = conflicts.conflict_resolve(
                conflict=conflict,
                keep=keep,
                action=action,
                actor=user,
                reason=str(request.POST.get("reason", "")),
                precondition=str(request.POST.get("precondition", ""))[:MAX_REASON],
                tags=[t for t in str(request.POST.get("tags", "")).split(",") if t.strip()],
            )
        except REFUSED as error:
            errors = _conflict_refusal(error)
        else:
            if resolution.impact is not None:
                messages.success(
                    request,
                    f"{gettext('The other lesson is revoked.')} {impact_reach(resolution.impact)}",
                )
                if _previewed_impact_changed(request.POST, keep, resolution.impact):
                    messages.warning(request, str(IMPACT_CHANGED))
                kept_now = Lesson.objects.get(pk=resolution.kept)
                if not lesson_selectors.lesson_availability(kept_now, clock.now()).available:
                    messages.warning(request, str(NONE_LEFT_IN_RETRIEVAL))
            else:
                messages.success(request, gettext("The conflict resolution is recorded."))
            return finish(request, conflict.get_absolute_url())
    now = clock.now()
    a, b = conflict.lesson_a, conflict.lesson_b
    sides = [_conflict_side(a, b, now), _conflict_side(b, a, now)]
    standing = _standing(sides)
    kept = next((side for side in sides if side["lesson"].id == conflict.kept), None)
    favoured = next((side for side in sides if side["lesson"].id == conflict.favoured), None)
    return render_page(
        request,
        "experience/lesson_conflict_detail.html",
        {
            "conflict": conflict,
            "reason": conflict_reason_sentence(conflict.found_by),
            "found_on": CONFLICT_FOUND_ON.get(conflict.detected_on, conflict.detected_on),
            "sides": sides,
            "kept": kept,
            "favoured": favoured,
            # When found and now differ, the page says both.
            "favoured_changed": (favoured or {}).get("lesson")
            != (standing["favoured_now"] or {}).get("lesson"),
            **standing,
            "stored_impacts": impact_views(stored_impacts(kept["other"].id)) if kept else [],
            "chosen_keep": keep,
            "chosen_action": action,
            "errors": errors,
            "can_resolve": holds(user, RESOLVE_LESSON_CONFLICT),
        },
        partial="conflict-main",
        status=422 if errors else 200,
    )
