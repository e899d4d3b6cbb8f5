"""``run_skill``: gate, re-check before every step and before returning, store the run.

Success is ``needs_review``: the current evidence plus the cited cases as historical leads. It is
never "cause confirmed". Anything doubtful ends in ``fallback`` with the reason, keeping the
observations gathered so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction

from experience.cases.models import Case, Skill
from experience.cases.prompting import PromptRun, PromptRunOutcome, prompt_runner, prompt_tools
from experience.cases.schema import PROMPT, TicketContext
from experience.cases.selectors import skill_availability
from experience.cases.tools import CallContext, Tool, default_registry, tool_specs
from experience.core import domain
from experience.core.models import ItemType, RunStatus
from experience.core.prompts import PromptSpec, inputs_checked, prompt_checked
from experience.core.review import NO_SUCH_SKILL
from experience.runs.claims import run_claim
from experience.runs.records import references_record, run_store
from knowledge.domain import NEEDS_CONTEXT, RETRIEVED
from knowledge.search import evidence_supports
from reviewconsole import clock, itemids
from reviewconsole.errors import UnknownId, ValidationFailure
from reviewconsole.permissions import USE_EXPERIENCE, require, require_scope
from reviewconsole.runids import validate_run_id
from reviewconsole.tenancy import may_access
from reviewconsole.timeparse import aware_required

if TYPE_CHECKING:
    from django.contrib.auth.models import User

NEEDS_REVIEW = RunStatus.NEEDS_REVIEW.value
FALLBACK = RunStatus.FALLBACK.value
TOOL_TIMEOUT_SECONDS = 10.0
USE_REFUSED = "running skills needs the agent or reviewer role"
NOT_RUN = "not_run"
PASSED = "passed"
FAILED = "failed"

# Reason codes: the first word of every reason, so callers can branch without parsing prose.
MISSING_CONTEXT = "missing_context"
SKILL_NOT_FOUND = "skill_not_found"
SCOPE_MISMATCH = "scope_mismatch"
SKILL_UNAVAILABLE = "skill_unavailable"
INVALID_RECIPE = "invalid_recipe"
REVOKED_DURING_RUN = "revoked_during_run"
TOOL_ERROR = "tool_error"
TIMEOUT = "timeout"
STEP_FAILED = "step_failed"
ALL_STEPS_PASSED = "all_steps_passed"
# Prompt-form skills (run through the investigation runner, ``experience.cases.prompting``).
INVALID_PROMPT = "invalid_prompt"
RUNNER_UNAVAILABLE = "runner_unavailable"
TOOL_REFUSED = "tool_refused"
BUDGET_EXHAUSTED = "budget_exhausted"
ANSWER_REFUSED = "answer_refused"
PROVIDER_ERROR = "provider_error"
ANSWER_VERIFIED = "answer_verified"
ANSWER_VERIFIED_DETAIL = (
    "the sub-agent's answer passed verification against its own tool calls and its output "
    "matches the declared shape; the cited cases are historical leads only, a person reviews it"
)
INPUTS_NOT_DECLARED = "a recipe skill declares no inputs"
PASSED_DETAIL = (
    "every step found current evidence that matches; the cited cases are historical leads only, "
    "the current evidence and the ticket's own requests decide"
)


@dataclass(frozen=True)
class StepResult:
    """One recipe step and how far the run got with it: ``not_run``, ``passed`` or ``failed``."""

    index: int
    step: domain.RecipeStep
    status: str = NOT_RUN

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, **self.step.as_json(), "status": self.status}


@dataclass(frozen=True)
class SkillRunResult:
    """What a run answers (docs/contracts.md, Result shapes: ``run_skill``).

    ``observations`` are the tool results as the run saw them; ``cases`` are the cited cases
    handed back as historical leads, only when the run ends in ``needs_review``.
    """

    status: str
    reason: str
    run_id: str
    skill_id: str
    missing: tuple[str, ...] = ()
    tool_calls: int = 0
    steps: tuple[StepResult, ...] = ()
    observations: tuple[dict[str, Any], ...] = ()
    cases: tuple[str, ...] = ()
    # A prompt-form skill's run only (absent from a recipe run's answer): how its sub-agent
    # ran (``provider``), its answer as verified, the verification and the declared output.
    prompt: dict[str, Any] | None = None
    # A prompt run's steps in the run_skill shape (index, tool, arguments, status, outcome).
    prompt_steps: tuple[dict[str, Any], ...] = ()

    def as_json(self) -> dict[str, Any]:
        result = {
            "status": self.status,
            "reason": self.reason,
            "run_id": self.run_id,
            "skill": self.skill_id,
            "missing": list(self.missing),
            "tool_calls": self.tool_calls,
            "steps": [step.as_json() for step in self.steps],
            "observations": list(self.observations),
            "cases": list(self.cases),
        }
        if self.prompt is not None:
            result["steps"] = [dict(step) for step in self.prompt_steps]
            result.update(
                form=PROMPT,
                provider=self.prompt.get("provider"),
                answer=self.prompt.get("answer"),
                verification=self.prompt.get("verification") or {"ok": False, "reasons": []},
                output=self.prompt.get("output"),
            )
        return result


@dataclass
class _RunState:
    """What a run has done so far; ``finish`` stores it and turns it into the result."""

    run_id: str
    skill_id: str
    scope: Mapping[str, str | None]
    context: TicketContext
    actor: User
    # The run's clock: the seam's, or the one moment a caller pins the whole run at (a demo's).
    moment: Callable[[], datetime]
    started_at: datetime
    steps: list[StepResult] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    cited: set[str] = field(default_factory=set)
    cases: tuple[str, ...] = ()
    tool_calls: int = 0
    # Set for a prompt-form skill once it passed the gate: what its run through the runner gave.
    prompt: dict[str, Any] | None = None
    prompt_steps: list[dict[str, Any]] = field(default_factory=list)

    def read(self, skill: Skill, recipe: tuple[domain.RecipeStep, ...]) -> None:
        """The skill passed the gate: record the reads of it and its cases, list its steps."""
        self.cases = tuple(skill.case_links.order_by("position").values_list("case_id", flat=True))
        # Read when the run started (its claim's first read, the references' time).
        with transaction.atomic():
            claim = run_claim(
                run_id=self.run_id, actor=self.actor, tenant=skill.tenant, at=self.started_at
            )
            references_record(
                run_id=claim.run_id,
                items=[(skill.id, ItemType.SKILL), *((c, ItemType.CASE) for c in self.cases)],
                at=self.started_at,
            )
        self.steps = [StepResult(index, step) for index, step in enumerate(recipe)]

    def mark(self, index: int, status: str) -> None:
        self.steps[index] = replace(self.steps[index], status=status)

    def finish(self, status: str, reason: str, missing: list[str] | None = None) -> SkillRunResult:
        result = SkillRunResult(
            status=status,
            reason=reason,
            run_id=self.run_id,
            skill_id=self.skill_id,
            missing=tuple(missing or ()),
            tool_calls=self.tool_calls,
            steps=tuple(self.steps),
            observations=tuple(self.observations),
            cases=self.cases if status == NEEDS_REVIEW else (),
            prompt=self.prompt,
            prompt_steps=tuple(self.prompt_steps),
        )
        as_json = result.as_json()
        run_store(
            run_id=self.run_id,
            skill_id=self.skill_id,
            scope=self.scope,
            context=self.context.as_json(),
            steps=as_json["steps"],
            observations=as_json["observations"],
            cases=as_json["cases"],
            status=status,
            reason=reason,
            tool_calls=self.tool_calls,
            started_at=self.started_at,
            # A second reading of the run's clock: a run takes time (tool calls, timeouts).
            finished_at=self.moment(),
            cited_documents=self.cited,
            actor=self.actor,
            prompt=self.prompt_record(),
        )
        return result

    def prompt_record(self) -> dict[str, Any]:
        """What the stored run keeps of a prompt run: the result's prompt fields and the
        runner's whole trace (every tool result, so a reader can check each quote)."""
        if self.prompt is None:
            return {}
        return {"form": PROMPT, **self.prompt}


