"""Run pages: the runs list, a run's trace, and marking a run followed up after a revocation.

Every item a run mentions (its skill, the memory it read, cited cases, evidence sources) shows as
a name (``{% item_ref %}``), the titles primed here in one query per kind; a run that read memory
revoked since is flagged until a reviewer marks it followed up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST

from experience.pages.forms import RunFilterForm
from experience.pages.selectors import (
    references_visible_to,
    run_traces,
    run_visible,
    runs_visible,
    skill_runs_by_id,
)
from experience.pages.sentences import run_reason
from experience.runs.followups import (
    FOLLOW_UP_DONE,
    FOLLOW_UP_PENDING,
    follow_up_get,
    follow_ups_of,
    follow_ups_visible,
    run_follow_up,
)
from experience.runs.models import Run
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.itemrefs import item_titles
from reviewconsole.links import item_url
from reviewconsole.permissions import REVIEW_CASE, VIEW_CASE, VIEW_RUN
from reviewconsole.tenancy import tenants_of
from reviewconsole.views import HtmxHttpRequest, console_view, finish, paginate, render_page

RUNS_PER_PAGE = 50


def _run_mentions(run: Run) -> Iterable[str]:
    yield run.skill_id
    yield from run.cases
    for observation in run.observations:
        for item in observation.get("evidence") or []:
            yield str(item.get("id") or "")


@require_GET
@console_view(VIEW_RUN, VIEW_CASE)
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    """Skill runs, newest first; filtered on a follow-up state, every flagged run id instead (a
    recall or context block reached by a revocation too), the list the dashboard's card counts."""
    form = RunFilterForm(request.GET or None)
    filters: dict[str, str] = {}
    follow_up = ""
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        filters = {
            "status": data["status"],
            "skill_id": data["skill"].strip(),
            "run_id": data["run_id"].strip(),
        }
        follow_up = data.get("follow_up") or ""
    if follow_up in (FOLLOW_UP_PENDING, FOLLOW_UP_DONE):
        return _follow_up_list(request, form, follow_up, filters)
    runs = runs_visible(request.user, **filters)
    page = paginate(request, runs, RUNS_PER_PAGE)
    shown: list[Run] = list(page.object_list)
    follow_ups = follow_ups_of(run.run_id for run in shown)
    return render_page(
        request,
        "experience/run_list.html",
        {
            "form": form,
            "page_obj": page,
            "runs": [
                {
                    "run": run,
                    "url": run.get_absolute_url(),
                    "follow_up": follow_ups.get(run.run_id),
                    "reason": run_reason(run.reason),
                }
                for run in shown
            ],
            "item_titles": item_titles((run.skill_id for run in shown), request.user),
        },
        partial="run-results",
    )


def _follow_up_list(
    request: HtmxHttpRequest, form: RunFilterForm, state: str, filters: dict[str, str]
) -> HttpResponse:
    page = paginate(request, follow_ups_visible(request.user, state, **filters), RUNS_PER_PAGE)
    shown = list(page.object_list)
    skill_runs = skill_runs_by_id((row.run_id for row in shown), request.user)
    mentions = [item for row in shown for item in row.revoked_items]
    mentions += [run.skill_id for runs in skill_runs.values() for run in runs]
    return render_page(
        request,
        "experience/run_list.html",
        {
            "form": form,
            "page_obj": page,
            "follow_up_state": state,
            "flagged": [
                {
                    "follow_up": row,
                    "url": reverse("experience:run-detail", args=[row.run_id]),
                    "skill_runs": skill_runs.get(row.run_id, []),
                }
                for row in shown
            ],
            "item_titles": item_titles(mentions, request.user),
        },
        partial="run-results",
    )


def _instant(value: object) -> datetime | None:
    """A context time stored as ISO text, as a datetime the page shows in the console's zone."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _observations(observations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **observation,
            "evidence": [
                {**item, "url": item_url(str(item.get("id") or ""))}
                for item in observation.get("evidence") or []
            ],
        }
        for observation in observations
    ]


def _prompt_run(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A prompt-form skill's run as its trace shows it: provider, the answer (the console's
    composed conclusion, the model's own words apart), the verification and the output."""
    if not record:
        return None
    answer = record.get("answer") or {}
    output = record.get("output")
    verified = bool((record.get("verification") or {}).get("ok"))
    return {
        "provider": record.get("provider") or "",
        "inputs": record.get("inputs") or {},
        "conclusion_code": answer.get("conclusion_code") or "" if verified else "",
        "cited": [
            str(c.get("id")) for c in answer.get("citations") or [] if verified and c.get("id")
        ],
        "model_text": answer.get("model_text") or "",
        "verification": record.get("verification") or {},
        "output": json.dumps(output, ensure_ascii=False, indent=1) if output is not None else "",
    }


@require_GET
@console_view(VIEW_RUN, VIEW_CASE)
def run_detail(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    runs = run_traces(run_id, request.user)
    references = references_visible_to(run_id, tenants_of(request.user))
    if not run_visible(run_id, request.user, runs, references):
        raise Http404
    citations = {run.pk: [c.document_id for c in run.citations.all()] for run in runs}
    mentions = [ref.item_id for ref in references]
    for run in runs:
        mentions.extend(_run_mentions(run))
        mentions.extend((_prompt_run(run.prompt) or {}).get("cited") or [])
        mentions.extend(citations[run.pk])
    follow_up = follow_up_get(run_id)
    if follow_up is not None:
        mentions.extend(follow_up.revoked_items)
    return render_page(
        request,
        "experience/run_detail.html",
        {
            "run_id": run_id,
            "runs": [
                {
                    "run": run,
                    "reason": run_reason(run.reason),
                    "occurred_at": _instant((run.context or {}).get("occurred_at")),
                    "known_at": _instant((run.context or {}).get("known_at")),
                    "observations": _observations(run.observations),
                    "citations": citations[run.pk],
                    "prompt": _prompt_run(run.prompt),
                }
                for run in runs
            ],
            "references": references,
            "follow_up": follow_up,
            "can_follow_up": request.user.has_perm(REVIEW_CASE),
            "item_titles": item_titles(mentions, request.user),
        },
        partial="run-main",
    )


@require_POST
@console_view(VIEW_RUN, REVIEW_CASE)
def run_follow_up_mark(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    runs = run_traces(run_id, request.user)
    references = references_visible_to(run_id, tenants_of(request.user))
    if not run_visible(run_id, request.user, runs, references):
        raise Http404
    try:
        run_follow_up(
            run_id=run_id, actor=acting_user(request), reason=request.POST.get("reason", "")
        )
    except ValidationFailure as failure:
        messages.error(request, f"{failure.field}: {failure.message}")
    except PermissionRefused as refusal:
        messages.error(request, refusal.message)
    else:
        messages.success(request, gettext("Run %(run)s marked followed up.") % {"run": run_id})
    return finish(request, reverse("experience:run-detail", args=[run_id]))
