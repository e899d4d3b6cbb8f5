"""``run_skill`` and the four demo replays against the shipped knowledge fixture."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User

from experience.cases import executor, selectors, services
from experience.cases.executor import run_skill
from experience.cases.models import Skill
from experience.cases.schema import TicketContext
from experience.cases.tools import (
    SEARCH_KNOWLEDGE_SIGNATURE,
    CallContext,
    Tool,
    search_knowledge_handler,
)
from experience.core.review import NO_SUCH_SKILL
from experience.review import documents as review_documents
from experience.review import revocation
from experience.runs.models import Reference, Run, RunCitation
from knowledge.services import documents_import
from reviewconsole.cli import read_json_file
from reviewconsole.errors import PermissionRefused, UnknownId
from reviewconsole.models import Action, Event
from reviewconsole.permissions import NOT_PERMITTED
from tests.experience.conftest import NOW, SCOPE

pytestmark = pytest.mark.django_db

OCCURRED = datetime.fromisoformat("2026-09-18T14:00:00+08:00")
KNOWN = datetime.fromisoformat("2026-09-18T14:10:00+08:00")
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}
CONTEXT = TicketContext(occurred_at=OCCURRED, known_at=KNOWN, facts=FACTS)


@pytest.fixture
def knowledge(operator: User, at_now: datetime) -> None:
    documents_import(items=read_json_file("fixtures/knowledge.json"), actor=operator)


@pytest.fixture
def skill(knowledge: None, approved_skill: Callable[..., Skill]) -> Skill:
    return approved_skill()


def cited_cases(skill: Skill) -> list[str]:
    return list(skill.case_links.order_by("position").values_list("case_id", flat=True))


def registry(
    handler: Callable[[Mapping[str, str], CallContext], dict[str, Any]],
) -> dict[str, Tool]:
    return {"search_knowledge": Tool(SEARCH_KNOWLEDGE_SIGNATURE, handler)}


class ToolClock:
    """The executor's monotonic clock, moved on only by a tool that takes its time (``take``):
    a late answer is late by the amount the test says, and no test sleeps to make it so."""

    def __init__(self) -> None:
        self.seconds = 1_000.0

    def monotonic(self) -> float:
        return self.seconds

    def take(self, seconds: float) -> None:
        self.seconds += seconds


@pytest.fixture
def tool_clock(monkeypatch: pytest.MonkeyPatch) -> ToolClock:
    """The executor times its tool calls on a ``ToolClock`` (it reads only ``time.monotonic``)."""
    clock = ToolClock()
    monkeypatch.setattr(executor, "time", clock)
    return clock


def late_tool(clock: ToolClock) -> Callable[[Mapping[str, str], CallContext], dict[str, Any]]:
    """``search_knowledge`` answering after 50 ms of the executor's clock."""

    def late(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        clock.take(0.05)
        return search_knowledge_handler(arguments, context)

    return late


# --- the four demo replays -----------------------------------------------------------------------


def test_replay_same_scope_with_channel_and_product(skill: Skill, agent: User) -> None:
    result = run_skill(skill.id, SCOPE, CONTEXT, "run-1", NOW, actor=agent)
    assert result.status == "needs_review"
    assert result.tool_calls == 1
    assert [step.status for step in result.steps] == ["passed"]
    [observation] = result.observations
    assert observation["status"] == "retrieved" and observation["evidence"]
    assert all(item["conditions"]["status"] == "match" for item in observation["evidence"])
    assert list(result.cases) == cited_cases(skill)
    # Success never claims a cause: it hands back evidence and leads for a person to review.
    assert "confirmed" not in result.reason
    run = Run.objects.get(run_id="run-1")
    assert (run.status, run.skill_id, run.tool_calls, run.deployment) == (
        "needs_review",
        skill.id,
        1,
        "release-1",
    )
    assert set(RunCitation.objects.filter(run=run).values_list("document_id", flat=True)) == {
        item["id"] for item in observation["evidence"]
    }
    assert set(Reference.objects.filter(run_id="run-1").values_list("item_id", flat=True)) == {
        skill.id,
        *cited_cases(skill),
    }


def test_replay_deployment_changed(skill: Skill, agent: User) -> None:
    result = run_skill(
        skill.id, {**SCOPE, "deployment": "release-2"}, CONTEXT, "run-2", NOW, actor=agent
    )
    assert (result.status, result.tool_calls) == ("fallback", 0)
    assert result.reason.startswith(executor.SCOPE_MISMATCH) and "deployment" in result.reason
    assert result.cases == () and result.observations == ()
    assert not Reference.objects.filter(run_id="run-2").exists()
    assert Run.objects.get(run_id="run-2").status == "fallback"


def test_replay_channel_and_product_missing(skill: Skill, agent: User) -> None:
    partial = TicketContext(occurred_at=OCCURRED, known_at=KNOWN, facts={"basket_cents": 3200})
    result = run_skill(skill.id, SCOPE, partial, "run-3", NOW, actor=agent)
    assert (result.status, result.tool_calls) == ("fallback", 1)
    [observation] = result.observations
    assert observation["status"] == "needs_context"
    assert {"channel", "product"} <= set(observation["missing"])
    assert result.reason.startswith(executor.STEP_FAILED)
    assert result.steps[0].status == "failed"


def test_replay_cited_case_revoked(skill: Skill, second_reviewer: User, agent: User) -> None:
    first = run_skill(skill.id, SCOPE, CONTEXT, "run-before", NOW, actor=agent)
    assert first.status == "needs_review"
    case = skill.cases.order_by("incident").first()
    assert case is not None
    revoked = revocation.case_revoke(case=case, actor=second_reviewer, reason="诊断有误")
    assert revoked.impact.runs == ["run-before"]
    result = run_skill(skill.id, SCOPE, CONTEXT, "run-4", NOW, actor=agent)
    assert (result.status, result.tool_calls) == ("fallback", 0)
    assert result.reason.startswith(executor.SKILL_UNAVAILABLE) and case.id in result.reason


# --- gate ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tenant", "brand", "store", "campaign", "deployment"])
def test_missing_scope_falls_back_before_any_tool(skill: Skill, name: str, agent: User) -> None:
    result = run_skill(skill.id, {**SCOPE, name: None}, CONTEXT, "run-m", NOW, actor=agent)
    assert (result.status, result.tool_calls, result.missing) == ("fallback", 0, (name,))


def test_missing_ticket_times_fall_back(skill: Skill, agent: User) -> None:
    result = run_skill(
        skill.id, SCOPE, TicketContext(None, KNOWN, FACTS), "run-t", NOW, actor=agent
    )
    assert (result.status, result.tool_calls, result.missing) == ("fallback", 0, ("occurred_at",))


def test_unknown_skill_is_refused_and_nothing_is_stored(knowledge: None, agent: User) -> None:
    with pytest.raises(UnknownId) as refused:
        run_skill("skill:" + "0" * 64, SCOPE, CONTEXT, "run-u", NOW, actor=agent)
    assert (refused.value.field, refused.value.message) == ("skill_id", NO_SUCH_SKILL)
    assert not Run.objects.filter(run_id="run-u").exists()


def test_candidate_skill_is_unavailable(
    knowledge: None, approved_case: Callable[..., Any], reviewer: User, agent: User
) -> None:
    from experience.cases.schema import parse_skill
    from experience.cases.tools import tool_specs
    from tests.experience.conftest import skill_data

    a, b = approved_case(incident="INC-1"), approved_case(incident="INC-2", title="另一事故")
    candidate, _ = services.skill_submit(
        content=parse_skill(skill_data([a.id, b.id]), tool_specs()), actor=reviewer
    )
    result = run_skill(candidate.id, SCOPE, CONTEXT, "run-c", NOW, actor=agent)
    assert (result.status, result.tool_calls) == ("fallback", 0)
    assert result.reason.startswith(executor.SKILL_UNAVAILABLE)


def test_recipe_cannot_override_the_scope(skill: Skill, agent: User) -> None:
    seen: list[tuple[dict[str, str], CallContext]] = []

    def spy(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        seen.append((dict(arguments), context))
        return search_knowledge_handler(arguments, context)

    run_skill(skill.id, SCOPE, CONTEXT, "run-s", NOW, tools=registry(spy), actor=agent)
    [(arguments, context)] = seen
    assert arguments == {"query": "优惠券无法使用的适用条件"}
    assert dict(context.scope) == SCOPE
    assert (context.occurred_at, context.known_at, dict(context.facts)) == (OCCURRED, KNOWN, FACTS)


# --- failures during the run -------------------------------------------------------------------


def test_revocation_during_a_step_ends_in_fallback_and_keeps_observations(
    skill: Skill, second_reviewer: User, agent: User
) -> None:
    case = skill.cases.order_by("incident").first()
    assert case is not None

    def revoking(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        result = search_knowledge_handler(arguments, context)
        revocation.case_revoke(case=case, actor=second_reviewer, reason="执行中被撤销")
        return result

    result = run_skill(
        skill.id, SCOPE, CONTEXT, "run-r", NOW, tools=registry(revoking), actor=agent
    )
    assert (result.status, result.tool_calls) == ("fallback", 1)
    assert result.reason.startswith(executor.REVOKED_DURING_RUN)
    assert len(result.observations) == 1 and result.observations[0]["status"] == "retrieved"
    assert result.cases == ()
    assert Run.objects.get(run_id="run-r").observations == list(result.observations)


def test_revocation_before_the_next_step_stops_it(
    knowledge: None, approved_skill: Callable[..., Skill], second_reviewer: User, agent: User
) -> None:
    step = {"tool": "search_knowledge", "arguments": {"query": "优惠券无法使用的适用条件"}}
    two_steps = approved_skill(recipe=[step, {**step, "arguments": {"query": "活动B参与门店"}}])
    calls = []

    def revoking_first(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        calls.append(arguments["query"])
        revocation.skill_revoke(skill=two_steps, actor=second_reviewer, reason="停用")
        return search_knowledge_handler(arguments, context)

    result = run_skill(
        two_steps.id, SCOPE, CONTEXT, "run-2s", NOW, tools=registry(revoking_first), actor=agent
    )
    assert calls == ["优惠券无法使用的适用条件"]
    assert result.tool_calls == 1 and result.status == "fallback"
    assert [s.status for s in result.steps] == ["passed", "not_run"]


def test_tool_error_falls_back(skill: Skill, agent: User) -> None:
    def broken(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        raise RuntimeError("index unavailable")

    result = run_skill(skill.id, SCOPE, CONTEXT, "run-e", NOW, tools=registry(broken), actor=agent)
    assert (result.status, result.tool_calls) == ("fallback", 1)
    assert result.reason.startswith(executor.TOOL_ERROR) and "index unavailable" in result.reason
    assert Run.objects.get(run_id="run-e").reason == result.reason


def test_tool_timeout_falls_back(skill: Skill, agent: User, tool_clock: ToolClock) -> None:
    def times_out(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        raise TimeoutError

    raised = run_skill(
        skill.id, SCOPE, CONTEXT, "run-to", NOW, tools=registry(times_out), actor=agent
    )
    late = run_skill(
        skill.id,
        SCOPE,
        CONTEXT,
        "run-late",
        NOW,
        tools=registry(late_tool(tool_clock)),
        timeout=0.01,
        actor=agent,
    )
    for result in (raised, late):
        assert result.status == "fallback" and result.reason.startswith(executor.TIMEOUT)
    assert late.observations == ()


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({"status": "no_match", "missing": [], "evidence": []}, "no_match"),
        ({"status": "retrieved", "missing": [], "evidence": []}, "no evidence"),
        (
            {
                "status": "retrieved",
                "missing": [],
                "evidence": [
                    {"id": "doc:x@1", "conditions": {"status": "mismatch"}, "conflict": False}
                ],
            },
            "doc:x@1",
        ),
        (
            {
                "status": "conflicting_sources",
                "missing": [],
                "evidence": [
                    {"id": "doc:y@1", "conditions": {"status": "match"}, "conflict": True}
                ],
            },
            "conflicting_sources",
        ),
    ],
)
def test_only_fully_matching_evidence_passes(
    skill: Skill, result: dict[str, Any], reason: str, agent: User
) -> None:
    outcome = run_skill(
        skill.id, SCOPE, CONTEXT, "run-x", NOW, tools=registry(lambda a, c: result), actor=agent
    )
    assert outcome.status == "fallback" and reason in outcome.reason


def test_every_run_is_stored_and_audited(skill: Skill, agent: User) -> None:
    run_skill(skill.id, SCOPE, CONTEXT, "run-a", NOW, actor=agent)
    run_skill(skill.id, {**SCOPE, "store": "store-009"}, CONTEXT, "run-b", NOW, actor=agent)
    assert Run.objects.count() == 2
    run = Run.objects.get(run_id="run-a")
    assert (run.started_at, run.finished_at) == (NOW, NOW)
    assert run.context["occurred_at"] == "2026-09-18T06:00:00Z"
    assert Event.objects.filter(action=Action.SKILL_RUN, target=skill.id).count() == 2


def test_document_revocation_lists_runs_whose_results_cited_it(
    skill: Skill, operator: User, agent: User
) -> None:
    full = run_skill(skill.id, SCOPE, CONTEXT, "run-full", NOW, actor=agent)
    run_skill(
        skill.id, {**SCOPE, "deployment": "release-2"}, CONTEXT, "run-gated", NOW, actor=agent
    )
    cited = full.observations[0]["evidence"][0]["id"]
    document = selectors.document_get(cited, user=operator)
    outcome = review_documents.document_revoke_with_impact(
        document=document, actor=operator, reason="规则有误"
    )
    assert outcome.impact.as_json() == {"skills": [], "runs": ["run-full"]}


def test_actor_needs_the_use_permission(skill: Skill, operator: User, agent: User) -> None:
    assert run_skill(skill.id, SCOPE, CONTEXT, "run-ag", NOW, actor=agent).status == "needs_review"
    assert Run.objects.get(run_id="run-ag").actor == agent
    with pytest.raises(PermissionRefused) as refused:
        run_skill(skill.id, SCOPE, CONTEXT, "run-op", NOW, actor=operator)
    assert (refused.value.message, refused.value.unmet) == (executor.USE_REFUSED, NOT_PERMITTED)
    assert not Run.objects.filter(run_id="run-op").exists()


def test_a_run_without_an_actor_is_refused_not_unchecked(skill: Skill) -> None:
    """There is no unchecked path: no actor is a programming error, an empty one a refusal."""
    with pytest.raises(TypeError):
        run_skill(skill.id, SCOPE, CONTEXT, "run-none", NOW)  # type: ignore[call-arg]
    for nobody in (None, AnonymousUser()):
        with pytest.raises(PermissionRefused):
            run_skill(skill.id, SCOPE, CONTEXT, "run-none", NOW, actor=nobody)  # type: ignore[arg-type]
    assert not Run.objects.exists()
    assert not Reference.objects.exists()
