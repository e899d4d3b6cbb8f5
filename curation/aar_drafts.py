"""Drafting after-action reviews from finished runs (``curation.aar`` builds the draft).

The drafter is its own account, ``aar-drafter`` (the agent role: it may propose, never review);
it is never the run's own caller. A draft is a candidate case whose evidence is unchecked and
which waits for a reviewer like any other; a draft near an open candidate of the same scope is
attached to that candidate instead (one ``RunDraft`` row either way, so a run drafts once however
often the task runs).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from curation import aar
from curation.models import RunDraft
from experience.cases.models import Case, Skill
from experience.cases.services import case_propose
from experience.core.models import Status
from experience.runs.models import Run
from investigations.models import Investigation
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.models import Action
from reviewconsole.permissions import REVIEW_CASE, VERIFY_EVIDENCE, holds
from reviewconsole.roles import Role
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.services import user_set_role
from reviewconsole.templatetags.ids import shortened

DRAFTER = "aar-drafter"
DRAFTER_IS_CALLER = "the drafter never reviews its own run"
DRAFTER_IS_REVIEWER = "the drafter account must not hold a reviewer's permissions"
# Replays (evaluation.replay) run held-out tickets under these ids: drafting memory from them
# would leak the held-out set into what it is measured against.
REPLAY_PREFIX = "replay-"
REPLAY_NOT_DRAFTED = "a replay of a held-out ticket is evaluation, never memory"


class DraftRefused(Exception):
    pass


def aar_drafter(now: datetime | None = None) -> User:
    existing = User.objects.filter(username=DRAFTER).first()
    return existing or user_set_role(username=DRAFTER, role=Role.AGENT, now=now)


def _findings(evidence: list[dict[str, Any]] | None, status: str | None) -> tuple[str, ...]:
    found = []
    for item in evidence or []:
        conditions = (item.get("conditions") or {}).get("status")
        text = item.get("quote") or item.get("title") or ""
        if conditions and "conditions:" not in text:
            text = f"{text}; conditions: {conditions}"
        found.append(f"{item.get('id')}: {text}".strip())
    if not found and status:
        found.append(f"status {aar.spoken(status)}")
    return tuple(found)


def trace_of_run(run: Run) -> aar.Trace:
    observed: dict[int, dict[str, Any]] = {o.get("step", -1): o for o in run.observations}
    steps: list[aar.TraceStep] = []
    for step in run.steps:
        index = int(step.get("index", len(steps)))
        observation = observed.get(index, {})
        status = observation.get("status") or step.get("status") or ""
        steps.append(
            aar.TraceStep(
                index=index,
                tool=str(step.get("tool", "")),
                arguments=step.get("arguments") or {},
                status=str(status),
                findings=_findings(observation.get("evidence"), observation.get("status")),
            )
        )
    facts = (run.context or {}).get("facts") or {}
    # People read the draft: the skill by its title and short id, never a 64-digit hash.
    title = Skill.objects.filter(id=run.skill_id).values_list("title", flat=True).first()
    skill = f"“{title}” ({shortened(run.skill_id)})" if title else shortened(run.skill_id)
    goal = f"run the skill {skill}" + (
        " for " + ", ".join(f"{k}: {v}" for k, v in sorted(facts.items())) if facts else ""
    )
    return aar.Trace(
        kind=aar.SKILL_RUN,
        run_id=run.run_id,
        scope=run.scope,
        goal=goal,
        status=run.status,
        reason=run.reason,
        answer="",
        finished_at=run.finished_at,
        steps=tuple(steps),
    )


def trace_of_investigation(investigation: Investigation) -> aar.Trace:
    steps: list[aar.TraceStep] = []
    for step in investigation.steps:
        result = step.get("result") or {}
        status = result.get("status") or step.get("outcome") or ""
        steps.append(
            aar.TraceStep(
                index=int(step.get("index", len(steps))),
                tool=str(step.get("tool", "")),
                arguments=step.get("arguments") or {},
                status=str(status),
                findings=_findings(result.get("evidence"), result.get("status"))
                or ((step.get("error"),) if step.get("error") else ()),
            )
        )
    answer = investigation.answer or {}
    conclusion = answer.get("conclusion") if isinstance(answer, dict) else ""
    return aar.Trace(
        kind=aar.INVESTIGATION,
        run_id=investigation.run_id,
        scope={name: getattr(investigation, name) for name in SCOPE_FIELDS},
        goal=investigation.text,
        status=investigation.status,
        reason=investigation.reason,
        answer=str(conclusion or "") if investigation.status == "answered" else "",
        finished_at=investigation.finished_at,
        steps=tuple(steps),
    )


def _open_candidates(scope: dict[str, str]) -> list[tuple[str, str]]:
    rows = Case.objects.filter(status=Status.CANDIDATE, **scope).values_list(
        "id", "title", "summary"
    )
    return [(case_id, f"{title}\n{summary}") for case_id, title, summary in rows]


@transaction.atomic
def run_draft(*, trace: aar.Trace, caller_id: int | None, now: datetime | None = None) -> RunDraft:
    """Draft (or attach) the after-action review of one run; once per run."""
    existing = RunDraft.objects.filter(kind=trace.kind, run_id=trace.run_id).first()
    if existing is not None:
        return existing
    if trace.run_id.startswith(REPLAY_PREFIX):
        raise DraftRefused(REPLAY_NOT_DRAFTED)
    if any(not trace.scope.get(name) for name in SCOPE_FIELDS):
        raise DraftRefused("the run has no complete scope: nothing to draft a case in")
    now = now or clock.now()
    drafter = aar_drafter(now)
    if caller_id == drafter.pk:
        raise DraftRefused(DRAFTER_IS_CALLER)
    if holds(drafter, REVIEW_CASE, VERIFY_EVIDENCE):
        raise DraftRefused(DRAFTER_IS_REVIEWER)
    draft = aar.draft_case(trace)
    duplicate = aar.near_duplicate_of(draft, _open_candidates(dict(trace.scope)))
    if duplicate is None:
        case, _created = case_propose(data=draft, actor=drafter, now=now)
        case_id = case.id
    else:
        case_id = duplicate
    record = RunDraft.objects.create(
        run_id=trace.run_id,
        kind=trace.kind,
        case_id=case_id,
        attached=duplicate is not None,
        drafted_at=now,
    )
    event_record(
        actor=drafter,
        action=Action.AAR_DRAFT,
        target=case_id,
        details={"run_id": trace.run_id, "kind": trace.kind, "attached": duplicate is not None},
        at=now,
    )
    return record
