"""What an agent may do, once: HTTP endpoints and MCP tools both call these functions.

Each operation checks the acting user's permission, takes the scope only from the request,
and calls the same service or selector as the management commands. Identity is always the
token's user, never a field of the body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from agentapi.schemas import (
    CASE_ID_PATTERN,
    SKILL_ID_PATTERN,
    CaseProposal,
    ExperienceContextRequest,
    ExperienceRetrieveRequest,
    KnowledgeSearchRequest,
    RunOutcomeRequest,
    RunOutcomeResult,
    SkillRunRequest,
)
from experience.cases import services as experience_services
from experience.cases.executor import run_skill
from experience.cases.models import Case, Skill
from experience.cases.schema import TicketContext
from experience.cases.selectors import skill_availability
from experience.core.models import ItemType, Status
from experience.retrieval.block import experience_context as context_block
from experience.retrieval.service import retrieve_experience
from experience.review.outcomes import run_outcome_report
from experience.runs import records as experience_run_records
from experience.runs.claims import run_claim, run_named
from experience.runs.models import Reference, Run
from knowledge.search import KnowledgeContext, search_knowledge
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.permissions import (
    ADD_CASE,
    PROPOSE_CASE,
    REVIEW_CASE,
    USE_EXPERIENCE,
    VIEW_RUN,
    holds,
    require,
    require_scope,
)
from reviewconsole.runids import validate_run_id
from reviewconsole.tenancy import may_access, tenants_of, visible
from reviewconsole.timeparse import to_utc_iso

# Agents propose; operators and reviewers submit. The service accepts either permission.
PROPOSE_PERMISSIONS = (PROPOSE_CASE, ADD_CASE)

NOT_PERMITTED = "this token's user does not hold the permission {permission}"
USE_REFUSED = NOT_PERMITTED.format(permission=USE_EXPERIENCE)
VIEW_RUN_REFUSED = NOT_PERMITTED.format(permission=VIEW_RUN)
PROPOSE_REFUSED = NOT_PERMITTED.format(permission=" or ".join(PROPOSE_PERMISSIONS))
NO_SUCH_CASE = "no approved case with this id"
NO_SUCH_SKILL = "no approved skill with this id"
NO_SUCH_RUN = "no run with this id"

_CASE_ID = re.compile(CASE_ID_PATTERN)
_SKILL_ID = re.compile(SKILL_ID_PATTERN)


class NotFound(LookupError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def knowledge_search(*, user: User, request: KnowledgeSearchRequest) -> dict[str, Any]:
    # The search checks the permission and the scope's tenant itself, as for every caller.
    context = KnowledgeContext(
        tenant=request.tenant,
        brand=request.brand,
        store=request.store,
        campaign=request.campaign,
        occurred_at=request.occurred_at,
        known_at=request.known_at,
        facts=dict(request.facts),
        limit=request.limit,
    )
    return search_knowledge(request.query, context, actor=user)


def experience_retrieve(*, user: User, request: ExperienceRetrieveRequest) -> dict[str, Any]:
    # The service checks the permission and the scope's tenant, as for every caller.
    return retrieve_experience(
        request.query,
        request.scope.as_mapping(),
        request.now or clock.now(),
        request.run_id,
        request.limit,
        actor=user,
    )


def skill_run(*, user: User, skill_id: str, request: SkillRunRequest) -> dict[str, Any]:
    require_scope(user, USE_EXPERIENCE, request.scope.tenant, message=USE_REFUSED)
    context = TicketContext(
        occurred_at=request.occurred_at,
        known_at=request.known_at,
        facts=dict(request.facts),
    )
    return run_skill(
        skill_id,
        request.scope.as_mapping(),
        context,
        request.run_id,
        request.now or clock.now(),
        actor=user,
        inputs=dict(request.inputs),
        provider=request.provider,
    ).as_json()


def case_propose(*, user: User, proposal: CaseProposal) -> dict[str, Any]:
    """A candidate submitted by ``user``; every evidence item stays unchecked."""
    # A tenant the agent may not use is a 403 (as on every endpoint), before the case is read;
    # the service checks it again for every other path.
    require_scope(
        user,
        PROPOSE_PERMISSIONS,
        proposal.scope.tenant,
        message=PROPOSE_REFUSED,
        field="scope.tenant",
    )
    case, created = experience_services.case_propose(data=proposal.as_import_item(), actor=user)
    return {"id": case.id, "type": "case", "status": case.status, "created": created}


def run_read(*, user: User, run_id: str) -> dict[str, Any]:
    require(user, VIEW_RUN, message=VIEW_RUN_REFUSED)
    try:
        run_id = validate_run_id(run_id)
    except ValidationFailure:
        raise NotFound(NO_SUCH_RUN) from None
    if "\x00" in run_id:
        raise NotFound(NO_SUCH_RUN)
    # The caller's own run (a reviewer's: any run of their tenants); another account's run is
    # answered as an unknown id.
    claim = run_named(user, run_id)
    if claim is None or not (
        claim.owner_id == user.pk or (holds(user, REVIEW_CASE) and may_access(user, claim.tenant))
    ):
        raise NotFound(NO_SUCH_RUN)
    stored = claim.run_id
    runs = list(visible(Run.objects.filter(run_id=stored), user).order_by("started_at", "id"))
    references = _visible_references(
        user,
        list(
            Reference.objects.filter(run_id=stored)
            .order_by("read_at", "id")
            .values_list("item_id", "item_type", "read_at")
        ),
    )
    if not runs and not references:
        raise NotFound(NO_SUCH_RUN)
    return {
        "run_id": run_id,
        "runs": [_run_json(run) for run in runs],
        "references": [
            {"item_id": item_id, "item_type": item_type, "read_at": to_utc_iso(read_at)}
            for item_id, item_type, read_at in references
        ],
    }


def case_read(*, user: User, case_id: str, run_id: str | None = None) -> dict[str, Any]:
    """An approved case; anything else (candidate, rejected, revoked, unknown) is not found."""
    require(user, USE_EXPERIENCE, message=USE_REFUSED)
    case = (
        visible(Case.objects.filter(pk=case_id, status=Status.APPROVED), user).first()
        if _CASE_ID.fullmatch(case_id)
        else None
    )
    if case is None:
        raise NotFound(NO_SUCH_CASE)
    _record_read(run_id, [(case.id, ItemType.CASE)], actor=user, tenant=case.tenant)
    content = case.content
    return {
        "id": case.id,
        "type": "case",
        "status": case.status,
        "scope": case.scope,
        "incident": case.incident,
        "title": case.title,
        "summary": case.summary,
        "observations": content.get("observations", []),
        "diagnosis": content.get("diagnosis", {"statement": "", "evidence": []}),
        "counterevidence": content.get("counterevidence", []),
        "outcome": content.get("outcome", {"statement": "", "evidence": []}),
        "valid_from": to_utc_iso(case.valid_from),
        "valid_to": to_utc_iso(case.valid_to),
        "supersedes": case.supersedes or None,
        "approved_at": to_utc_iso(case.approved_at),
    }


def skill_read(*, user: User, skill_id: str, run_id: str | None = None) -> dict[str, Any]:
    """An approved skill and whether it may be used now; anything else is not found."""
    require(user, USE_EXPERIENCE, message=USE_REFUSED)
    skill = (
        visible(Skill.objects.filter(pk=skill_id, status=Status.APPROVED), user).first()
        if _SKILL_ID.fullmatch(skill_id)
        else None
    )
    if skill is None:
        raise NotFound(NO_SUCH_SKILL)
    _, availability = skill_availability(skill.id, clock.now())
    _record_read(run_id, [(skill.id, ItemType.SKILL)], actor=user, tenant=skill.tenant)
    return {
        "id": skill.id,
        "type": "skill",
        "status": skill.status,
        "scope": skill.scope,
        "title": skill.title,
        "when": skill.when,
        "recipe": skill.recipe,
        "cases": list(skill.case_links.order_by("position").values_list("case_id", flat=True)),
        "valid_from": to_utc_iso(skill.valid_from),
        "valid_to": to_utc_iso(skill.valid_to),
        "approved_at": to_utc_iso(skill.approved_at),
        "available": bool(availability),
        "unavailable_reason": None if availability else availability.reason,
        # A prompt-form skill says what it is and what it takes (its declared inputs); a
        # recipe skill's answer is as it was.
        **({"form": skill.form, "prompt": skill.prompt} if skill.prompt else {}),
    }


def _visible_references(
    user: User, references: list[tuple[str, str, Any]]
) -> list[tuple[str, str, Any]]:
    """The reads of items in tenants ``user`` may see (all of them for a deployment-wide user)."""
    if tenants_of(user) is None or not references:
        return references
    ids = {item_id for item_id, _, _ in references}
    shown = set(visible(Case.objects.filter(pk__in=ids), user).values_list("pk", flat=True))
    shown |= set(visible(Skill.objects.filter(pk__in=ids), user).values_list("pk", flat=True))
    return [ref for ref in references if ref[0] in shown]


def _record_read(
    run_id: str | None, items: Iterable[tuple[str, str]], *, actor: User, tenant: str
) -> None:
    """A read by id inside a run is a Reference too, so revocation impact finds it."""
    if run_id is None:
        return
    run_id = validate_run_id(run_id)
    at = clock.now()
    with transaction.atomic():
        claim = run_claim(run_id=run_id, actor=actor, tenant=tenant, at=at)
        experience_run_records.references_record(run_id=claim.run_id, items=items, at=at)


def _run_json(run: Run) -> dict[str, Any]:
    return {
        "skill": run.skill_id,
        "scope": run.scope,
        "context": run.context,
        "status": run.status,
        "reason": run.reason,
        "tool_calls": run.tool_calls,
        "steps": run.steps,
        "observations": run.observations,
        "cases": run.cases,
        "started_at": to_utc_iso(run.started_at),
        "finished_at": to_utc_iso(run.finished_at),
    }


def experience_context(*, user: User, request: ExperienceContextRequest) -> dict[str, Any]:
    # The service checks the permission and the scope's tenant, as for every caller.
    return context_block(
        request.query,
        request.scope.as_mapping(),
        request.now or clock.now(),
        request.run_id,
        request.budget,
        actor=user,
    )


def run_outcome(*, user: User, run_id: str, request: RunOutcomeRequest) -> RunOutcomeResult:
    require(user, USE_EXPERIENCE, message=USE_REFUSED)
    report = run_outcome_report(
        run_id=run_id, outcome=request.outcome, note=request.note, actor=user
    )
    # The service's typed answer, read as the API's schema (the same fields, one shape).
    return RunOutcomeResult.model_validate(report, from_attributes=True)
