"""Reviewer pages: the queue, cases, skills, revocation with impact, and run traces.

Every decision is made by ``experience.services`` and every rule by ``experience.domain``; these
views parse input, call one of them, and show what they said.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import Http404, HttpResponse, HttpResponseRedirect, QueryDict
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from experience.cases.models import Case, Evidence, EvidenceCheck, Skill
from experience.cases.selectors import (
    case_approval_checklist,
    case_evidence,
    cited_case,
    gate_fields,
    skill_approval_checklist,
    skill_cases,
)
from experience.cases.services import evidence_check
from experience.core import domain
from experience.core.availability import (
    CITED_CASE_NOT_APPROVED,
    CITED_CASE_OUTSIDE_VALIDITY,
    CITES_NO_CASES,
    NO_USABLE_SUPPORT,
    NOT_APPROVED_NOW,
    NOT_YET_APPROVED,
    OUTSIDE_VALIDITY,
    Availability,
    case_availability,
    case_usable,
    skill_availability,
)
from experience.core.models import Status
from experience.core.review import Impact, ReviewRefused
from experience.lessons import domain as lesson_domain
from experience.lessons.models import Lesson, LessonConflict
from experience.lessons.selectors import item_confidences
from experience.pages.forms import EvidenceCheckForm, QueueFilterForm, ReviewForm, RevokeForm
from experience.pages.selectors import (
    QueueFilters,
    availabilities,
    case_for_page,
    case_get_visible,
    case_lines,
    case_version_chain,
    queue_neighbours,
    review_queue_rows,
    runs_of_skill,
    same_incident_cases,
    skill_get_visible,
    skills_by_id,
    skills_citing_case,
)
from experience.review.decisions import case_approve, case_reject, skill_approve, skill_reject
from experience.review.impact import impact_stored, revocation_impact, stored_impacts
from experience.review.revocation import case_revoke, skill_revoke
from experience.runs.models import RevocationImpact
from reviewconsole import accounts, clock
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.itemrefs import item_titles
from reviewconsole.links import item_url
from reviewconsole.permissions import (
    REVIEW_CASE,
    VERIFY_EVIDENCE,
    VIEW_CASE,
    VIEW_LESSON,
    VIEW_SKILL,
)
from reviewconsole.reasons import MAX_REASON
from reviewconsole.tenancy import NOT_IN_TENANT, tenants_of
from reviewconsole.views import (
    Checklist,
    Condition,
    HtmxHttpRequest,
    checklist_of,
    console_view,
    diff_lines,
    finish,
    or_404,
    paginate,
    render_page,
)

QUEUE_PER_PAGE = 25

# What each unmet condition asks for, phrased so it reads as a checklist line (the names are in
# docs/contracts.md, Unmet conditions).
CONDITION_LABELS = {
    domain.NOT_REVIEWER: _("You hold the reviewer permission"),
    domain.REASON_REQUIRED: _("A reason is written"),
    domain.NOT_CANDIDATE: _("It is still a candidate"),
    domain.NOT_APPROVED: _("It is approved"),
    domain.EXPIRED: _("Its validity has not ended"),
    domain.OWN_SUBMISSION: _("Someone other than the submitter approves it (four eyes)"),
    domain.NOT_INDEPENDENT: _(
        "The approver's account and the submitter's are not one person's (neither created the "
        "other with a password, nor did one admin create both)"
    ),
    domain.NO_DIAGNOSIS: _(
        "The diagnosis states a cause (empty, “unknown” or “not yet determined” does not count)"
    ),
    domain.NO_CHECKED_DIAGNOSIS_EVIDENCE: _(
        "Someone other than the submitter checked at least one diagnosis evidence item"
    ),
    domain.NO_COUNTEREVIDENCE: _("At least one counterevidence entry cites evidence"),
    domain.TOO_FEW_INCIDENTS: _("Usable cited cases come from at least two distinct incidents"),
    domain.CASE_UNAVAILABLE: _("Every cited case is approved and within its validity"),
    domain.SCOPE_MISMATCH: _("Every cited case has exactly the skill's scope"),
    domain.CITES_HELDOUT_TICKET: _("Its evidence cites no held-out evaluation ticket"),
    domain.PROMPT_TOOL_NOT_ALLOWED: _(
        "Every tool its prompt declares is a registered read-only investigation tool"
    ),
    domain.NO_RECIPE: _("It has a recipe with steps or a prompt"),
    lesson_domain.NO_SUPPORTING_CASE: _(
        "A supporting case is approved, unexpired and of the lesson's scope"
    ),
    lesson_domain.CONFLICT_UNRESOLVED: _("The lesson it replaces is in no unresolved conflict"),
    NOT_IN_TENANT: _("You are a member of the item's tenant"),
    "not_permitted": _("You hold the permission this needs"),
}
CASE_CONDITIONS = (
    domain.NOT_REVIEWER,
    domain.REASON_REQUIRED,
    domain.NOT_CANDIDATE,
    domain.EXPIRED,
    domain.OWN_SUBMISSION,
    domain.NO_DIAGNOSIS,
    domain.NO_CHECKED_DIAGNOSIS_EVIDENCE,
    domain.NO_COUNTEREVIDENCE,
)
LESSON_CONDITIONS = (
    domain.NOT_REVIEWER,
    domain.REASON_REQUIRED,
    domain.NOT_CANDIDATE,
    domain.EXPIRED,
    domain.OWN_SUBMISSION,
    lesson_domain.NO_SUPPORTING_CASE,
    domain.SCOPE_MISMATCH,
    lesson_domain.CONFLICT_UNRESOLVED,
)
SKILL_CONDITIONS = (
    domain.NOT_REVIEWER,
    domain.REASON_REQUIRED,
    domain.NOT_CANDIDATE,
    domain.EXPIRED,
    domain.OWN_SUBMISSION,
    domain.CASE_UNAVAILABLE,
    domain.SCOPE_MISMATCH,
    domain.TOO_FEW_INCIDENTS,
)
# A prompt-form skill's checklist adds its tools: each still a registered read-only one.
PROMPT_SKILL_CONDITIONS = (*SKILL_CONDITIONS, domain.PROMPT_TOOL_NOT_ALLOWED)


def conditions(universe: Sequence[str], unmet: Iterable[str]) -> Checklist:
    """Every condition of ``universe`` marked met or not, plus any other unmet name reported."""
    return checklist_of(universe, unmet, CONDITION_LABELS)


def refusal(unmet: Iterable[str]) -> list[Condition]:
    return [Condition(name, str(CONDITION_LABELS.get(name, name)), False) for name in unmet]


def run_url(run_id: str) -> str:
    return reverse("experience:run-detail", args=[run_id])


# --- one availability state, phrased for people ----------------------------------------------

AVAILABILITY_TEXT = {
    NOT_APPROVED_NOW: _("it is %(status)s"),
    NOT_YET_APPROVED: _("it was not yet approved at this time"),
    OUTSIDE_VALIDITY: _("it is outside its validity window"),
    CITES_NO_CASES: _("it cites no cases"),
    CITED_CASE_NOT_APPROVED: _("cited case “%(title)s” is %(status)s"),
    CITED_CASE_OUTSIDE_VALIDITY: _("cited case “%(title)s” is outside its validity window"),
    NO_USABLE_SUPPORT: _("every supporting case is revoked, superseded or expired"),
}


@dataclass(frozen=True)
class AvailabilityView:
    """What every page shows of an item's availability (experience.domain decides it)."""

    available: bool | None  # None: not an approved item, so availability does not apply
    text: str = ""
    code: str = ""


