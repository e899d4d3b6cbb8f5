"""The HTTP API for agents under /api/v1/ (docs/contracts.md, HTTP API).

Every endpoint authenticates a bearer token, checks the token user's permission and calls one
operation of ``agentapi.operations`` (the same functions the MCP server calls). There are no
endpoints to approve, verify, reject or revoke anything, nor to read candidates.

Errors: 401 without a valid token, 403 without the permission or the tenant, 404 for an unknown
id (an unknown run too), 409 for a run id already taken, 422 with ``{"detail": [{"loc": ["body", "scope", "campaign"], "msg": …, "type": …}]}`` for a
bad body (``["path", "run_id"]`` or ``["query", "run_id"]`` for a bad parameter).
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.urls import register_converter, reverse
from ninja import NinjaAPI, Path, Query, Status
from ninja.errors import AuthenticationError
from ninja.errors import ValidationError as NinjaValidationError

from agentapi import oauth, operations
from agentapi.auth import AgentToken
from agentapi.investigate import investigate, investigation_poll, investigation_queue, pending
from agentapi.limits import AccountRateThrottle, TooBusy
from agentapi.operations import NotFound
from agentapi.schemas import (
    ApprovedCase,
    ApprovedSkill,
    CaseProposal,
    CaseProposed,
    ExperienceContextRequest,
    ExperienceContextResult,
    ExperienceRetrieveRequest,
    ExperienceRetrieveResult,
    InvestigationPending,
    InvestigationRequest,
    InvestigationResult,
    KnowledgeSearchRequest,
    KnowledgeSearchResult,
    Message,
    Ping,
    RunId,
    RunOutcomeRequest,
    RunOutcomeResult,
    RunRecord,
    SkillId,
    SkillRunRequest,
    SkillRunResult,
    ValidationErrors,
)
from experience.runs.claims import run_name
from reviewconsole.errors import AlreadyTaken, PermissionRefused, UnknownId, ValidationFailure
from reviewconsole.tenancy import UnknownTenant, forbidden_tenant_message

logger = logging.getLogger(__name__)


class AnyText:
    """A path segment that may hold anything, even ``/`` or a newline, so a malformed id reaches
    the API (and gets its JSON 404) instead of falling through to the site's HTML 404."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(AnyText, "agentapi_text")

api = NinjaAPI(
    title="Experience review console: agent API",
    version="1",
    description=(
        "Governed memory for support agents: search the knowledge base, retrieve reviewed "
        "experience, run read-only skills, propose candidate cases. Authenticate with "
        "`Authorization: Bearer <token>` (`manage.py create_token USER`)."
    ),
    urls_namespace="api-v1",
    auth=AgentToken(),
    # Per account: CONSOLE_API_RATE requests (429 with Retry-After beyond it; agentapi/limits.py).
    throttle=[AccountRateThrottle()],
)

# The name of every body parameter; error paths leave it out so they are JSON paths of the body.
BODY = "payload"
NO_SUCH_ENDPOINT = "no such endpoint; see /api/v1/docs"
IDENTITY_ERRORS: dict[int, Any] = {401: Message, 403: Message, 429: Message}
BODY_ERRORS: dict[int, Any] = {**IDENTITY_ERRORS, 400: Message, 422: ValidationErrors}


def _user(request: HttpRequest) -> User:
    user = request.auth  # type: ignore[attr-defined]
    assert isinstance(user, User)
    return user


# --- errors ------------------------------------------------------------------------------------


def field_path(field: str) -> list[str | int]:
    """``counterevidence[0].evidence[1].excerpt`` → ``["counterevidence", 0, "evidence", 1, …]``."""
    path: list[str | int] = []
    for part in field.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("[") and part.endswith("]") and part[1:-1].isdigit():
            path.append(int(part[1:-1]))
        else:
            path.append(part)
    return path


def _errors(request: HttpRequest, detail: list[dict[str, Any]]) -> HttpResponse:
    return api.create_response(request, {"detail": detail}, status=422)


