"""Intake and curation pages: threads into candidates, near-duplicates and incidents, the
re-review queue, skill proposals and support counted in incidents.

Views parse input, call one service or selector, and render; rules live in ``curation.domain``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from curation import domain, incidents, proposals, rereview, scan, selectors, threads
from curation.forms import (
    CandidateForm,
    IncidentMergeForm,
    LinkFilterForm,
    LinkResolveForm,
    ProposalAdoptForm,
    ProposalFilterForm,
    ReasonForm,
    RecertifyForm,
    ReReviewFilterForm,
    ThreadImportForm,
    excerpt_field,
    use_field,
)
from curation.models import ProposalStatus, ReReview, ReReviewReason, ReReviewStatus, Thread
from experience.cases.models import Case
from experience.cases.schema import parse_case
from experience.core.models import Status
from experience.pages.scope_options import scope_values
from experience.pages.selectors import case_for_page, case_get_visible, skill_get_visible
from experience.pages.sentences import outdated_cause_sentence
from reviewconsole import clock, inputs, itemids
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.formfields import offer_values
from reviewconsole.identity import acting_user
from reviewconsole.links import item_url
from reviewconsole.permissions import ADD_CASE, ADD_SKILL, VIEW_CASE, VIEW_SKILL
from reviewconsole.permissions import REVIEW_CASE as REVIEW
from reviewconsole.tenancy import NOT_IN_TENANT
from reviewconsole.views import (
    HtmxHttpRequest,
    console_view,
    finish,
    one_or_tenant_choice,
    or_404,
    paginate,
    refusal_as_403,
    render_page,
)

PER_PAGE = 25
MAX_THREAD_FILE = 5 * 1024 * 1024


def similar_url(case_id: str) -> str:
    return reverse("curation:case-similar", args=[itemids.digest_of(case_id)])


def _safe_next(request: HtmxHttpRequest, candidate: str, fallback: str) -> str:
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return fallback


# --- home --------------------------------------------------------------------------------------


@require_GET
@console_view(VIEW_CASE)
def home(request: HtmxHttpRequest) -> HttpResponse:
    return render_page(
        request, "curation/curation_home.html", {"counts": selectors.queue_counts(request.user)}
    )


# --- threads -----------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@console_view(VIEW_CASE, ADD_CASE)
def thread_list(request: HtmxHttpRequest) -> HttpResponse:
    """The imported threads; a POST imports one more (a JSON file)."""
    if request.method == "POST":
        return _thread_import(request)
    page = paginate(request, selectors.thread_list(request.user), PER_PAGE)
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
    page = paginate(request, selectors.thread_list(request.user), PER_PAGE)
    return render_page(
        request,
        "curation/thread_list.html",
        {"page_obj": page, "threads": page.object_list, "import_form": form, "import_error": error},
        status=422,
    )


def _message_rows(thread: Thread, form: CandidateForm) -> list[dict[str, Any]]:
    """Each message with its pickable units (its text, then each attachment) and their fields."""
    rows = []
    for message in selectors.thread_messages(thread):
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
                "machine": message.role in domain.MACHINE_ROLES,
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
            for c in (
                built if built is not None else selectors.cases_citing_thread(thread, request.user)
            )
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
    named = selectors.threads_named(thread_id, request.user, tenant)
    return one_or_tenant_choice(request, f"thread:{thread_id}", named)


@require_GET
@console_view(VIEW_CASE, ADD_CASE)
def thread_detail(
    request: HtmxHttpRequest, thread_id: str, tenant: str | None = None
) -> HttpResponse:
    thread = _thread(request, thread_id, tenant)
    if isinstance(thread, HttpResponse):
        return thread
    first = selectors.thread_first_sent_at(thread)
    # The tenant is the thread's, not a conclusion: a candidate built from it has no other.
    initial: dict[str, Any] = {"tenant": thread.tenant, "valid_from": first}
    # The rest of the scope as the thread gave it, else as a candidate built from it has it:
    # where the thread happened, which the operator confirms (never a conclusion).
    built = list(selectors.cases_citing_thread(thread, request.user))
    for name in domain.THREAD_SCOPE_FIELDS:
        value = thread.scope.get(name) or (getattr(built[0], name) if built else "")
        if value:
            initial[name] = value
    form = CandidateForm(initial=initial, units=selectors.thread_units(thread))
    return render_page(
        request, "curation/thread_detail.html", _thread_context(request, thread, form, built=built)
    )


def _assemble(thread: Thread, form: CandidateForm) -> dict[str, Any] | None:
    """The case the form would submit, for the preview; None when the form is refused."""
    try:
        draft = form.draft()
        domain.require_thread_tenant(thread.tenant, draft.scope)
        data = domain.candidate_case(form.units, form.picks(), draft)
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
    form = CandidateForm(request.POST, units=selectors.thread_units(thread))
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
    form = CandidateForm(request.POST, units=selectors.thread_units(thread))
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


# --- near-duplicates and incidents ------------------------------------------------------------


def _similar_context(request: HtmxHttpRequest, case: Case) -> dict[str, Any]:
    merges = selectors.incident_merges(case.tenant, case.brand)
    group = selectors.incident_group(case, merges)
    similar = selectors.similar_cases(case, merges)
    # Embedded in another page (a case page loading the panel), decisions return to that page.
    embedding = request.htmx.current_url_abs_path if request.htmx else None
    return {
        "case": case,
        "case_url": case.get_absolute_url(),
        "similar_url": similar_url(case.id),
        "back_url": embedding or similar_url(case.id),
        "similar": [
            {
                "entry": entry,
                "url": entry.other.get_absolute_url(),
                "similar_url": similar_url(entry.other.id),
                "resolve_url": reverse("curation:link-resolve", args=[entry.link.pk]),
                "compare_url": reverse("curation:link-compare", args=[entry.link.pk]),
                "percent": round(entry.link.similarity * 100),
            }
            for entry in similar
        ],
        "open_count": sum(1 for e in similar if e.link.status == "open"),
        "group": group,
        "group_cases": [{"case": c, "url": c.get_absolute_url()} for c in group.cases],
        "support": selectors.incident_support(
            group.cases, merges={selectors.merge_scope_of(case): merges}
        ),
        "can_review": request.user.has_perm(REVIEW),
    }


@require_GET
@console_view(VIEW_CASE)
def case_similar(request: HtmxHttpRequest, digest: str) -> HttpResponse:
    """Cases possibly describing the same incident; ``#similar-panel`` is a fragment a case page
    can load with ``hx-get`` (its link is the fallback)."""
    case = or_404(case_get_visible(digest, request.user))
    return render_page(
        request,
        "curation/case_similar.html",
        _similar_context(request, case),
        partial="similar-panel",
    )


@require_GET
@console_view(VIEW_CASE)
def link_list(request: HtmxHttpRequest) -> HttpResponse:
    data = request.GET.copy()
    data.setdefault("status", "open")
    form = LinkFilterForm(data)
    status = form.cleaned_data["status"] if form.is_valid() else "open"
    page = paginate(request, selectors.near_duplicate_queue(request.user, status=status), PER_PAGE)
    rows = [
        {
            "link": link,
            "a_url": item_url(link.case_a_id),
            "b_url": item_url(link.case_b_id),
            "similar_url": similar_url(link.case_a_id),
            "compare_url": reverse("curation:link-compare", args=[link.pk]),
            "percent": round(link.similarity * 100),
        }
        for link in page.object_list
    ]
    return render_page(
        request,
        "curation/nearduplicate_list.html",
        {"form": form, "page_obj": page, "rows": rows},
        partial="link-results",
    )


# The rows of a comparison, as the page names them.
COMPARED_LABELS = {
    "observations": _("Observations"),
    "diagnosis": _("Diagnosis"),
    "counterevidence": _("Counterevidence"),
    "outcome": _("Outcome"),
}


@require_GET
@console_view(VIEW_CASE)
def link_compare(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Two similar cases side by side, section by section, differences marked, with the
    decision beside them: one incident or two, and the candidate's own review."""
    comparison = or_404(selectors.near_duplicate_comparison(pk, request.user))
    link = comparison.link
    candidate = comparison.left if comparison.left.status == Status.CANDIDATE else None
    return render_page(
        request,
        "curation/link_compare.html",
        {
            "link": link,
            "left": comparison.left,
            "right": comparison.right,
            "rows": [
                {"row": row, "label": COMPARED_LABELS[row.section]} for row in comparison.rows
            ],
            "differences": sum(1 for row in comparison.rows if row.differs),
            "percent": round(link.similarity * 100),
            "compare_url": reverse("curation:link-compare", args=[link.pk]),
            "resolve_url": reverse("curation:link-resolve", args=[link.pk]),
            "can_review": request.user.has_perm(REVIEW),
            "candidate": candidate,
            "left_role": _("Candidate") if candidate else _("Newer case"),
            "right_role": _("Approved case it resembles") if candidate else _("Older case"),
        },
        partial="compare-main",
    )