def availability_view(
    status: str,
    availability: Availability | None,
    titles: Mapping[str, str] | None = None,
) -> AvailabilityView:
    """How the console shows ``availability``: only approved items are available or not (a
    candidate, rejected or revoked item shows its status alone)."""
    if status != Status.APPROVED or availability is None:
        return AvailabilityView(None)
    if availability.available:
        return AvailabilityView(True)
    subject = availability.subject
    template = AVAILABILITY_TEXT.get(availability.code)
    if template is None:
        return AvailabilityView(False, availability.reason, availability.code)
    params = {
        "status": gettext(availability.status) if availability.status else "",
        "title": (titles or {}).get(subject) or subject,
    }
    return AvailabilityView(False, str(template) % params, availability.code)


def availability_views(
    rows: Iterable[Mapping[str, Any]], now: Any, titles: Mapping[str, str] | None = None
) -> dict[str, AvailabilityView]:
    """The availability of each row (``id``, ``status``) of a list, read in constant queries;
    ``titles`` names the cited cases a reason may mention."""
    rows = list(rows)
    approved = [row["id"] for row in rows if row["status"] == Status.APPROVED]
    found = availabilities(approved, now) if approved else {}
    return {
        row["id"]: availability_view(row["status"], found.get(row["id"]), titles) for row in rows
    }