@api.exception_handler(NinjaValidationError)
def _invalid_request(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    detail = []
    for error in exc.errors:
        loc = list(error.get("loc", ()))
        if loc[:2] == ["body", BODY]:
            del loc[1]
        detail.append({**error, "loc": loc})
    return _errors(request, detail)


def refusal_loc(request: HttpRequest, field: str) -> list[str | int]:
    """Where a field a service refused came from: a path parameter (``["path", "run_id"]``), a
    query parameter, else the body (a JSON path inside it), as the request's own errors say."""
    path = field_path(field)
    head = path[0] if path else ""
    match = request.resolver_match
    if match is not None and head in match.kwargs:
        return ["path", *path]
    if head in request.GET:
        return ["query", *path]
    return ["body", *path]


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    """401 with the challenge an OAuth client follows (RFC 9728): where the API's protected
    resource metadata is, and ``invalid_token`` when a token was presented."""
    response = api.create_response(request, {"detail": "Unauthorized"}, status=401)
    presented = bool(request.headers.get("Authorization", "").strip())
    response["WWW-Authenticate"] = oauth.www_authenticate(
        oauth.api_resource(), token_presented=presented
    )
    return response


@api.exception_handler(ValidationFailure)
def _refused_input(request: HttpRequest, exc: ValidationFailure) -> HttpResponse:
    loc = refusal_loc(request, exc.field)
    return _errors(request, [{"loc": loc, "msg": exc.message, "type": "value_error"}])


@api.exception_handler(UnknownId)
def _unknown_id(request: HttpRequest, exc: UnknownId) -> HttpResponse:
    # Every unknown id is a 404 here, whichever layer found it unknown.
    return api.create_response(request, {"detail": exc.message}, status=404)


@api.exception_handler(AlreadyTaken)
def _already_taken(request: HttpRequest, exc: AlreadyTaken) -> HttpResponse:
    return api.create_response(request, {"detail": exc.message}, status=409)


@api.exception_handler(TooBusy)
def _too_busy(request: HttpRequest, exc: TooBusy) -> HttpResponse:
    response = api.create_response(request, {"detail": exc.message}, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(UnknownTenant)
def _unknown_tenant(request: HttpRequest, exc: UnknownTenant) -> HttpResponse:
    # Answered exactly as a tenant the caller may not use: an agent learns nothing of which
    # tenants exist (docs/architecture.md, Tenancy).
    return api.create_response(
        request, {"detail": forbidden_tenant_message(exc.tenant)}, status=403
    )


@api.exception_handler(PermissionRefused)
def _not_permitted(request: HttpRequest, exc: PermissionRefused) -> HttpResponse:
    return api.create_response(request, {"detail": exc.message}, status=403)


@api.exception_handler(PermissionDenied)
def _denied(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc) or "Forbidden"}, status=403)


@api.exception_handler(NotFound)
def _not_found(request: HttpRequest, exc: NotFound) -> HttpResponse:
    return api.create_response(request, {"detail": exc.message}, status=404)


@api.exception_handler(SuspiciousOperation)
def _bad_request(request: HttpRequest, exc: SuspiciousOperation) -> HttpResponse:
    status = 413 if isinstance(exc, RequestDataTooBig) else 400
    return api.create_response(request, {"detail": "bad request"}, status=status)


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    # Only a bug gets here: log it with its traceback, and tell the client nothing internal.
    logger.exception("unexpected error in %s %s", request.method, request.path)
    return api.create_response(request, {"detail": "internal error"}, status=500)


# --- endpoints ---------------------------------------------------------------------------------


@api.get("/ping", response={200: Ping, **IDENTITY_ERRORS}, tags=["health"])
def ping(request: HttpRequest) -> dict[str, Any]:
    """A trivial authenticated endpoint: who this token acts as."""
    return {"ok": True, "user": _user(request).get_username()}


@api.post(
    "/knowledge/search",
    response={200: KnowledgeSearchResult, **BODY_ERRORS},
    tags=["knowledge"],
)
def knowledge_search(request: HttpRequest, payload: KnowledgeSearchRequest) -> dict[str, Any]:
    """Search versioned rules and confirmed historical cases for one ticket's scope, times and
    facts. A missing scope field or time is answered with ``needs_context`` and nothing is
    searched. A full match means only that the rules do not explain the failure."""
    return operations.knowledge_search(user=_user(request), request=payload)


