"""Skill proposals and support counted in incidents: the queue, a proposal, adopting or
dismissing it, and a skill's support."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST

from curation import proposals
from curation.forms import ProposalAdoptForm, ProposalFilterForm, ReasonForm
from curation.models import ProposalStatus
from curation.selectors.proposals import (
    proposal_get_visible,
    proposal_queue,
    proposal_still_proven,
    proposal_support,
)
from curation.selectors.proposals import skill_support as skill_support_of
from curation.views import PER_PAGE
from experience.pages.selectors import skill_get_visible
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.links import item_url
from reviewconsole.permissions import ADD_SKILL, VIEW_CASE, VIEW_SKILL
from reviewconsole.permissions import REVIEW_CASE as REVIEW
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404, paginate, render_page

# --- proposals and support ----------------------------------------------------------------------


@require_GET
@console_view(VIEW_CASE, VIEW_SKILL)
def proposal_list(request: HtmxHttpRequest) -> HttpResponse:
    data = request.GET.copy()
    data.setdefault("status", ProposalStatus.OPEN)
    form = ProposalFilterForm(data)
    status = form.cleaned_data["status"] if form.is_valid() else ProposalStatus.OPEN
    page = paginate(request, proposal_queue(request.user, status=status), PER_PAGE)
    rows = [{"proposal": p, "url": p.get_absolute_url()} for p in page.object_list]
    return render_page(
        request,
        "curation/proposal_list.html",
        {"form": form, "page_obj": page, "rows": rows},
        partial="proposal-results",
    )


def _proposal_context(request: HtmxHttpRequest, pk: int, **extra: Any) -> dict[str, Any]:
    proposal = or_404(proposal_get_visible(pk, request.user))
    backing = proposal_support(proposal)
    queries = [str(step["arguments"]["query"]) for step in proposal.recipe]
    context = {
        "proposal": proposal,
        "cases": [
            {"case": c, "url": c.get_absolute_url(), "usable": c.id in backing.usable}
            for c in backing.cases
        ],
        "support": backing.support,
        "enough_support": backing.enough,
        "minimum_support": backing.minimum,
        # A proposal drafted from a success pattern also needs the pattern still proven.
        "still_proven": proposal_still_proven(proposal, clock.now()),
        "adopt_form": ProposalAdoptForm(
            initial={
                "title": proposal.title,
                "when": proposal.when,
                **{f"query_{n}": q for n, q in enumerate(queries, start=1)},
            }
        ),
        "dismiss_form": ReasonForm(),
        "skill_url": item_url(proposal.skill_id) if proposal.skill_id else "",
        "can_adopt": request.user.has_perm(ADD_SKILL),
        "can_review": request.user.has_perm(REVIEW),
        "adopt_url": reverse("curation:proposal-adopt", args=[pk]),
        "dismiss_url": reverse("curation:proposal-dismiss", args=[pk]),
    }
    context.update(extra)
    return context


@require_GET
@console_view(VIEW_CASE, VIEW_SKILL)
def proposal_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return render_page(request, "curation/proposal_detail.html", _proposal_context(request, pk))


@require_POST
@console_view(VIEW_SKILL, ADD_SKILL)
def proposal_adopt(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    proposal = or_404(proposal_get_visible(pk, request.user))
    form = ProposalAdoptForm(request.POST)
    if form.is_valid():
        try:
            skill = proposals.proposal_adopt(
                proposal=proposal,
                actor=acting_user(request),
                title=form.cleaned_data["title"],
                when=form.cleaned_data["when"],
                queries=form.queries(),
            )
        except ValidationFailure as failure:
            form.add_error(None, str(failure))
        else:
            messages.success(
                request, gettext("Submitted as a candidate skill. Another reviewer approves it.")
            )
            return finish(request, skill.get_absolute_url())
    return render_page(
        request,
        "curation/proposal_detail.html",
        _proposal_context(request, pk, adopt_form=form),
        status=422,
    )


@require_POST
@console_view(VIEW_SKILL, REVIEW)
def proposal_dismiss(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    proposal = or_404(proposal_get_visible(pk, request.user))
    form = ReasonForm(request.POST)
    if form.is_valid():
        try:
            proposals.proposal_dismiss(
                proposal=proposal, actor=acting_user(request), reason=form.cleaned_data["reason"]
            )
        except ValidationFailure as failure:
            form.add_error(None, str(failure))
        else:
            messages.success(request, gettext("Proposal dismissed."))
            return finish(request, reverse("curation:proposal-list"))
    return render_page(
        request,
        "curation/proposal_detail.html",
        _proposal_context(request, pk, dismiss_form=form),
        status=422,
    )


@require_GET
@console_view(VIEW_SKILL, VIEW_CASE)
def skill_support(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    """A skill's support counted in distinct incidents; ``#support-panel`` is the fragment."""
    skill = or_404(skill_get_visible(digest, request.user))
    cases, support = skill_support_of(skill, request.user)
    return render_page(
        request,
        "curation/skill_support.html",
        {
            "skill": skill,
            "skill_url": skill.get_absolute_url(),
            "support_url": reverse("curation:skill-support", args=[digest]),
            "cases": [{"case": c, "url": c.get_absolute_url()} for c in cases],
            "support": support,
        },
        partial="support-panel",
    )
