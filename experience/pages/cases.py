"""The case page: its sections with their evidence and checks, versions, the incident's other
cases, the skills citing it, and marking evidence checked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from experience.cases.models import Case, Evidence, EvidenceCheck
from experience.cases.selectors import case_approval_checklist, case_evidence, gate_fields
from experience.cases.services import evidence_check
from experience.core import domain
from experience.core.availability import case_availability
from experience.core.models import Status
from experience.lessons.selectors import item_confidences
from experience.pages.availability import availability_view, availability_views
from experience.pages.checklists import CASE_CONDITIONS
from experience.pages.forms import EvidenceCheckForm
from experience.pages.items import ItemPage, item_views
from experience.pages.selectors import (
    case_for_page,
    case_get_visible,
    case_lines,
    case_version_chain,
    same_incident_cases,
    skills_citing_case,
)
from experience.review.changes import case_changes_request, case_resubmit
from experience.review.decisions import case_approve, case_reject
from experience.review.revocation import case_revoke
from reviewconsole import accounts, clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.itemrefs import item_titles
from reviewconsole.links import item_url
from reviewconsole.permissions import VERIFY_EVIDENCE, VIEW_CASE
from reviewconsole.views import Condition, HtmxHttpRequest, console_view, diff_lines, or_404


@dataclass
class EvidenceView:
    evidence: Evidence
    checks: list[EvidenceCheck]
    checked_by_me: bool
    # The ids of the checks that count toward approval (domain.check_counts: not the submitter's).
    counting: frozenset[int]
    # The review threads anchored to it (experience.pages.conversations.ThreadView).
    threads: list[Any] = field(default_factory=list)

    @property
    def counts(self) -> bool:
        return bool(self.counting)

    @property
    def anchor(self) -> str:
        return "ev-" + self.evidence.key.replace("/", "-")


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


def _confidence(case: Case) -> Any:
    """The computed confidence of the case, with its inputs (as the lesson page shows)."""
    return item_confidences([case.id], [], clock.now()).get(case.id)


def _check_url(case: Case) -> str:
    return reverse("experience:case-check", args=[case.digest])


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
    panel = CASE_PAGE.panel(
        request, case, reason=reason, review_errors=review_errors, evidence_keys=list(evidence)
    )
    for key, view in evidence.items():
        view.threads = panel["threads_by_anchor"].get(f"evidence:{key}", [])
    return {
        **panel,
        "case": case,
        "availability": availability_view(case.status, case_availability(gate_fields(case), now)),
        "confidence": _confidence(case),
        "sections": _sections(case, evidence),
        "evidence_count": len(evidence),
        # Evidence that cites another item is named by its title (one query per kind cited).
        "item_titles": item_titles((ev.evidence.source_id for ev in evidence.values()), user),
        "versions": [{"case": c, "url": item_url(c.id)} for c in chain] if len(chain) > 1 else [],
        "superseded": superseded,
        "diff": diff,
        "same_incident": [{"case": c, "url": item_url(c.id)} for c in same_incident_cases(case)],
        "cited_by": [
            {"skill": s, "url": item_url(s.id), "availability": citing_states[s.id]} for s in citing
        ],
        "can_verify": user.has_perm(VERIFY_EVIDENCE) and case.status == Status.CANDIDATE,
        "check_url": _check_url(case),
    }


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
            "check_url": _check_url(case),
            "swapped": True,
        },
        request=request,
    )
    # The checklist elsewhere on the page changes too: swap it out of band.
    checklist_html = render_to_string(
        "experience/case_detail.html#approval-checklist",
        {"checklist": CASE_PAGE.checklist(case, user, ""), "item": case, "oob": True},
        request=request,
    )
    return HttpResponse(item_html + checklist_html)


CASE_PAGE = ItemPage(
    kind="case",
    view_permission=VIEW_CASE,
    get_visible=case_get_visible,
    template="experience/case_detail.html",
    main_partial="case-main",
    context=_case_context,
    unmet=case_approval_checklist,
    universe=lambda case: CASE_CONDITIONS,
    approve=case_approve,
    reject=case_reject,
    revoke=case_revoke,
    decided=_("The case “%(title)s” is now %(status)s."),
    request_changes=case_changes_request,
    resubmit=case_resubmit,
)
CASE_VIEWS = item_views(CASE_PAGE)
