"""Console pages of lessons: the list, a lesson side by side with its evidence, review, merges,
and the conflicts queue with its resolution.

Every decision is made by ``experience.lessons``; every read by ``experience.lesson_selectors``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from experience.cases.selectors import cited_case, gate_fields
from experience.core.availability import case_availability, case_usable, lesson_availability
from experience.core.domain import REVOCABLE, same_scope
from experience.core.models import Status
from experience.core.review import Impact, ReviewRefused
from experience.lessons import selectors as lesson_selectors
from experience.lessons.domain import LESSON_TYPES, ConflictSide, favoured_side
from experience.lessons.models import Lesson
from experience.pages.forms import ReviewForm
from experience.pages.items import (
    CONDITION_LABELS,
    IMPACT_CHANGED,
    LESSON_CONDITIONS,
    Condition,
    ReviewKind,
    availability_view,
    availability_views,
    conditions,
    impact_changed,
    impact_confirmation,
    impact_preview,
    impact_reach,
    impact_views,
    queue_context,
    review,
)
from experience.pages.sentences import (
    CONFLICT_FOUND_ON,
    conflict_reason_sentence,
    lesson_type_name,
    outdated_cause_sentence,
)
from experience.review import conflicts, decisions, revocation
from experience.review import outdating as review_outdating
from experience.review.impact import stored_impacts
from reviewconsole import clock
from reviewconsole.display import local_times_in
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import (
    RESOLVE_LESSON_CONFLICT,
    REVIEW_CASE,
    VIEW_LESSON,
    holds,
)
from reviewconsole.reasons import MAX_REASON
from reviewconsole.views import (
    HtmxHttpRequest,
    console_view,
    diff_lines,
    finish,
    or_404,
    paginate,
    render_page,
)

LESSONS_PER_PAGE = 25


def _refusal(error: Exception) -> list[dict[str, str]]:
    """The unmet conditions of a refused write, each with its checklist line."""
    if isinstance(error, ReviewRefused):
        names = list(error.unmet)
    elif isinstance(error, PermissionRefused):
        names = [error.unmet]
    else:
        assert isinstance(error, ValidationFailure)
        return [{"name": error.field, "label": error.message}]
    return [{"name": name, "label": str(CONDITION_LABELS.get(name, name))} for name in names]


ANY_STATUS = "all"


@require_GET
@console_view(VIEW_LESSON)
def lesson_list(request: HtmxHttpRequest) -> HttpResponse:
    # Every status by default: approved lessons and those in conflict are what a newcomer looks
    # for first; the filter narrows to candidates.
    status = request.GET.get("status", ANY_STATUS)
    lesson_type = request.GET.get("lesson_type", "")
    visible = lesson_selectors.visible_lessons(acting_user(request))
    rows = visible.select_related("submitted_by")
    if status in Status.values:
        rows = rows.filter(status=status)
    if lesson_type in LESSON_TYPES:
        rows = rows.filter(lesson_type=lesson_type)
    page = paginate(request, rows.order_by("-submitted_at", "id"), LESSONS_PER_PAGE)
    filtered = status in Status.values or lesson_type in LESSON_TYPES
    # The same availability state as the lesson's page and the queue show.
    page.object_list = list(page.object_list)
    states = availability_views(
        [{"id": lesson.id, "status": lesson.status} for lesson in page.object_list], clock.now()
    )
    for lesson in page.object_list:
        lesson.availability = states[lesson.id]
    return render_page(
        request,
        "experience/lesson_list.html",
        {
            "page": page,
            "status": status,
            "lesson_type": lesson_type,
            "statuses": Status.values,
            "lesson_types": LESSON_TYPES,
            "open_conflicts": lesson_selectors.open_conflicts(acting_user(request)).count(),
            # An empty filtered list says how many lessons the filters hide.
            "hidden": visible.count() if filtered and not page.object_list else 0,
        },
        partial="lesson-rows",
    )


def _lines(content: dict[str, Any]) -> list[str]:
    """A lesson's canonical content as lines, so a diff shows what changed between versions."""
    text = json.dumps(content, ensure_ascii=False, indent=2, sort_keys=True)
    # Times in the viewer's zone, like every time on the page (the content holds UTC).
    return local_times_in(text).splitlines()