# --- the queue a reviewer works through ------------------------------------------------------------


def queue_filters_of(text: str) -> tuple[QueueFilters, str]:
    """The queue filter carried by an item page (``?queue=…``), and its query string again."""
    data = QueryDict(text[:1000], mutable=True)
    data.setdefault("status", Status.CANDIDATE)
    form = QueueFilterForm(data)
    return form.queue_filters(), text[:1000]


def in_queue(url: str | None, queue: str) -> str:
    """An item page's address that remembers the queue filter it was opened from."""
    if not url:
        return ""
    return f"{url}?{urlencode({'queue': queue})}" if queue else url


def queue_url(queue: str) -> str:
    base = reverse("experience:queue")
    return f"{base}?{queue}" if queue else base


def queue_context(request: HtmxHttpRequest, item_id: str) -> dict[str, Any]:
    """The previous and next item of the queue this page was opened from (j and k, and
    "Approve and next"); the queue of candidates when the page names none."""
    # A refused decision renders the panel again from the POST: it keeps the queue it came from.
    carried = request.GET.get("queue") or request.POST.get("queue") or ""
    filters, queue = queue_filters_of(str(carried))
    previous, following = queue_neighbours(
        filters,
        item_id,
        now=clock.now(),
        tenants=tenants_of(request.user),
        lessons=request.user.has_perm(VIEW_LESSON),
    )
    return {
        "queue": queue,
        "queue_url": queue_url(queue),
        "previous_url": in_queue(item_url(previous), queue) if previous else "",
        "next_url": in_queue(item_url(following), queue) if following else "",
    }


def confidence_view(item: Case | Skill) -> Any:
    """The computed confidence of a case or skill, with its inputs (as the lesson page shows)."""
    now = clock.now()
    if isinstance(item, Case):
        return item_confidences([item.id], [], now).get(item.id)
    return item_confidences([], [item.id], now).get(item.id)


# --- queue -------------------------------------------------------------------------------------


@require_GET
@console_view(VIEW_CASE, VIEW_SKILL)
def queue(request: HtmxHttpRequest) -> HttpResponse:
    data = request.GET.copy()
    data.setdefault("status", Status.CANDIDATE)  # the queue opens on what waits for review
    form = QueueFilterForm(data)
    page = paginate(
        request,
        review_queue_rows(
            form.queue_filters(),
            now=clock.now(),
            tenants=tenants_of(request.user),
            lessons=request.user.has_perm(VIEW_LESSON),
        ),
        QUEUE_PER_PAGE,
    )
    # Each item page remembers this filter, so its "Approve and next" stays in this queue.
    remembered = request.GET.copy()
    remembered.pop("page", None)
    queue = remembered.urlencode()
    states = availability_views(page.object_list, clock.now())
    rows = [
        {**row, "url": in_queue(item_url(row["id"]), queue), "availability": states[row["id"]]}
        for row in page.object_list
    ]
    return render_page(
        request,
        "experience/queue_list.html",
        {"form": form, "page_obj": page, "rows": rows},
        partial="queue-results",
    )


# --- cases -------------------------------------------------------------------------------------


@dataclass
class EvidenceView:
    evidence: Evidence
    checks: list[EvidenceCheck]
    checked_by_me: bool
    # The ids of the checks that count toward approval (domain.check_counts: not the submitter's).
    counting: frozenset[int]

    @property
    def counts(self) -> bool:
        return bool(self.counting)

    @property
    def anchor(self) -> str:
        return "ev-" + self.evidence.key.replace("/", "-")


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


