"""Console pages: investigate a ticket, watch its steps arrive, read a stored investigation.

Whoever may read investigations (reviewers, operators, admins who audit) sees the list of
recent ones and their pages; reviewers and operators (the knowledge search permission) may also
investigate, and the memory tools are offered only to who may use experience. A ticket entered
here runs in the background with the scripted provider: the page polls the run (htmx, every
second, until it ends; without JavaScript a refresh link) and shows each step with the tool's
full result as it is stored, then the verified answer, each citation linked to its evidence:
the conclusion stated from the verified code and citations, the model's own words apart and
marked as unverified.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import pgettext
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import retarget

from investigations.forms import InvestigationForm
from investigations.models import Investigation
from investigations.selectors import (
    RECENT,
    investigation_get,
    investigation_request_get,
    investigation_requests_pending,
    investigations_for,
)
from investigations.services import investigation_request
from investigations.verification import cited_items
from reviewconsole import clock
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.itemrefs import ItemTitles, item_titles
from reviewconsole.permissions import SEARCH_KNOWLEDGE, VIEW_INVESTIGATION
from reviewconsole.roles import ROLE_PERMISSIONS, role_name
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404, render_page

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


def _field(name: str, form: InvestigationForm) -> str | None:
    name = name.removeprefix("scope.")
    return name if name in form.fields else None


def presented(investigation: Investigation, user: User | AnonymousUser) -> dict[str, Any]:
    """The stored run, with whether each citation's quote was checked, and the titles of every
    item cited or returned (one query per kind; ``{% source_ref %}`` links each to its page)."""
    answer = investigation.answer or {}
    refused = {
        detail.get("id")
        for detail in investigation.verification.get("details", [])
        if detail.get("id")
    }
    citations = [
        {**citation, "refused": citation["id"] in refused}
        for citation in answer.get("citations", [])
    ]
    steps = presented_steps(investigation.steps)
    return {
        "investigation": investigation,
        "citations": citations,
        # What the page states as the conclusion: the verified code and what it cites, never
        # the model's prose (verification.composed_conclusion says the same in the JSON).
        "cited_items": (
            cited_items(answer, investigation.steps) if investigation.verification.get("ok") else []
        ),
        # An answer stored before the conclusion was composed has the model's words there.
        "model_text": answer.get("model_text", answer.get("conclusion")),
        "steps": steps,
        "item_titles": _titles(citations, steps, user),
        "missing_labels": missing_labels(investigation.missing),
    }


def missing_labels(missing: list[str]) -> list[str]:
    """What a ticket left out, named as the form labels it (``deployment`` is *Release*)."""
    fields = InvestigationForm.base_fields
    return [str(fields[name].label) if name in fields else name for name in missing]


def presented_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps as a page shows them: the evidence a result returned, the arguments as
    ``name: value`` pairs and the full result as indented JSON (never Python's notation)."""
    return [
        {
            **step,
            "evidence": _evidence_of(step.get("result")),
            "argument_items": _argument_items(step.get("arguments")),
            "result_text": _json_text(step["result"], indent=2) if step.get("result") else "",
        }
        for step in steps
    ]


def _json_text(value: Any, *, indent: int | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=True, default=str)


def _argument_items(arguments: Any) -> list[tuple[str, str]]:
    """``(name, value)`` of a step's arguments, a text shown as it is and anything else as
    JSON; arguments that are not an object (a model's malformed call) as one unnamed value."""
    if isinstance(arguments, dict):
        return [
            (str(name), value if isinstance(value, str) else _json_text(value))
            for name, value in arguments.items()
        ]
    if arguments in (None, ""):
        return []
    return [("", arguments if isinstance(arguments, str) else _json_text(arguments))]


def _titles(
    citations: list[dict[str, Any]], steps: list[dict[str, Any]], user: User | AnonymousUser
) -> ItemTitles:
    mentioned = [c["id"] for c in citations]
    mentioned += [item["id"] for step in steps for item in step["evidence"]]
    return item_titles(mentioned, user)


def _evidence_of(result: Any) -> list[dict[str, Any]]:
    if not isinstance(result, dict):
        return []
    items = [*result.get("evidence", []), *result.get("items", [])]
    return [
        {
            "id": item.get("id"),
            "quote": item.get("quote") or item.get("title"),
        }
        for item in items
        if isinstance(item, dict) and item.get("id")
    ]