def _diff(old: Lesson, new: Lesson) -> list[Any]:
    return diff_lines(_lines(old.content), _lines(new.content), old_label=old.id, new_label=new.id)


def _evidence_rows(cases: list[Any], lesson: Lesson) -> list[dict[str, Any]]:
    now = clock.now()
    return [
        {
            "case": case,
            "usable": case_usable(cited_case(case), now),
            "availability": availability_view(
                case.status, case_availability(gate_fields(case), now)
            ),
            "same_scope": same_scope(case.scope, lesson.scope),
        }
        for case in cases
    ]


def _checklist(lesson: Lesson, user: Any, reason: str) -> Any:
    unmet = lesson_selectors.lesson_approval_checklist(
        lesson=lesson, reviewer=user, reason=reason, now=clock.now()
    )
    return conditions(LESSON_CONDITIONS, unmet)


def _detail_context(
    request: HtmxHttpRequest,
    lesson: Lesson,
    *,
    errors: list[dict[str, str]] | None = None,
    reason: str = "",
    review_errors: list[Condition] | None = None,
) -> dict[str, Any]:
    """The lesson page; its review panel is the one cases and skills share
    (``experience.pages.items.review``)."""
    user = acting_user(request)
    now = clock.now()
    evidence = lesson_selectors.lesson_evidence(lesson)
    score = lesson_selectors.lesson_confidence(lesson, now, evidence)
    supports, _ = evidence.cited()
    previous = (
        Lesson.objects.filter(pk=lesson.supersedes, tenant=lesson.tenant).first()
        if lesson.supersedes
        else None
    )
    proposals = []
    for proposal in lesson_selectors.merge_proposals(lesson):
        target = Lesson.objects.get(pk=proposal.target)
        proposals.append({"proposal": proposal, "target": target, "diff": _diff(target, lesson)})
    digest = lesson.digest
    return {
        "item": lesson,
        "item_type": "lesson",
        "lesson": lesson,
        "supports": _evidence_rows(evidence.supports, lesson),
        "contradicts": _evidence_rows(evidence.contradicts, lesson),
        "confidence": score,
        "inputs": score.as_json(),
        "availability": availability_view(
            lesson.status,
            lesson_availability(gate_fields(lesson), supports, now),
            {case.id: case.title for case in evidence.supports},
        ),
        "conflicts": lesson_selectors.conflicts_of(lesson),
        "proposals": proposals,
        "previous": previous,
        "version_diff": _diff(previous, lesson) if previous else [],
        "checklist": _checklist(lesson, user, reason),
        "review_form": ReviewForm(initial={"reason": reason}),
        "review_errors": review_errors or [],
        "review_url": reverse("experience:lesson-review", args=[digest]),
        "checklist_url": reverse("experience:lesson-checklist", args=[digest]),
        "detail_url": lesson.get_absolute_url(),
        "can_review": holds(user, REVIEW_CASE),
        "expired": lesson.valid_to <= now,
        "impacts": impact_views(stored_impacts(lesson.id)),
        # What revoking it would reach, as every revocation previews it.
        "preview": impact_preview(lesson.id) if lesson.status in REVOCABLE else None,
        "revocable": lesson.status in REVOCABLE,
        "outdated_cause": outdated_cause_sentence(lesson.outdated_cause)
        if lesson.status == Status.OUTDATED
        else None,
        "restore_url": reverse("experience:lesson-restore", args=[digest]),
        # Restoring, like approving, is never the submitter's own (review_outdating.lesson_restore).
        "own_submission": lesson.submitted_by_id == user.pk,
        "errors": errors or [],
        "reason": reason,
        **queue_context(request, lesson.id),
    }