def _observation(index: int, tool: str, result: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "step": index,
        "tool": tool,
        "status": result.get("status"),
        "missing": list(result.get("missing") or []),
        "evidence": [
            {
                "id": item.get("id"),
                "kind": item.get("kind"),
                "title": item.get("title"),
                "quote": item.get("quote"),
                "conditions": item.get("conditions"),
                "conflict": item.get("conflict"),
            }
            for item in result.get("evidence") or []
        ],
    }


def _step_failure(result: Mapping[str, Any]) -> str | None:
    """Why a tool result does not let the run continue, or None when it passes."""
    status = result.get("status")
    evidence = result.get("evidence")
    if not isinstance(evidence, list):
        return f"{TOOL_ERROR}: the tool returned no evidence list"
    if status == RETRIEVED and evidence_supports(evidence):
        return None
    if status == NEEDS_CONTEXT:
        missing = ", ".join(result.get("missing") or []) or "scope"
        return f"{STEP_FAILED}: {status}; conditions unknown: {missing}"
    if status == RETRIEVED and not evidence:
        return f"{STEP_FAILED}: no evidence returned"
    if status == RETRIEVED:
        mismatched = [
            str(item.get("id"))
            for item in evidence
            if (item.get("conditions") or {}).get("status") != "match" or item.get("conflict")
        ]
        return f"{STEP_FAILED}: evidence does not match: {', '.join(mismatched)}"
    return f"{STEP_FAILED}: {status}"


