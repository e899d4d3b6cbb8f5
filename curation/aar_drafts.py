"""Drafting after-action reviews from finished runs (``curation.aar`` builds the drafts).

The drafter is its own account, ``aar-drafter`` (the agent role: it may propose, never review);
it is never the run's own caller. A draft is a candidate case whose evidence is unchecked and a
candidate lesson supported by that case, both waiting for a reviewer like any other; a draft
near an open candidate of the same scope is attached to that candidate instead, and a lesson
matching an approved lesson (in words, or in meaning while the vector branch is on) is proposed
as a merge into it (one ``RunDraft`` row either way, so a run drafts once however often the task
runs). The lesson's words are the trace's (deterministic) unless the review agent (the live
model, ``AAR_REVIEW_AGENT=live``) wrote a draft that cites only this trace, verbatim.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from curation import aar
from curation.incidents import lesson_merges_by_meaning
from curation.models import RunDraft
from experience.cases.models import Case, Skill
from experience.cases.services import case_propose
from experience.core.models import Status
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import Lesson
from experience.lessons.schema import parse_lesson
from experience.lessons.services import lesson_propose
from experience.runs.models import Run
from investigations.domain import ProviderTimeout
from investigations.models import Investigation
from investigations.providers import review_agent, review_agent_wanted
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
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


logger = logging.getLogger(__name__)

DRAFTED_BY_TRACE = "trace"
DRAFTED_BY_MODEL = "model"
# Why a review agent's draft was not used (the note kept on the draft; the trace's stands).
AGENT_REFUSED = "the review agent's draft was refused ({reasons}); the trace's draft stands"
AGENT_FAILED = "the review agent did not answer ({error}); the trace's draft stands"
AGENT_INVALID = "the review agent's draft is not a valid lesson ({error}); the trace's draft stands"


class DraftRefused(Exception):
    pass


@dataclass(frozen=True)
class AgentReply:
    """What the review agent answered for one trace (``text``), or why it did not (``error``)."""

    text: str = ""
    error: str = ""


def agent_reply(trace: aar.Trace) -> AgentReply | None:
    """Ask the review agent for the trace's lesson, when it is wanted; None when it is not.

    Called outside any transaction (a model call may take its time), before ``run_draft``."""
    if not review_agent_wanted():
        return None
    # The SDK's errors, imported here: the SDK takes a second to load, and only a process that
    # calls the live model needs it (every manage.py process imports this module).
    from openai import APIError

    try:
        agent = review_agent()
        text = agent.complete(aar.REVIEW_AGENT_INSTRUCTIONS, aar.review_agent_input(trace))
    except ValidationFailure as failure:
        return AgentReply(error=failure.message)
    except ProviderTimeout as timeout:
        return AgentReply(error=f"timeout: {timeout}")
    except (APIError, OSError) as error:
        logger.warning("the review agent failed on run %s: %s", trace.run_id, error)
        return AgentReply(error=type(error).__name__)
    return AgentReply(text=text)


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


@dataclass(frozen=True)
class LessonDrafted:
    lesson_id: str
    attached: bool
    drafted_by: str
    note: str
    citations: tuple[dict[str, str], ...]
    merge_into: str


def _lesson_words(
    trace: aar.Trace, case_id: str, reply: AgentReply | None
) -> tuple[dict[str, Any], str, str, tuple[dict[str, str], ...]]:
    """The lesson to propose, who wrote its words, the note, and the agent's citations."""
    if reply is None:
        return aar.draft_lesson(trace, case_id), DRAFTED_BY_TRACE, "", ()
    if reply.error:
        return (
            aar.draft_lesson(trace, case_id),
            DRAFTED_BY_TRACE,
            AGENT_FAILED.format(error=reply.error),
            (),
        )
    checked = aar.check_agent_lesson(reply.text, trace)
    if checked.fields is None:
        note = AGENT_REFUSED.format(reasons=checked.problem)
        return aar.draft_lesson(trace, case_id), DRAFTED_BY_TRACE, note, ()
    data = aar.draft_lesson(trace, case_id, checked.fields)
    try:
        parse_lesson(data)
    except ValidationFailure as failure:
        return (
            aar.draft_lesson(trace, case_id),
            DRAFTED_BY_TRACE,
            AGENT_INVALID.format(error=str(failure)),
            (),
        )
    return data, DRAFTED_BY_MODEL, "", tuple(dict(c) for c in checked.citations)


def _open_candidate_lesson(shape: ld.LessonShape) -> str | None:
    """An open candidate lesson of the same scope and type that the draft near-duplicates."""
    for other in lesson_selectors.shapes_in_scope(shape.scope, status=Status.CANDIDATE):
        if other.id == shape.id or ld.is_merge_candidate(shape, other):
            return other.id
    return None


def _merge_target(lesson: Lesson) -> str:
    """The approved lesson a new candidate should be merged into: the nearest in words (the
    lessons' merge rule), else in meaning (the vector branch, when it is on), of its type."""
    lexical = lesson_selectors.merge_proposals(lesson)
    if lexical:
        return lexical[0].target
    proposed = lesson_merges_by_meaning(lesson)
    return proposed[0] if proposed else ""


def _draft_lesson(
    trace: aar.Trace, case_id: str, *, drafter: User, reply: AgentReply | None, now: datetime
) -> LessonDrafted:
    data, drafted_by, note, citations = _lesson_words(trace, case_id, reply)
    content = parse_lesson(data)
    duplicate = _open_candidate_lesson(content.shape())
    if duplicate is not None:
        return LessonDrafted(duplicate, True, drafted_by, note, citations, "")
    lesson, _created = lesson_propose(content=content, actor=drafter, now=now)
    return LessonDrafted(lesson.id, False, drafted_by, note, citations, _merge_target(lesson))


def draft_pending(trace: aar.Trace) -> bool:
    """Whether ``run_draft`` would draft anything for ``trace`` (asked before the review agent
    is, so a run already drafted, or a replay, costs no model call)."""
    return not (
        trace.run_id.startswith(REPLAY_PREFIX)
        or RunDraft.objects.filter(kind=trace.kind, run_id=trace.run_id).exists()
    )


@transaction.atomic
def run_draft(
    *,
    trace: aar.Trace,
    caller_id: int | None,
    now: datetime | None = None,
    reply: AgentReply | None = None,
) -> RunDraft:
    """Draft (or attach) the after-action review of one run, case and lesson; once per run.

    ``reply`` is the review agent's answer (``agent_reply``), when it was asked."""
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
    lesson = _draft_lesson(trace, case_id, drafter=drafter, reply=reply, now=now)
    record = RunDraft.objects.create(
        run_id=trace.run_id,
        kind=trace.kind,
        case_id=case_id,
        attached=duplicate is not None,
        drafted_at=now,
        lesson_id=lesson.lesson_id,
        lesson_attached=lesson.attached,
        lesson_drafted_by=lesson.drafted_by,
        lesson_note=lesson.note,
        lesson_citations=list(lesson.citations),
        lesson_merge_into=lesson.merge_into,
    )
    event_record(
        actor=drafter,
        action=Action.AAR_DRAFT,
        target=case_id,
        details={
            "run_id": trace.run_id,
            "kind": trace.kind,
            "attached": duplicate is not None,
            "lesson": lesson.lesson_id,
            "lesson_attached": lesson.attached,
            "lesson_drafted_by": lesson.drafted_by,
            "lesson_note": lesson.note or None,
            "merge_into": lesson.merge_into or None,
        },
        at=now,
    )
    return record