def investigating_roles() -> str:
    """The roles whose users may start an investigation (read them and search knowledge), named
    in the reader's language: what a user who may only read them is told."""
    names = [
        role_name(role)
        for role, granted in ROLE_PERMISSIONS.items()
        if SEARCH_KNOWLEDGE in granted and VIEW_INVESTIGATION in granted
    ]
    return pgettext("list separator", ", ").join(names)


def _lists(user: User | AnonymousUser) -> dict[str, Any]:
    return {
        "recent": investigations_for(user)[:RECENT],
        "pending": investigation_requests_pending(user)[:RECENT],
    }


def _form_page(
    request: HtmxHttpRequest, form: InvestigationForm | None, *, status: int = 200
) -> HttpResponse:
    return render_page(
        request,
        "investigations/investigation_form.html",
        {"form": form, "investigating_roles": investigating_roles(), **_lists(request.user)},
        partial="investigation-form" if status != 200 else None,
        status=status,
    )


def _with_lists(request: HtmxHttpRequest, response: HttpResponse) -> HttpResponse:
    """``response`` with the page's lists of runs swapped in again out of band, when the page it
    answers is the form page (where a run started and finished shows without a reload)."""
    page = request.htmx.current_url_abs_path if request.htmx else None
    if page is None or page.split("?")[0] != reverse("investigations:investigation-new"):
        return response
    lists = render_to_string(
        "investigations/investigation_form.html#investigation-lists",
        {**_lists(request.user), "oob": True},
        request=request,
    )
    response.content = response.content + lists.encode()
    return response


@require_http_methods(["GET", "POST"])
@console_view(VIEW_INVESTIGATION)
def investigation_new(request: HtmxHttpRequest) -> HttpResponse:
    may_investigate = request.user.has_perm(SEARCH_KNOWLEDGE)
    if request.method == "POST":
        if not may_investigate:
            raise PermissionDenied
        form = InvestigationForm(request.POST)
        if form.is_valid():
            try:
                queued = investigation_request(
                    actor=request.user,  # type: ignore[arg-type]
                    **form.investigation_arguments(),
                )
            except (ValidationFailure, PermissionRefused) as failure:
                field = (
                    _field(failure.field, form)
                    if isinstance(failure, ValidationFailure)
                    else "tenant"
                )
                form.add_error(field, failure.message)
            else:
                if request.htmx:
                    return _with_lists(request, _request_result(request, queued.pk, started=True))
                return finish(request, queued.get_absolute_url())
        response = _form_page(request, form, status=422)
        # The form posts into the result area; a refused form replaces the form instead.
        return retarget(response, "#investigation-form") if request.htmx else response
    blank = (
        InvestigationForm(initial=InvestigationForm.initial_values(clock.now(), request.user))
        if may_investigate
        else None
    )
    return _form_page(request, blank)


def _request_result(request: HtmxHttpRequest, pk: int, *, started: bool = False) -> HttpResponse:
    """The run so far (polling itself while it goes on), or, once stored, the investigation.

    ``started``: the answer to the form that started it, which takes the focus (and so scrolls
    the run's progress into view, below the form); a poll leaves the focus alone."""
    queued = or_404(investigation_request_get(pk, request.user))
    if queued.investigation is not None:
        response = render_page(
            request,
            "investigations/investigation_detail.html",
            {**presented(queued.investigation, request.user), "started": started},
            partial="investigation-result",
        )
        return response if started else _with_lists(request, response)
    steps = presented_steps(queued.steps)
    return render_page(
        request,
        "investigations/request_detail.html",
        {
            "run": queued,
            "steps": steps,
            "item_titles": _titles([], steps, request.user),
            "started": started,
        },
        partial="investigation-result",
    )


@require_GET
@console_view(VIEW_INVESTIGATION)
def request_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """A ticket's run as it happens; a full page load after it ends goes to the investigation."""
    if not request.htmx:
        queued = or_404(investigation_request_get(pk, request.user))
        if queued.investigation is not None:
            return HttpResponseRedirect(queued.investigation.get_absolute_url())
    return _request_result(request, pk)


@require_GET
@console_view(VIEW_INVESTIGATION)
def investigation_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    investigation = or_404(investigation_get(pk, request.user))
    return render_page(
        request,
        "investigations/investigation_detail.html",
        presented(investigation, request.user),
        partial="investigation-result",
    )