def run_skill(
    skill_id: str,
    scope: Mapping[str, str | None],
    context: TicketContext,
    run_id: str,
    now: datetime | None = None,
    *,
    actor: User,
    tools: Mapping[str, Tool] | None = None,
    timeout: float = TOOL_TIMEOUT_SECONDS,
    at: datetime | None = None,
    inputs: Mapping[str, object] | None = None,
    provider: str | None = None,
    provider_instance: object | None = None,
) -> SkillRunResult:
    """Run ``skill_id`` in ``scope`` for one ticket; ``now`` is the instant the memory is read
    as of (the run's start when not given), ``at`` pins the moment the run is stored at (start
    and finish alike; the clock otherwise, read at the start and at the finish).

    A prompt-form skill takes its declared ``inputs`` and runs through the investigation
    runner with ``provider`` (``scripted`` unless given; ``provider_instance`` is a model the
    caller already holds, an investigation's own); a recipe skill takes neither."""
    require(actor, USE_EXPERIENCE, message=USE_REFUSED)
    run_id = validate_run_id(run_id)
    if now is not None:
        aware_required(now, field="now")
    registry = default_registry() if tools is None else tools
    domain.given_scope_checked(scope)
    tenant = str(scope.get("tenant") or "").strip() or None
    if tenant is not None:
        # The scope's tenant is checked here, as retrieval checks it, whoever calls; a run is
        # never stored under a tenant the actor may not use or that does not exist.
        require_scope(actor, USE_EXPERIENCE, tenant, message=USE_REFUSED)
    skill_known(skill_id, tenant, actor)
    # Refused before anything is written: inputs the skill does not declare, a bad provider.
    declared = _declared_prompt(skill_id)
    given_inputs: dict[str, object] = {}
    missing_inputs: list[str] = []
    provider_name = ""
    if declared is None:
        if inputs:
            raise ValidationFailure("inputs", INPUTS_NOT_DECLARED)
    else:
        given_inputs, missing_inputs = inputs_checked(declared.get("inputs") or {}, inputs or {})
        runner = prompt_runner()
        if provider_instance is not None:
            provider_name = str(getattr(provider_instance, "name", "") or "custom")
        elif runner is not None:
            provider_name = runner.provider_checked(provider or "scripted")
    moment: Callable[[], datetime] = (lambda: clock.now()) if at is None else (lambda: at)
    run = _RunState(run_id, skill_id, scope, context, actor, moment, started_at=moment())

    missing = domain.missing_scope(scope)
    missing += [name for name in ("occurred_at", "known_at") if getattr(context, name) is None]
    if missing:
        return run.finish(FALLBACK, f"{MISSING_CONTEXT}: " + ", ".join(missing), missing)
    current = {name: str(scope[name]).strip() for name in domain.SCOPE_FIELDS}
    check_time = now or run.started_at

    # 1. The gate, before any tool is called.
    gated = _gate(skill_id, current, check_time, registry, actor)
    if isinstance(gated, str):
        return run.finish(FALLBACK, gated)
    skill, recipe = gated
    if isinstance(recipe, PromptSpec):
        return _prompt_run(
            run,
            skill,
            recipe,
            PromptCall(
                inputs=given_inputs,
                missing=missing_inputs,
                scope=current,
                context=context,
                now=check_time,
                at=at,
                provider=provider_name,
                provider_instance=provider_instance,
            ),
        )
    run.read(skill, recipe)

    call_context = CallContext(
        scope=current,
        occurred_at=context.occurred_at,
        known_at=context.known_at,
        facts=dict(context.facts),
        actor=actor,
    )
    for index, step in enumerate(recipe):
        # 2. Re-check before each step: a revocation since the last step stops the run here.
        unavailable = _recheck(skill, check_time)
        if unavailable:
            return run.finish(FALLBACK, unavailable)
        # 3. The step itself: its tool's result must be current evidence that matches.
        failure = _call(index, step, registry, call_context, run, timeout)
        run.mark(index, FAILED if failure else PASSED)
        if failure:
            return run.finish(FALLBACK, failure)

    # 4. Re-check before returning: a revocation during the last tool call counts. The check and
    # the stored result share one transaction holding the skill's and cases' rows, so a
    # revocation either commits first (and is seen here) or waits until this run has returned.
    with transaction.atomic():
        _lock_rows(skill.id, run.cases)
        unavailable = _recheck(skill, check_time)
        if unavailable:
            return run.finish(FALLBACK, unavailable)
        return run.finish(NEEDS_REVIEW, f"{ALL_STEPS_PASSED}: {PASSED_DETAIL}")