@api.post(
    "/experience/retrieve",
    response={200: ExperienceRetrieveResult, **BODY_ERRORS},
    tags=["experience"],
)
def experience_retrieve(request: HttpRequest, payload: ExperienceRetrieveRequest) -> dict[str, Any]:
    """Approved cases and skills of exactly this scope, valid now. A missing scope field is
    answered with ``fallback`` naming it. Every returned item is recorded as read in ``run_id``."""
    return operations.experience_retrieve(user=_user(request), request=payload)


@api.post(
    "/skills/{agentapi_text:skill_id}/run",
    response={200: SkillRunResult, 404: Message, **BODY_ERRORS},
    tags=["experience"],
    # A recipe skill's answer keeps exactly its fields; a prompt skill's adds its own.
    exclude_unset=True,
)
def skill_run(
    request: HttpRequest, skill_id: Path[SkillId], payload: SkillRunRequest
) -> dict[str, Any]:
    """Run an approved skill with the current scope and ticket context: a recipe skill's
    read-only checks, or a prompt-form skill's sub-agent through the investigation runner
    (``inputs``, ``provider``; its answer verified like an investigation's). ``needs_review`` at best (current evidence plus the cited cases as historical leads), never a
    confirmed cause; ``fallback`` with a reason otherwise. The run is stored under ``run_id``.
    An id that names no skill of this scope's tenant is 404, and nothing is stored."""
    return operations.skill_run(user=_user(request), skill_id=skill_id, request=payload)


@api.post(
    "/cases",
    response={200: CaseProposed, 201: CaseProposed, **BODY_ERRORS},
    tags=["experience"],
)
def case_propose(request: HttpRequest, payload: CaseProposal) -> Status[dict[str, Any]]:
    """Propose a candidate case in the import format. The token's user is its submitter and every
    evidence item stays unchecked, whatever ``verified`` says; nothing is reused before a reviewer
    approves it. 201 when stored, 200 when identical content already was."""
    result = operations.case_propose(user=_user(request), proposal=payload)
    return Status(201 if result["created"] else 200, result)


# Registered before ``GET /runs/{run_id}``, whose id may hold ``/`` and would take this path.
@api.post(
    "/runs/{agentapi_text:run_id}/outcome",
    response={200: RunOutcomeResult, 404: Message, **BODY_ERRORS},
    tags=["experience"],
)
def run_outcome(
    request: HttpRequest, run_id: Path[RunId], payload: RunOutcomeRequest
) -> RunOutcomeResult:
    """What happened after the run: ``resolved_by_lead``, ``lead_was_wrong`` or ``unresolved``,
    with a note; by an account that read memory under the run, or a reviewer. A reviewer's
    outcome moves the confidence of every item the run read; an agent's waits for a reviewer
    (its ``lead_was_wrong`` puts the items in the re-review queue). An id under which nothing was
    read (by the caller, or in the caller's tenants) is 404; the latest report replaces an earlier one, except that only a
    reviewer changes an outcome a reviewer reported."""
    return operations.run_outcome(user=_user(request), run_id=run_id, request=payload)


@api.get(
    "/runs/{agentapi_text:run_id}",
    response={200: RunRecord, 404: Message, **IDENTITY_ERRORS},
    tags=["experience"],
)
def run_read(request: HttpRequest, run_id: str) -> dict[str, Any]:
    """Everything recorded under one run id: skill runs and the memory reads (References)."""
    return operations.run_read(user=_user(request), run_id=run_id)


@api.get(
    "/cases/{agentapi_text:case_id}",
    response={200: ApprovedCase, 404: Message, 422: ValidationErrors, **IDENTITY_ERRORS},
    tags=["experience"],
)
def case_read(
    request: HttpRequest,
    case_id: Path[str],
    run_id: Query[RunId | None] = None,
) -> dict[str, Any]:
    """An approved case. Candidates, rejected, revoked and unknown ids are all 404. With
    ``run_id`` the read is recorded in that run."""
    return operations.case_read(user=_user(request), case_id=case_id, run_id=run_id)