def _evidence_views(case: Case, user: User) -> dict[str, EvidenceView]:
    views = {}
    submitter_holder = accounts.holder_of(int(case.submitted_by_id))
    for evidence in case_evidence(case):
        checks = list(evidence.checks.all())
        views[evidence.key] = EvidenceView(
            evidence,
            checks,
            any(check.checked_by_id == user.pk for check in checks),
            frozenset(
                check.pk
                for check in checks
                if domain.check_counts(
                    checked_by=accounts.holder_of_loaded(check.checked_by),
                    submitted_by=submitter_holder,
                )
            ),
        )
    return views


def _sections(case: Case, evidence: dict[str, EvidenceView]) -> dict[str, Any]:
    """The four sections kept apart, each evidence item with its checks."""

    def under(prefix: str) -> list[EvidenceView]:
        return [view for key, view in evidence.items() if key.startswith(prefix)]

    return {
        "observations": under("observations/"),
        "diagnosis": {
            "statement": (case.diagnosis or {}).get("statement", ""),
            "evidence": under("diagnosis/"),
        },
        "counterevidence": [
            {
                "hypothesis": entry.get("hypothesis", ""),
                "statement": entry.get("statement", ""),
                "refutes": entry.get("refutes", ""),
                "evidence": under(f"counterevidence/{index}/"),
            }
            for index, entry in enumerate(case.counterevidence or [])
        ],
        "outcome": {
            "statement": (case.outcome or {}).get("statement", ""),
            "evidence": under("outcome/"),
        },
    }


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


def _case_checklist(case: Case, user: User, reason: str) -> Checklist:
    unmet = case_approval_checklist(case=case, reviewer=user, reason=reason, now=clock.now())
    return conditions(CASE_CONDITIONS, unmet)


def _case_urls(case: Case) -> dict[str, str]:
    digest = case.digest
    return {
        "detail_url": case.get_absolute_url(),
        "checklist_url": reverse("experience:case-checklist", args=[digest]),
        "review_url": reverse("experience:case-review", args=[digest]),
        "revoke_url": reverse("experience:case-revoke", args=[digest]),
        "check_url": reverse("experience:case-check", args=[digest]),
    }


def _case_context(
    request: HtmxHttpRequest,
    case: Case,
    *,
    reason: str = "",
    review_errors: Sequence[Condition] = (),
) -> dict[str, Any]:
    user = acting_user(request)
    evidence = _evidence_views(case, user)
    chain = case_version_chain(case)
    superseded = next((c for c in chain if c.id == case.supersedes), None)
    diff = None
    if superseded is not None:
        previous = case_for_page(superseded.id)
        if previous is not None:
            diff = diff_lines(
                case_lines(previous), case_lines(case), old_label=previous.id, new_label=case.id
            )
    now = clock.now()
    citing = skills_citing_case(case)
    citing_states = availability_views(
        [{"id": skill.id, "status": skill.status} for skill in citing], now, {case.id: case.title}
    )
    return {
        "item": case,
        "item_type": "case",
        "case": case,
        "availability": availability_view(case.status, case_availability(gate_fields(case), now)),
        "confidence": confidence_view(case),
        "sections": _sections(case, evidence),
        "evidence_count": len(evidence),
        # Evidence that cites another item is named by its title (one query per kind cited).
        "item_titles": item_titles((ev.evidence.source_id for ev in evidence.values()), user),
        "checklist": _case_checklist(case, user, reason),
        "review_form": ReviewForm(initial={"reason": reason}),
        "reason": reason,
        "review_errors": review_errors,
        "versions": [{"case": c, "url": item_url(c.id)} for c in chain] if len(chain) > 1 else [],
        "superseded": superseded,
        "diff": diff,
        "same_incident": [{"case": c, "url": item_url(c.id)} for c in same_incident_cases(case)],
        "cited_by": [
            {"skill": s, "url": item_url(s.id), "availability": citing_states[s.id]} for s in citing
        ],
        "impacts": impact_views(stored_impacts(case.id)),
        "can_review": user.has_perm(REVIEW_CASE),
        "can_verify": user.has_perm(VERIFY_EVIDENCE) and case.status == Status.CANDIDATE,
        "expired": case.valid_to <= now,
        **_case_urls(case),
        **queue_context(request, case.id),
    }