def skill_known(skill_id: object, tenant: str | None, actor: User) -> None:
    """Refuse, on ``skill_id`` and before anything is written, an id that names no skill the
    run may use: malformed, nobody's, or another tenant's (the run's tenant when the scope names
    one, else one the actor may not see), all answered alike (``UnknownId``)."""
    parsed = itemids.parse(skill_id, field="skill_id", kinds=(itemids.SKILL,))
    skill_tenant = Skill.objects.filter(pk=str(parsed)).values_list("tenant", flat=True).first()
    if (
        skill_tenant is None
        or (tenant is not None and skill_tenant != tenant)
        or not may_access(actor, skill_tenant)
    ):
        raise UnknownId("skill_id", NO_SUCH_SKILL)


def _declared_prompt(skill_id: str) -> dict[str, Any] | None:
    """A prompt skill's stored body, None for a recipe skill (the id is known by now)."""
    body = Skill.objects.filter(pk=skill_id).values_list("prompt", flat=True).first()
    return dict(body) if body else None


def _gate(
    skill_id: str,
    scope: Mapping[str, str],
    now: datetime,
    registry: Mapping[str, Tool],
    actor: User,
) -> tuple[Skill, tuple[domain.RecipeStep, ...] | PromptSpec] | str:
    """The skill and its checked recipe, or why the run may not use it.

    A skill id is resolved inside the run's tenant: another tenant's skill (or one of a tenant
    the actor may not see) is answered exactly as an id nobody has."""
    skill, availability = skill_availability(skill_id, now)
    if skill is None or skill.tenant != scope["tenant"] or not may_access(actor, skill.tenant):
        return f"{SKILL_NOT_FOUND}: {skill_id}"
    differing = domain.differing_scope_fields(skill.scope, scope)
    if differing:
        return f"{SCOPE_MISMATCH}: " + ", ".join(differing)
    if not availability:
        return f"{SKILL_UNAVAILABLE}: {availability.reason}"
    if skill.prompt:
        # The declared tools are checked again against today's registry: a tool no longer
        # registered (or no longer read-only) stops the skill here.
        try:
            return skill, prompt_checked(skill.prompt, prompt_tools())
        except ValidationFailure as failure:
            return f"{INVALID_PROMPT}: {failure}"
    try:
        return skill, domain.validate_recipe(skill.recipe, tool_specs(registry))
    except ValidationFailure as failure:
        return f"{INVALID_RECIPE}: {failure}"