@api.get(
    "/skills/{agentapi_text:skill_id}",
    response={200: ApprovedSkill, 404: Message, 422: ValidationErrors, **IDENTITY_ERRORS},
    tags=["experience"],
    # A recipe skill's answer keeps exactly its fields; a prompt skill's adds form and prompt.
    exclude_unset=True,
)
def skill_read(
    request: HttpRequest,
    skill_id: Path[str],
    run_id: Query[RunId | None] = None,
) -> dict[str, Any]:
    """An approved skill and whether it may be used now; anything else is 404. With ``run_id``
    the read is recorded in that run."""
    return operations.skill_read(user=_user(request), skill_id=skill_id, run_id=run_id)


@api.post(
    "/investigations",
    response={200: InvestigationResult, 202: InvestigationPending, 409: Message, **BODY_ERRORS},
    tags=["investigations"],
)
def investigation_create(
    request: HttpRequest, payload: InvestigationRequest, response: HttpResponse
) -> Any:
    """Investigate one ticket: the runner offers the model the knowledge (and, with the use
    permission, memory) tools bound to this scope and times, and accepts its answer only when
    every citation quotes, verbatim, evidence returned in this run. The run is stored with its
    steps, answer and verification under ``run_id``; a run id of the caller's that already has
    an investigation is 409.

    The scripted provider answers here (200, the stored run). A ``live`` run is handed to the
    background worker: 202 with the run id and the address to poll (also in ``Location``);
    ``GET`` that address until it answers 200. At most ``CONSOLE_API_LIVE_INVESTIGATIONS`` live
    runs of one account may be queued or running; another is refused with 429 and
    ``Retry-After``."""
    user = _user(request)
    if payload.provider == "live":
        queued = investigation_queue(user=user, request=payload)
        url = _poll_url(run_name(queued.run_id))
        response["Location"] = url
        return Status(202, pending(queued, url))
    return investigate(user=user, request=payload)


def _poll_url(run_id: str) -> str:
    return reverse("api-v1:investigation_read", kwargs={"run_id": run_id})


@api.get(
    "/investigations/{agentapi_text:run_id}",
    response={
        200: InvestigationResult,
        202: InvestigationPending,
        404: Message,
        **IDENTITY_ERRORS,
    },
    tags=["investigations"],
    url_name="investigation_read",
)
def investigation_read(request: HttpRequest, run_id: str, response: HttpResponse) -> Any:
    """The caller's own investigation under ``run_id``: 200 with the stored run once it has
    finished (status ``error`` with reason when the worker gave up on it), 202 with its state
    and the steps stored so far while it is queued or running (poll again after
    ``Retry-After`` seconds). Another account's run id is 404, as an unknown one."""
    status, body = investigation_poll(user=_user(request), run_id=run_id)
    if status == 202:
        response["Retry-After"] = "1"
        body["poll"] = _poll_url(run_id)
    return Status(status, body)


@api.post(
    "/experience/context",
    response={200: ExperienceContextResult, **BODY_ERRORS},
    tags=["experience"],
)
def experience_context(request: HttpRequest, payload: ExperienceContextRequest) -> dict[str, Any]:
    """A prompt-ready block of the approved, available items of exactly this scope whose
    confidence is at least the threshold, best first, within ``budget`` tokens (counted by the
    offline counter the answer names). Each line gives the item's id, type and confidence; cases
    and skills carry the historical-case prefix (a lead only), disputed lessons ``CONFLICT``.
    Every item in the block is recorded as read in ``run_id``."""
    return operations.experience_context(user=_user(request), request=payload)


@api.api_operation(
    ["GET", "POST", "PUT", "PATCH", "DELETE"],
    "/{agentapi_text:rest}",
    auth=None,
    include_in_schema=False,
)
def unknown_endpoint(request: HttpRequest, rest: str) -> dict[str, Any]:
    """Registered last: any other path under the API is a JSON 404, not the site's HTML page."""
    raise NotFound(NO_SUCH_ENDPOINT)
