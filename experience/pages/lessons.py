"""Console pages of lessons: the list, a lesson side by side with its evidence, restoring an
outdated lesson, merges (its review and revocation are the item views, ``experience.pages.items``).

Every decision is made by ``experience.review`` (``experience.review.decisions``,
``experience.review.outdating``); every read by ``experience.lessons.selectors``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_POST

from experience.cases.selectors import cited_case, gate_fields
from experience.core.availability import case_availability, case_usable, lesson_availability
from experience.core.domain import REVOCABLE, same_scope
from experience.core.models import Status
from experience.lessons import selectors as lesson_selectors
from experience.lessons.domain import LESSON_TYPES
from experience.lessons.models import Lesson
from experience.pages.availability import availability_view, availability_views
from experience.pages.checklists import LESSON_CONDITIONS, LESSON_LABELS, REFUSED
from experience.pages.items import ItemPage, item_views, refused_on_page
from experience.pages.revocation import impact_preview
from experience.pages.sentences import outdated_cause_sentence
from experience.review import decisions, revocation
from experience.review import outdating as review_outdating
from experience.review.changes import lesson_changes_request, lesson_resubmit
from reviewconsole import clock
from reviewconsole.display import local_times_in
from reviewconsole.errors import ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import REVIEW_CASE, VIEW_LESSON
from reviewconsole.views import (
    Condition,
    HtmxHttpRequest,
    console_view,
    diff_lines,
    finish,
    or_404,
    paginate,
    render_page,
)

LESSONS_PER_PAGE = 25
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


def _lesson_context(
    request: HtmxHttpRequest,
    lesson: Lesson,
    *,
    errors: Sequence[Condition] = (),
    reason: str = "",
    review_errors: Sequence[Condition] = (),
) -> dict[str, Any]:
    """The lesson page; its review panel is the one cases and skills share
    (``experience.pages.items``)."""
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
    return {
        **LESSON_PAGE.panel(request, lesson, reason=reason, review_errors=review_errors),
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
        # What revoking it would reach, as every revocation previews it.
        "preview": impact_preview(lesson.id) if lesson.status in REVOCABLE else None,
        "revocable": lesson.status in REVOCABLE,
        "outdated_cause": outdated_cause_sentence(lesson.outdated_cause)
        if lesson.status == Status.OUTDATED
        else None,
        "restore_url": reverse("experience:lesson-restore", args=[lesson.digest]),
        # Restoring, like approving, is never the submitter's own (review_outdating.lesson_restore).
        "own_submission": lesson.submitted_by_id == user.pk,
        "errors": errors,
    }


LESSON_PAGE = ItemPage(
    kind="lesson",
    view_permission=VIEW_LESSON,
    get_visible=lambda digest, user: lesson_selectors.lesson_get_visible(user, digest),
    template="experience/lesson_detail.html",
    main_partial="lesson-main",
    context=_lesson_context,
    unmet=lesson_selectors.lesson_approval_checklist,
    universe=lambda lesson: LESSON_CONDITIONS,
    approve=decisions.lesson_approve,
    reject=decisions.lesson_reject,
    revoke=revocation.lesson_revoke,
    decided=_("The lesson “%(title)s” is now %(status)s."),
    # Its page previews the impact in its revoke panel, posted to the review with
    # ``decision=revoke``.
    revoked_from="item_page",
    request_changes=lesson_changes_request,
    resubmit=lesson_resubmit,
    labels=LESSON_LABELS,
)
LESSON_VIEWS = item_views(LESSON_PAGE)


@require_POST
@console_view(VIEW_LESSON, REVIEW_CASE)
def lesson_restore(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    """Restore an outdated lesson with a reason (``experience.lessons.outdating``); revoking it
    goes through the revoke panel, which previews the impact."""
    lesson = or_404(LESSON_PAGE.get_visible(digest, acting_user(request)))
    reason = str(request.POST.get("reason", ""))
    try:
        review_outdating.lesson_restore(lesson=lesson, actor=acting_user(request), reason=reason)
    except REFUSED as error:
        return refused_on_page(request, LESSON_PAGE, lesson, error, reason)
    messages.success(request, gettext("The lesson is restored and back in retrieval."))
    return finish(request, lesson.get_absolute_url())


@require_POST
@console_view(VIEW_LESSON, REVIEW_CASE)
def lesson_merge(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    user = acting_user(request)
    candidate = or_404(LESSON_PAGE.get_visible(digest, user))
    reason = str(request.POST.get("reason", ""))
    target = Lesson.objects.filter(
        pk=str(request.POST.get("target", "")), tenant=candidate.tenant
    ).first()
    try:
        if target is None:
            raise ValidationFailure("target", decisions.NOT_A_MERGE)
        outcome = decisions.merge_accept(
            candidate=candidate,
            target=target,
            actor=user,
            reason=reason,
            take_over=request.POST.get("take_over") == "1",
        )
    except REFUSED as error:
        return refused_on_page(request, LESSON_PAGE, candidate, error, reason)
    messages.success(request, gettext("Merged into a new version."))
    return finish(request, Lesson.objects.get(pk=outcome.merged).get_absolute_url())
