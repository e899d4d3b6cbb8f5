"""Thread pages: importing a thread, and building a candidate case from its messages."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from curation import threads
from curation.domain.threads import (
    MACHINE_ROLES,
    THREAD_SCOPE_FIELDS,
    candidate_case,
    require_thread_tenant,
)
from curation.forms import CandidateForm, ThreadImportForm, excerpt_field, use_field
from curation.models import Thread
from curation.selectors.threads import (
    cases_citing_thread,
    thread_first_sent_at,
    thread_messages,
    thread_units,
    threads_named,
)
from curation.selectors.threads import thread_list as threads_visible
from curation.views import PER_PAGE
from experience.cases.models import Case
from experience.cases.schema import parse_case
from experience.pages.scope_options import scope_values
from reviewconsole import inputs
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.formfields import offer_values
from reviewconsole.identity import acting_user
from reviewconsole.permissions import ADD_CASE, VIEW_CASE
from reviewconsole.views import (
    HtmxHttpRequest,
    console_view,
    finish,
    one_or_tenant_choice,
    paginate,
    render_page,
)

MAX_THREAD_FILE = 5 * 1024 * 1024


# --- threads -----------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@console_view(VIEW_CASE, ADD_CASE)
def thread_list(request: HtmxHttpRequest) -> HttpResponse:
    """The imported threads; a POST imports one more (a JSON file)."""
    if request.method == "POST":
        return _thread_import(request)
    page = paginate(request, threads_visible(request.user), PER_PAGE)
    return render_page(
        request,
        "curation/thread_list.html",
        {"page_obj": page, "threads": page.object_list, "import_form": ThreadImportForm()},
        partial="thread-results",
    )


def _thread_import(request: HtmxHttpRequest) -> HttpResponse:
    form = ThreadImportForm(request.POST, request.FILES)
    error = ""
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            if upload.size > MAX_THREAD_FILE:
                raise ValidationFailure("file", gettext("is larger than 5 MB"))
            data = inputs.load_json(upload.read(), field="file")
            thread, created = threads.thread_import(data=data, actor=acting_user(request))
        except ValidationFailure as failure:
            error = str(failure)
        else:
            if created:
                messages.success(request, gettext("Thread imported."))
            else:
                messages.info(
                    request, gettext("This thread was already imported; nothing changed.")
                )
            return finish(request, thread.get_absolute_url())
    else:
        error = gettext("Choose a JSON file to import.")
    page = paginate(request, threads_visible(request.user), PER_PAGE)
    return render_page(
        request,
        "curation/thread_list.html",
        {"page_obj": page, "threads": page.object_list, "import_form": form, "import_error": error},
        status=422,
    )


def _message_rows(thread: Thread, form: CandidateForm) -> list[dict[str, Any]]:
    """Each message with its pickable units (its text, then each attachment) and their fields."""
    rows = []
    for message in thread_messages(thread):
        units: list[dict[str, Any]] = []
        if message.text:
            units.append({"key": message.message_id, "label": "", "text": message.text})
        for n, attachment in enumerate(message.attachments, start=1):
            units.append(
                {
                    "key": f"{message.message_id}/attachment-{n}",
                    "label": attachment["name"],
                    "text": attachment["text"],
                }
            )
        for unit in units:
            unit["use"] = form[use_field(unit["key"])]
            unit["excerpt"] = form[excerpt_field(unit["key"])]
            unit["anchor"] = "unit-" + unit["key"].replace("/", "-").replace(".", "-")
        rows.append(
            {
                "message": message,
                "machine": message.role in MACHINE_ROLES,
                "units": units,
            }
        )
    return rows


def _thread_context(
    request: HtmxHttpRequest,
    thread: Thread,
    form: CandidateForm,
    *,
    preview: dict[str, Any] | None = None,
    built: list[Case] | None = None,
) -> dict[str, Any]:
    offer_values(form, lambda: scope_values(request.user))
    return {
        "thread": thread,
        "form": form,
        "rows": _message_rows(thread, form),
        "preview": preview,
        "built": [
            {"case": c, "url": c.get_absolute_url()}
            for c in (built if built is not None else cases_citing_thread(thread, request.user))
        ],
        "build_url": reverse(
            "curation:tenant-thread-build", args=[thread.tenant, thread.thread_id]
        ),
        "preview_url": reverse(
            "curation:tenant-thread-preview", args=[thread.tenant, thread.thread_id]
        ),
    }


def _thread(request: HtmxHttpRequest, thread_id: str, tenant: str | None) -> Thread | HttpResponse:
    """The thread the URL names among the tenants the user sees; a tenant choice when a
    deployment-wide user sees that id in several (thread ids are per tenant)."""
    named = threads_named(thread_id, request.user, tenant)
    return one_or_tenant_choice(request, f"thread:{thread_id}", named)


@require_GET
@console_view(VIEW_CASE, ADD_CASE)
def thread_detail(
    request: HtmxHttpRequest, thread_id: str, tenant: str | None = None
) -> HttpResponse:
    thread = _thread(request, thread_id, tenant)
    if isinstance(thread, HttpResponse):
        return thread
    first = thread_first_sent_at(thread)
    # The tenant is the thread's, not a conclusion: a candidate built from it has no other.
    initial: dict[str, Any] = {"tenant": thread.tenant, "valid_from": first}
    # The rest of the scope as the thread gave it, else as a candidate built from it has it:
    # where the thread happened, which the operator confirms (never a conclusion).
    built = list(cases_citing_thread(thread, request.user))
    for name in THREAD_SCOPE_FIELDS:
        value = thread.scope.get(name) or (getattr(built[0], name) if built else "")
        if value:
            initial[name] = value
    form = CandidateForm(initial=initial, units=thread_units(thread))
    return render_page(
        request, "curation/thread_detail.html", _thread_context(request, thread, form, built=built)
    )


def _assemble(thread: Thread, form: CandidateForm) -> dict[str, Any] | None:
    """The case the form would submit, for the preview; None when the form is refused."""
    try:
        draft = form.draft()
        require_thread_tenant(thread.tenant, draft.scope)
        data = candidate_case(form.units, form.picks(), draft)
        parse_case(data)
    except ValidationFailure as failure:
        form.add_failure(failure)
        return None
    return data


@require_POST
@console_view(VIEW_CASE, ADD_CASE)
def thread_preview(
    request: HtmxHttpRequest, thread_id: str, tenant: str | None = None
) -> HttpResponse:
    """What the picks would submit, section by section; nothing is stored."""
    thread = _thread(request, thread_id, tenant)
    if isinstance(thread, HttpResponse):
        return thread
    form = CandidateForm(request.POST, units=thread_units(thread))
    preview = _assemble(thread, form) if form.is_valid() else None
    context = _thread_context(request, thread, form, preview=preview)
    status = 200 if preview is not None else 422
    if request.htmx:
        return render_page(
            request,
            "curation/thread_detail.html",
            context,
            partial="candidate-preview",
            status=status,
        )
    return render_page(request, "curation/thread_detail.html", context, status=status)


@require_POST
@console_view(VIEW_CASE, ADD_CASE)
def thread_build(
    request: HtmxHttpRequest, thread_id: str, tenant: str | None = None
) -> HttpResponse:
    thread = _thread(request, thread_id, tenant)
    if isinstance(thread, HttpResponse):
        return thread
    form = CandidateForm(request.POST, units=thread_units(thread))
    if form.is_valid():
        try:
            case, created = threads.candidate_build(
                thread=thread, picks=form.picks(), draft=form.draft(), actor=acting_user(request)
            )
        except ValidationFailure as failure:
            form.add_failure(failure)
        except PermissionRefused as refused:
            form.add_error(None, refused.message)
        else:
            if created:
                messages.success(
                    request,
                    gettext(
                        "Candidate submitted to the review queue. Another reviewer checks and approves it."
                    ),
                )
            else:
                messages.info(
                    request, gettext("A candidate with exactly this content already exists.")
                )
            return finish(request, case.get_absolute_url())
    return render_page(
        request, "curation/thread_detail.html", _thread_context(request, thread, form), status=422
    )