@require_POST
@console_view(VIEW_CASE, REVIEW)
def link_resolve(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    link = or_404(selectors.near_duplicate_get_visible(pk, request.user))
    form = LinkResolveForm(request.POST)
    fallback = similar_url(link.case_a_id)
    target = _safe_next(request, str(request.POST.get("next", "")), fallback)
    if not form.is_valid():
        messages.error(request, gettext("Choose a decision and give a reason."))
        return finish(request, target)
    try:
        incidents.near_duplicate_resolve(
            link=link,
            decision=form.cleaned_data["decision"],
            canonical=form.cleaned_data["canonical"],
            actor=acting_user(request),
            reason=form.cleaned_data["reason"],
        )
    except ValidationFailure as failure:
        messages.error(request, str(failure))
    else:
        if form.cleaned_data["decision"] == incidents.SAME_INCIDENT:
            messages.success(
                request,
                gettext("Recorded as one incident. Every incident count now counts them once."),
            )
        else:
            messages.success(request, gettext("Recorded as different incidents."))
    return finish(request, target)


@require_http_methods(["GET", "POST"])
@console_view(VIEW_CASE)
def incident_list(request: HtmxHttpRequest) -> HttpResponse:
    form = IncidentMergeForm(request.POST or None)
    status = 200
    if request.method == "POST":
        with refusal_as_403():
            incidents.incident_merge_require(actor=acting_user(request))
        if form.is_valid():
            data = form.cleaned_data
            try:
                incidents.incident_merge(
                    tenant=data["tenant"].strip(),
                    brand=data["brand"].strip(),
                    alias=data["alias"],
                    into=data["into"],
                    actor=acting_user(request),
                    reason=data["reason"],
                )
            except ValidationFailure as failure:
                form.add_error(
                    failure.field if failure.field in form.fields else None, failure.message
                )
            except PermissionRefused as refused:
                form.add_error(
                    "tenant" if refused.unmet == NOT_IN_TENANT else None, refused.message
                )
            else:
                messages.success(request, gettext("Recorded as one incident."))
                return finish(request, reverse("curation:incident-list"))
        status = 422
    page = paginate(request, selectors.merge_list(request.user), PER_PAGE)
    return render_page(
        request,
        "curation/incident_list.html",
        {
            "form": form,
            "page_obj": page,
            "merges": page.object_list,
            "can_review": request.user.has_perm(REVIEW),
        },
        partial="merge-results",
        status=status,
    )


# --- re-review ---------------------------------------------------------------------------------


def _rereview_revoke_url(entry: ReReview) -> str:
    """Where an entry's item is revoked with its impact previewed: a lesson on its own page."""
    digest = itemids.digest_of(entry.item_id)
    if entry.item_type == "lesson":
        return reverse("experience:lesson-detail", args=[digest]) + "#lesson-revoke"
    name = "experience:case-revoke" if entry.item_type == "case" else "experience:skill-revoke"
    return reverse(name, args=[digest])


@require_GET
@console_view(VIEW_CASE)
def rereview_list(request: HtmxHttpRequest) -> HttpResponse:
    form = ReReviewFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_bound and form.is_valid() else {}
    entries = selectors.rereview_queue(
        request.user, status=filters.get("status", ""), reason=filters.get("reason", "")
    )
    page = paginate(request, entries, PER_PAGE)
    rows = [
        {
            "entry": entry,
            "url": item_url(entry.item_id),
            "new_url": item_url(entry.new_item_id) if entry.new_item_id else "",
            "recertify_url": reverse("curation:rereview-recertify", args=[entry.pk]),
            "confirm_url": reverse("curation:rereview-confirm", args=[entry.pk]),
            "revoke_url": _rereview_revoke_url(entry),
            "restore_url": reverse(
                "experience:lesson-restore", args=[itemids.digest_of(entry.item_id)]
            )
            if entry.reason == ReReviewReason.OUTDATED
            else "",
            "conflict_url": reverse("experience:lesson-conflict", args=[int(entry.detail)])
            if entry.reason == ReReviewReason.CONFLICT and entry.detail.isdigit()
            else "",
            "cause": outdated_cause_sentence(entry.detail)
            if entry.reason == ReReviewReason.OUTDATED
            else None,
            # An agent's refutation: the runs to look at, and a confirmation for any kind.
            "runs": [
                (run_id, reverse("experience:run-detail", args=[run_id])) for run_id in entry.runs
            ]
            if entry.reason == ReReviewReason.REFUTED
            else [],
            "confirmable": entry.item_type == "skill" or entry.reason == ReReviewReason.REFUTED,
        }
        for entry in page.object_list
    ]
    return render_page(
        request,
        "curation/rereview_list.html",
        {
            "form": form,
            "page_obj": page,
            "rows": rows,
            "can_review": request.user.has_perm(REVIEW),
            "can_submit": request.user.has_perm(ADD_CASE),
            "stale_after_days": scan.stale_after_days(),
        },
        partial="rereview-results",
    )


@require_http_methods(["GET", "POST"])
@console_view(VIEW_CASE, ADD_CASE)
def rereview_recertify(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    entry = or_404(selectors.rereview_get_visible(pk, request.user))
    if entry.item_type != "case":
        raise Http404
    old = case_for_page(entry.item_id)
    if old is None:
        raise Http404
    if request.method == "POST":
        form = RecertifyForm(request.POST)
        if form.is_valid():
            try:
                new = rereview.rereview_recertify(
                    entry=entry,
                    valid_from=form.cleaned_data["valid_from"],
                    valid_to=form.cleaned_data["valid_to"],
                    actor=acting_user(request),
                )
            except ValidationFailure as failure:
                form.add_error(
                    failure.field if failure.field in form.fields else None, failure.message
                )
            else:
                messages.success(
                    request,
                    gettext(
                        "New version submitted. Its approval by another reviewer supersedes the old one."
                    ),
                )
                return finish(request, new.get_absolute_url())
        status = 422
    else:
        now = timezone.localtime(clock.now())
        length = old.valid_to - old.valid_from
        form = RecertifyForm(
            initial={
                "valid_from": now.replace(microsecond=0).isoformat(),
                "valid_to": (now + length).replace(microsecond=0).isoformat(),
            }
        )
        status = 200
    return render_page(
        request,
        "curation/rereview_recertify.html",
        {
            "entry": entry,
            "old": old,
            "old_url": old.get_absolute_url(),
            "form": form,
            "open": entry.status == ReReviewStatus.OPEN and old.status == Status.APPROVED,
        },
        status=status,
    )


@require_POST
@console_view(VIEW_SKILL, REVIEW)
def rereview_confirm(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    entry = or_404(selectors.rereview_get_visible(pk, request.user))
    form = ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, gettext("A reason is required."))
    else:
        try:
            rereview.rereview_confirm(
                entry=entry, actor=acting_user(request), reason=form.cleaned_data["reason"]
            )
        except ValidationFailure as failure:
            messages.error(request, failure.message)
        else:
            messages.success(request, gettext("Confirmed; the entry left the re-review queue."))
    return finish(request, reverse("curation:rereview-list"))


# --- proposals and support ----------------------------------------------------------------------


@require_GET
@console_view(VIEW_CASE, VIEW_SKILL)
def proposal_list(request: HtmxHttpRequest) -> HttpResponse:
    data = request.GET.copy()
    data.setdefault("status", ProposalStatus.OPEN)
    form = ProposalFilterForm(data)
    status = form.cleaned_data["status"] if form.is_valid() else ProposalStatus.OPEN
    page = paginate(request, selectors.proposal_queue(request.user, status=status), PER_PAGE)
    rows = [{"proposal": p, "url": p.get_absolute_url()} for p in page.object_list]
    return render_page(
        request,
        "curation/proposal_list.html",
        {"form": form, "page_obj": page, "rows": rows},
        partial="proposal-results",
    )


def _proposal_context(request: HtmxHttpRequest, pk: int, **extra: Any) -> dict[str, Any]:
    proposal = or_404(selectors.proposal_get_visible(pk, request.user))
    backing = selectors.proposal_support(proposal)
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
        "still_proven": selectors.proposal_still_proven(proposal, clock.now()),
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
    proposal = or_404(selectors.proposal_get_visible(pk, request.user))
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
    proposal = or_404(selectors.proposal_get_visible(pk, request.user))
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
    cases, support = selectors.skill_support(skill, request.user)
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