@require_GET
@console_view(VIEW_LESSON)
def lesson_detail(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    lesson = or_404(lesson_selectors.lesson_get_visible(acting_user(request), digest))
    return render_page(
        request,
        "experience/lesson_detail.html",
        _detail_context(request, lesson),
        partial="lesson-main",
    )


LESSON_REVIEW = ReviewKind(
    "lesson",
    "experience/lesson_detail.html",
    decisions.lesson_approve,
    decisions.lesson_reject,
    _detail_context,
)


@require_GET
@console_view(VIEW_LESSON)
def lesson_checklist(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    """The live approval checklist for the reason typed so far (as a case's)."""
    lesson = or_404(lesson_selectors.lesson_get_visible(acting_user(request), digest))
    if not request.htmx:
        return HttpResponseRedirect(lesson.get_absolute_url())
    reason = request.GET.get("reason", "")[:MAX_REASON]
    return render_page(
        request,
        "experience/case_detail.html",
        {"checklist": _checklist(lesson, acting_user(request), reason), "item": lesson},
        partial="approval-checklist",
    )


@require_POST
@console_view(VIEW_LESSON, REVIEW_CASE)
def lesson_review(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    """Approve or reject as a case or skill is (``experience.pages.items.review``); revoke an approved
    lesson with a reason."""
    lesson = or_404(lesson_selectors.lesson_get_visible(acting_user(request), digest))
    if str(request.POST.get("decision", "")) != "revoke":
        return review(request, lesson, LESSON_REVIEW)
    reason = str(request.POST.get("reason", ""))
    try:
        outcome = revocation.lesson_revoke(lesson=lesson, actor=acting_user(request), reason=reason)
    except (ReviewRefused, PermissionRefused, ValidationFailure) as error:
        lesson.refresh_from_db()
        return render_page(
            request,
            "experience/lesson_detail.html",
            _detail_context(request, lesson, errors=_refusal(error), reason=reason),
            partial="lesson-main",
            status=422,
        )
    messages.success(request, impact_confirmation(outcome.impact))
    if "previewed_impact" in request.POST and impact_changed(request.POST, outcome.impact):
        messages.warning(request, str(IMPACT_CHANGED))
    return finish(request, lesson.get_absolute_url())


@require_POST
@console_view(VIEW_LESSON, REVIEW_CASE)
def lesson_restore(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    """Restore an outdated lesson with a reason (``experience.lessons.outdating``); revoking it
    goes through the revoke panel, which previews the impact."""
    lesson = or_404(lesson_selectors.lesson_get_visible(acting_user(request), digest))
    reason = str(request.POST.get("reason", ""))
    try:
        review_outdating.lesson_restore(lesson=lesson, actor=acting_user(request), reason=reason)
    except (ReviewRefused, PermissionRefused, ValidationFailure) as error:
        lesson.refresh_from_db()
        return render_page(
            request,
            "experience/lesson_detail.html",
            _detail_context(request, lesson, errors=_refusal(error), reason=reason),
            partial="lesson-main",
            status=422,
        )
    messages.success(request, gettext("The lesson is restored and back in retrieval."))
    return finish(request, lesson.get_absolute_url())


@require_POST
@console_view(VIEW_LESSON, REVIEW_CASE)
def lesson_merge(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    user = acting_user(request)
    candidate = or_404(lesson_selectors.lesson_get_visible(user, digest))
    reason = str(request.POST.get("reason", ""))
    target = Lesson.objects.filter(
        pk=str(request.POST.get("target", "")), tenant=candidate.tenant
    ).first()
    try:
        if target is None:
            raise ValidationFailure("target", decisions.NOT_A_MERGE)
        outcome = decisions.merge_accept(
            candidate=candidate, target=target, actor=user, reason=reason
        )
    except (ReviewRefused, PermissionRefused, ValidationFailure) as error:
        candidate.refresh_from_db()
        return render_page(
            request,
            "experience/lesson_detail.html",
            _detail_context(request, candidate, errors=_refusal(error), reason=reason),
            partial="lesson-main",
            status=422,
        )
    messages.success(request, gettext("Merged into a new version."))
    return finish(request, Lesson.objects.get(pk=outcome.merged).get_absolute_url())


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


def _conflict_refusal(error: Exception) -> list[dict[str, str]]:
    if not isinstance(error, ValidationFailure):
        return _refusal(error)
    field = str(CONFLICT_FIELDS.get(error.field, error.field))
    message = str(CONFLICT_REFUSALS.get(error.message, error.message))
    return [{"name": error.field, "label": f"{field}: {message}"}]


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
    errors: list[dict[str, str]] = []
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
        except (ReviewRefused, PermissionRefused, ValidationFailure) as error:
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