@require_GET
@console_view(VIEW_CASE)
def case_detail(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    case = or_404(case_get_visible(digest, acting_user(request)))
    return render_page(
        request, "experience/case_detail.html", _case_context(request, case), partial="case-main"
    )


@require_GET
@console_view(VIEW_CASE)
def case_checklist(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    """The live approval checklist for the reason typed so far."""
    case = or_404(case_get_visible(digest, acting_user(request)))
    if not request.htmx:
        return HttpResponseRedirect(case.get_absolute_url())
    reason = request.GET.get("reason", "")[:MAX_REASON]
    return render_page(
        request,
        "experience/case_detail.html",
        {"checklist": _case_checklist(case, acting_user(request), reason), "item": case},
        partial="approval-checklist",
    )


@require_POST
@console_view(VIEW_CASE, VERIFY_EVIDENCE)
def case_check(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    case = or_404(case_get_visible(digest, acting_user(request)))
    form = EvidenceCheckForm(request.POST)
    if not form.is_valid():
        return HttpResponse(form.problem(), status=400)
    user = acting_user(request)
    key = form.cleaned_data["key"]
    try:
        evidence_check(case=case, key=key, actor=user, note=form.cleaned_data["note"])
    except ValidationFailure:
        raise Http404 from None
    detail = case.get_absolute_url()
    if not request.htmx:
        messages.success(request, gettext("Marked %(key)s as checked.") % {"key": key})
        return HttpResponseRedirect(f"{detail}#ev-{key.replace('/', '-')}", status=303)
    view = _evidence_views(case, user)[key]
    item_html = render_to_string(
        "experience/case_detail.html#evidence-item",
        {
            "ev": view,
            "can_verify": True,
            "check_url": _case_urls(case)["check_url"],
            "swapped": True,
        },
        request=request,
    )
    # The checklist elsewhere on the page changes too: swap it out of band.
    checklist_html = render_to_string(
        "experience/case_detail.html#approval-checklist",
        {"checklist": _case_checklist(case, user, ""), "item": case, "oob": True},
        request=request,
    )
    return HttpResponse(item_html + checklist_html)


def _decision(
    request: HtmxHttpRequest,
    approve: Callable[..., Any],
    reject: Callable[..., Any],
) -> tuple[Any | None, list[Condition]]:
    """Apply the posted approve/reject decision as the signed-in reviewer; or say what is unmet."""
    form = ReviewForm(request.POST)
    if not form.is_valid():
        return None, [Condition(name, message, False) for name, message in form.problems()]
    decide = approve if form.cleaned_data["decision"] == "approve" else reject
    try:
        return decide(actor=acting_user(request), reason=form.cleaned_data["reason"]), []
    except ReviewRefused as refused:
        return None, refusal(refused.unmet)
    except PermissionRefused as refused:
        return None, refusal([refused.unmet])
    except ValidationFailure as failure:
        return None, [Condition(failure.field, failure.message, False)]


# The decided item is named by its title: after "Approve and next" the message stands above
# the next item, which is still a candidate.
DECIDED = {
    "case": _("The case “%(title)s” is now %(status)s."),
    "skill": _("The skill “%(title)s” is now %(status)s."),
    "lesson": _("The lesson “%(title)s” is now %(status)s."),
}


@dataclass(frozen=True)
class ReviewKind:
    """What differs between reviewing a case, a skill and a lesson; the flow is ``review``'s."""

    name: str
    template: str
    approve: Callable[..., Any]
    reject: Callable[..., Any]
    context: Callable[..., dict[str, Any]]


def review(request: HtmxHttpRequest, item: Case | Skill | Lesson, kind: ReviewKind) -> HttpResponse:
    """Approve or reject ``item`` with the posted reason; then its page again, or with
    ``then=next`` the next item of the queue it was opened from (the queue when none is left).

    Refused, the review panel comes back with the unmet conditions (422)."""
    reason = str(request.POST.get("reason", ""))[:MAX_REASON]
    following = None
    filters, queue = queue_filters_of(str(request.POST.get("queue", "")))
    then_next = "next" in (request.POST.get("then"), request.GET.get("then"))
    if then_next:  # read before the decision moves the item out of its queue
        following = queue_neighbours(
            filters,
            item.id,
            now=clock.now(),
            tenants=tenants_of(request.user),
            lessons=request.user.has_perm(VIEW_LESSON),
        )[1]
    subject = {kind.name: item}
    outcome, errors = _decision(
        request, partial(kind.approve, **subject), partial(kind.reject, **subject)
    )
    if outcome is not None:
        messages.success(
            request,
            str(DECIDED[kind.name]) % {"title": item.title, "status": gettext(outcome.status)},
        )
        if not then_next:
            return finish(request, in_queue(item.get_absolute_url(), queue))
        if following is None:
            messages.info(request, gettext("Nothing else waits in this queue."))
            return finish(request, queue_url(queue))
        return finish(request, in_queue(item_url(following), queue))
    item.refresh_from_db()
    return render_page(
        request,
        kind.template,
        kind.context(request, item, reason=reason, review_errors=errors),
        partial="review-panel",
        status=422,
    )


@require_POST
@console_view(VIEW_CASE, REVIEW_CASE)
def case_review(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    case = or_404(case_get_visible(digest, acting_user(request)))
    return review(request, case, CASE_REVIEW)


# --- skills ------------------------------------------------------------------------------------


def _skill_checklist(skill: Skill, user: User, reason: str) -> Checklist:
    unmet = skill_approval_checklist(skill=skill, reviewer=user, reason=reason, now=clock.now())
    return conditions(PROMPT_SKILL_CONDITIONS if skill.prompt else SKILL_CONDITIONS, unmet)


def _constraints(schema: Mapping[str, Any]) -> list[str]:
    """A declared property's bounds as the schema states them (``maxLength: 500``, ``enum``)."""
    shown = []
    for key in ("minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"):
        if key in schema:
            shown.append(f"{key}: {schema[key]}")
    if "enum" in schema:
        shown.append("enum: " + ", ".join(str(v) for v in schema["enum"]))
    return shown


def _properties(shape: Mapping[str, Any]) -> list[dict[str, Any]]:
    required = set(shape.get("required") or [])
    rows = []
    for name, schema in (shape.get("properties") or {}).items():
        kind = str(schema.get("type"))
        items = schema.get("items") or {}
        rows.append(
            {
                "name": name,
                "type": f"array of {items.get('type')}" if kind == "array" else kind,
                "required": name in required,
                "constraints": _constraints(schema) + _constraints(items),
                "description": str(schema.get("description") or ""),
            }
        )
    return rows


def prompt_view(skill: Skill) -> dict[str, Any] | None:
    """What the skill page shows of a prompt-form skill: its prompt, tools, budget, and its
    declared inputs and output one property a row."""
    if not skill.prompt:
        return None
    body = skill.prompt
    return {
        "instructions": body.get("instructions", ""),
        "tools": list(body.get("tools") or []),
        "max_calls": body.get("max_calls"),
        "inputs": _properties(body.get("inputs") or {}),
        "output": _properties(body.get("output") or {}),
    }


def _skill_urls(skill: Skill) -> dict[str, str]:
    digest = skill.digest
    return {
        "detail_url": skill.get_absolute_url(),
        "checklist_url": reverse("experience:skill-checklist", args=[digest]),
        "review_url": reverse("experience:skill-review", args=[digest]),
        "revoke_url": reverse("experience:skill-revoke", args=[digest]),
    }


def _skill_context(
    request: HtmxHttpRequest,
    skill: Skill,
    *,
    reason: str = "",
    review_errors: Sequence[Condition] = (),
) -> dict[str, Any]:
    user = acting_user(request)
    now = clock.now()
    cases = skill_cases(skill)
    cited = [cited_case(case) for case in cases]
    availability = skill_availability(gate_fields(skill), cited, now)
    titles = {case.id: case.title for case in cases}
    return {
        "item": skill,
        "item_type": "skill",
        "skill": skill,
        "prompt": prompt_view(skill),
        "availability": availability_view(skill.status, availability, titles),
        "confidence": confidence_view(skill),
        "cases": [
            {
                "case": case,
                "url": item_url(case.id),
                "usable": case_usable(cited_case(case), now),
                "availability": availability_view(
                    case.status, case_availability(gate_fields(case), now)
                ),
                "same_scope": domain.same_scope(case.scope, skill.scope),
            }
            for case in cases
        ],
        "distinct_incidents": domain.distinct_incidents(cited, now),
        "checklist": _skill_checklist(skill, user, reason),
        "review_form": ReviewForm(initial={"reason": reason}),
        "reason": reason,
        "review_errors": review_errors,
        "runs": [{"run": run, "url": run.get_absolute_url()} for run in runs_of_skill(skill)],
        "impacts": impact_views(stored_impacts(skill.id)),
        "can_review": user.has_perm(REVIEW_CASE),
        "expired": skill.valid_to <= now,
        **_skill_urls(skill),
        **queue_context(request, skill.id),
    }


@require_GET
@console_view(VIEW_SKILL)
def skill_detail(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    skill = or_404(skill_get_visible(digest, acting_user(request)))
    return render_page(
        request,
        "experience/skill_detail.html",
        _skill_context(request, skill),
        partial="skill-main",
    )


@require_GET
@console_view(VIEW_SKILL)
def skill_checklist(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    skill = or_404(skill_get_visible(digest, acting_user(request)))
    if not request.htmx:
        return HttpResponseRedirect(skill.get_absolute_url())
    reason = request.GET.get("reason", "")[:MAX_REASON]
    return render_page(
        request,
        "experience/case_detail.html",
        {"checklist": _skill_checklist(skill, acting_user(request), reason), "item": skill},
        partial="approval-checklist",
    )


@require_POST
@console_view(VIEW_SKILL, REVIEW_CASE)
def skill_review(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    skill = or_404(skill_get_visible(digest, acting_user(request)))
    return review(request, skill, SKILL_REVIEW)


CASE_REVIEW = ReviewKind(
    "case", "experience/case_detail.html", case_approve, case_reject, _case_context
)
SKILL_REVIEW = ReviewKind(
    "skill", "experience/skill_detail.html", skill_approve, skill_reject, _skill_context
)


# --- revocation --------------------------------------------------------------------------------


def _ids(text: str) -> list[str]:
    return sorted(part for part in text.split(",") if part)


def _revoke(
    request: HtmxHttpRequest, item: Case | Skill, item_type: str, detail_url: str, revoke_url: str
) -> HttpResponse:
    """GET previews the impact; POST revokes, and the service recomputes and stores the impact."""
    errors: list[Condition] = []
    form = RevokeForm(request.POST or None)
    if request.method == "POST" and not form.is_valid():
        errors = [Condition(name, message, False) for name, message in form.problems()]
    elif request.method == "POST":
        user = acting_user(request)
        reason = form.cleaned_data["reason"]
        try:
            if isinstance(item, Case):
                outcome = case_revoke(case=item, actor=user, reason=reason)
            else:
                outcome = skill_revoke(skill=item, actor=user, reason=reason)
        except ReviewRefused as refused:
            errors = refusal(refused.unmet)
        except PermissionRefused as refused:
            errors = refusal([refused.unmet])
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


@require_http_methods(["GET", "POST"])
@console_view(VIEW_CASE, REVIEW_CASE)
def case_revoke_view(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    case = or_404(case_get_visible(digest, acting_user(request)))
    urls = _case_urls(case)
    return _revoke(request, case, "case", urls["detail_url"], urls["revoke_url"])


@require_http_methods(["GET", "POST"])
@console_view(VIEW_SKILL, REVIEW_CASE)
def skill_revoke_view(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    skill = or_404(skill_get_visible(digest, acting_user(request)))
    urls = _skill_urls(skill)
    return _revoke(request, skill, "skill", urls["detail_url"], urls["revoke_url"])