def _lock_rows(skill_id: str, case_ids: Sequence[str]) -> None:
    """Row locks on PostgreSQL; SQLite's IMMEDIATE transactions already admit one writer."""
    list(Skill.objects.select_for_update().filter(pk=skill_id).values_list("pk", flat=True))
    list(
        Case.objects.select_for_update()
        .filter(pk__in=case_ids)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _recheck(skill: Skill, now: datetime) -> str | None:
    _, availability = skill_availability(skill.id, now)
    if availability:
        return None
    return f"{REVOKED_DURING_RUN}: {availability.reason}"


def _call(
    index: int,
    step: domain.RecipeStep,
    registry: Mapping[str, Tool],
    context: CallContext,
    run: _RunState,
    timeout: float,
) -> str | None:
    tool = registry.get(step.tool)
    if tool is None:
        return f"{TOOL_ERROR}: {step.tool} is not registered"
    run.tool_calls += 1
    began = time.monotonic()
    try:
        result = tool.handler(dict(step.arguments), context)
    except TimeoutError:
        return f"{TIMEOUT}: step {index} ({step.tool}) timed out"
    except Exception as exc:  # a failing tool ends the run in fallback, whatever it raised
        return f"{TOOL_ERROR}: step {index} ({step.tool}) failed: {type(exc).__name__}: {exc}"
    if time.monotonic() - began > timeout:
        # The call is not interrupted (read-only, already in flight), but a late answer is not used.
        return f"{TIMEOUT}: step {index} ({step.tool}) took longer than {timeout:g}s"
    if not isinstance(result, Mapping):
        return f"{TOOL_ERROR}: step {index} ({step.tool}) returned no result object"
    run.observations.append(_observation(index, step.tool, result))
    run.cited.update(
        str(item["id"])
        for item in result.get("evidence") or []
        if isinstance(item, Mapping) and item.get("id")
    )
    return _step_failure(result)


# --- prompt-form skills ----------------------------------------------------------------------


@dataclass(frozen=True)
class PromptCall:
    """What the caller gave a prompt skill's run, checked before anything was written."""

    inputs: Mapping[str, object]
    missing: list[str]
    scope: Mapping[str, str]
    context: TicketContext
    now: datetime
    at: datetime | None
    provider: str
    provider_instance: object | None


def _prompt_steps(trace: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The runner's steps in the run_skill shape: each call's tool and arguments, ``passed``
    when it ran, ``failed`` otherwise, and the runner's ``outcome`` (``ok``, ``unknown_tool``,
    ``scope_argument_refused``, …)."""
    steps = []
    for step in trace:
        arguments = step.get("arguments")
        steps.append(
            {
                "index": int(step.get("index") or 0),
                "tool": str(step.get("tool") or ""),
                "arguments": dict(arguments)
                if isinstance(arguments, Mapping)
                else {"unparsed": str(arguments or "")[:200]},
                "status": PASSED if step.get("outcome") == "ok" else FAILED,
                "outcome": str(step.get("outcome") or ""),
            }
        )
    return steps


def _prompt_run(run: _RunState, skill: Skill, spec: PromptSpec, call: PromptCall) -> SkillRunResult:
    """A prompt skill past the gate: its inputs, then the investigation runner, then the same
    re-check before returning as a recipe run. Only the runner runs it; without one installed
    it falls back."""
    run.prompt = {
        "provider": call.provider or None,
        "max_calls": spec.max_calls,
        "tools": list(spec.tools),
        "inputs": dict(call.inputs),
        "answer": None,
        "verification": {"ok": False, "reasons": []},
        "output": None,
        "trace": [],
    }
    if call.missing:
        return run.finish(FALLBACK, f"{MISSING_CONTEXT}: " + ", ".join(call.missing), call.missing)
    runner = prompt_runner()
    if runner is None:
        return run.finish(FALLBACK, f"{RUNNER_UNAVAILABLE}: no investigation runner is installed")
    run.read(skill, ())

    def unavailable() -> str | None:
        return _recheck(skill, call.now)

    outcome: PromptRunOutcome = runner.run(
        PromptRun(
            skill_id=skill.id,
            spec=spec,
            inputs=call.inputs,
            scope=call.scope,
            occurred_at=call.context.occurred_at,
            known_at=call.context.known_at,
            facts=dict(call.context.facts),
            run_id=run.run_id,
            actor=run.actor,
            now=call.now,
            moment=run.moment,
            at=call.at,
            provider=call.provider,
            provider_instance=call.provider_instance,
            unavailable=unavailable,
        )
    )
    run.prompt.update(
        provider=outcome.provider,
        answer=outcome.answer,
        verification=outcome.verification,
        output=outcome.output,
        trace=outcome.trace,
    )
    run.prompt_steps = _prompt_steps(outcome.trace)
    run.tool_calls = len(outcome.trace)
    run.cited.update(outcome.cited_documents)
    run.observations = [
        _observation(int(step.get("index") or 0), str(step["tool"]), step["result"])
        for step in outcome.trace
        if step.get("outcome") == "ok"
        and step.get("tool") == "search_knowledge"
        and isinstance(step.get("result"), Mapping)
    ]
    if outcome.status != NEEDS_REVIEW:
        return run.finish(FALLBACK, outcome.reason)
    # Re-check before returning, as a recipe run does, in one transaction with the stored run.
    with transaction.atomic():
        _lock_rows(skill.id, run.cases)
        gone = _recheck(skill, call.now)
        if gone:
            return run.finish(FALLBACK, gone)
        return run.finish(NEEDS_REVIEW, outcome.reason)
