"""Prompt-form skills (issue 27, item 3): reviewed like recipe skills, run only through the
investigation runner and its verifier, with the scripted provider and a stub live model.

The knowledge base and the memory are real; the live model is a stub OpenAI-compatible server
on 127.0.0.1 (``llm_stub``) replaying recorded turns, honest or hostile.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases import executor, services
from experience.cases.executor import run_skill
from experience.cases.models import Skill
from experience.cases.prompting import prompt_tools
from experience.cases.schema import TicketContext, parse_skill
from experience.cases.tools import tool_specs
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.review.revocation import case_revoke, skill_revoke
from experience.runs.models import Reference, Run
from investigations.verification import CITATION_NOT_IN_RUN, OUTPUT_SHAPE_MISMATCH
from knowledge.conclusions import LEAD_NEEDS_REVIEW, RULES_DO_NOT_EXPLAIN
from knowledge.domain import HISTORICAL_CASE_PREFIX
from reviewconsole.errors import ValidationFailure
from tests.experience.conftest import prompt_data, prompt_skill_data
from tests.investigations.conftest import AT, KNOWN, REVIEWED_AT, memory
from tests.investigations.llm_stub import Stub, said, stub, tool_call

__all__ = ["memory", "stub"]

pytestmark = pytest.mark.django_db

SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}
COMPLAINT = "顾客说：两杯水果茶，小程序里的优惠券用不了，提示不满足条件"
RULE_B = "doc:rule-b@1"
RULE_B_QUOTE = "[rule] 活动B优惠券使用条件 (v1); conditions: match"


def cited_cases(skill: Skill) -> list[str]:
    return [str(c) for c in skill.case_links.order_by("position").values_list("case_id", flat=True)]


@pytest.fixture
def prompt_skill(
    memory: Skill,
    reviewer: User,
    second_reviewer: User,
    frozen_clock: Callable[[datetime], Any],
) -> Skill:
    """A prompt skill citing the memory's two cases (two incidents), submitted by one reviewer
    and approved by another, before the ticket."""
    frozen_clock(REVIEWED_AT)
    content = parse_skill(prompt_skill_data(cited_cases(memory)), tool_specs(), prompt_tools())
    skill, _ = services.skill_submit(content=content, actor=reviewer)
    services.skill_approve(skill=skill, actor=second_reviewer, reason="两个不同事故，工具只读")
    frozen_clock(datetime.fromisoformat("2026-09-18T14:20:00+08:00"))
    skill.refresh_from_db()
    return skill


def context(facts: dict[str, object] | None = None) -> TicketContext:
    return TicketContext(
        occurred_at=datetime.fromisoformat(AT),
        known_at=datetime.fromisoformat(KNOWN),
        facts=dict(FACTS if facts is None else facts),
    )


def run_prompt(
    skill: Skill, actor: User, run_id: str = "prompt-run-1", **changes: Any
) -> dict[str, Any]:
    arguments: dict[str, Any] = {"inputs": {"complaint": COMPLAINT}}
    arguments.update(changes)
    return run_skill(skill.id, SCOPE, context(), run_id, actor=actor, **arguments).as_json()


# --- the scripted provider ---------------------------------------------------------------------


def test_a_scripted_run_answers_a_verified_result_in_the_declared_shape(
    prompt_skill: Skill, agent: User
) -> None:
    result = run_prompt(prompt_skill, agent)

    assert result["form"] == "prompt"
    assert result["status"] == "needs_review", result["reason"]
    assert result["reason"].startswith(executor.ANSWER_VERIFIED)
    assert result["verification"]["ok"] is True
    assert result["answer"]["conclusion_code"] == RULES_DO_NOT_EXPLAIN
    assert result["output"]["conclusion_code"] == RULES_DO_NOT_EXPLAIN
    assert RULE_B in result["output"]["rule_ids"]
    assert [step["tool"] for step in result["steps"]] == ["search_knowledge"]
    assert result["tool_calls"] == 1
    assert result["cases"] == cited_cases(prompt_skill)
    stored = Run.objects.get(run_id="prompt-run-1")
    assert stored.prompt["form"] == "prompt"
    assert stored.prompt["trace"][0]["result"]["evidence"]
    assert RULE_B in set(stored.citations.values_list("document_id", flat=True))
    read = set(Reference.objects.filter(run_id="prompt-run-1").values_list("item_id", flat=True))
    assert {prompt_skill.id, *cited_cases(prompt_skill), RULE_B} <= read


def test_a_missing_input_falls_back_naming_it_before_any_tool_is_called(
    prompt_skill: Skill, agent: User
) -> None:
    result = run_prompt(prompt_skill, agent, inputs={})

    assert result["status"] == "fallback"
    assert result["reason"].startswith(executor.MISSING_CONTEXT)
    assert result["missing"] == ["inputs.complaint"]
    assert result["tool_calls"] == 0


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        ({"complaint": COMPLAINT, "order": "A-1"}, "inputs.order"),
        ({"complaint": 7}, "inputs.complaint"),
    ],
)
def test_an_undeclared_or_ill_typed_input_is_refused_naming_it_and_nothing_is_stored(
    prompt_skill: Skill, agent: User, inputs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationFailure) as refused:
        run_prompt(prompt_skill, agent, inputs=inputs)

    assert refused.value.field == field
    assert not Run.objects.exists()
    assert not Reference.objects.filter(run_id="prompt-run-1").exists()


def test_a_recipe_skill_takes_no_inputs(memory: Skill, agent: User) -> None:
    with pytest.raises(ValidationFailure) as refused:
        run_skill(memory.id, SCOPE, context(), "r-1", actor=agent, inputs={"complaint": "x"})

    assert refused.value.field == "inputs"
    assert not Run.objects.exists()


def test_a_recipe_skill_answers_exactly_as_before(memory: Skill, agent: User) -> None:
    result = run_skill(memory.id, SCOPE, context(), "r-1", actor=agent).as_json()

    assert set(result) == {
        "status", "reason", "run_id", "skill", "missing", "tool_calls", "steps", "observations",
        "cases",
    }  # fmt: skip
    assert set(result["steps"][0]) == {"index", "tool", "arguments", "status"}
    assert Run.objects.get(run_id="r-1").prompt == {}


def test_a_revoked_cited_case_makes_the_prompt_skill_unavailable_before_any_call(
    prompt_skill: Skill, agent: User, second_reviewer: User
) -> None:
    case = prompt_skill.cases.order_by("skill_links__position").first()
    assert case is not None
    case_revoke(case=case, actor=second_reviewer, reason="证据不足")

    result = run_prompt(prompt_skill, agent)

    assert result["status"] == "fallback"
    assert result["reason"].startswith(executor.SKILL_UNAVAILABLE)
    assert result["tool_calls"] == 0


def test_an_unknown_provider_is_refused_naming_it(prompt_skill: Skill, agent: User) -> None:
    with pytest.raises(ValidationFailure) as refused:
        run_prompt(prompt_skill, agent, provider="oracle")

    assert refused.value.field == "provider"
    assert not Run.objects.exists()


# --- review: exactly as recipe skills ----------------------------------------------------------


def test_a_prompt_skill_is_reviewed_like_a_recipe_skill(
    memory: Skill, reviewer: User, second_reviewer: User
) -> None:
    one_case = cited_cases(memory)[:1]
    content = parse_skill(prompt_skill_data(one_case), tool_specs(), prompt_tools())
    skill, _ = services.skill_submit(content=content, actor=reviewer)

    with pytest.raises(ReviewRefused) as own:
        services.skill_approve(skill=skill, actor=reviewer, reason="mine")
    with pytest.raises(ReviewRefused) as one_incident:
        services.skill_approve(skill=skill, actor=second_reviewer, reason="one case")

    assert "own_submission" in own.value.unmet
    assert one_incident.value.unmet == ["too_few_incidents"]
    skill.refresh_from_db()
    assert skill.status == Status.CANDIDATE and skill.form == "prompt"


def test_approval_refuses_a_tool_no_longer_registered_read_only(
    memory: Skill,
    reviewer: User,
    second_reviewer: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    content = parse_skill(prompt_skill_data(cited_cases(memory)), tool_specs(), prompt_tools())
    skill, _ = services.skill_submit(content=content, actor=reviewer)
    from experience.cases import prompting

    monkeypatch.setattr(prompting, "_tools", {})

    with pytest.raises(ReviewRefused) as refused:
        services.skill_approve(skill=skill, actor=second_reviewer, reason="two incidents")

    assert refused.value.unmet == ["prompt_tool_not_allowed"]


# --- a stub live model, honest and hostile ----------------------------------------------------

SEARCH = tool_call("search_knowledge", {"query": "水果茶 优惠券 使用条件"})
OUTPUT = {"conclusion_code": RULES_DO_NOT_EXPLAIN, "rule_ids": [RULE_B], "summary": "规则匹配"}


def final(
    citations: list[tuple[str, str]],
    output: object = OUTPUT,
    code: str = RULES_DO_NOT_EXPLAIN,
) -> dict[str, Any]:
    content = {
        "conclusion": "规则不排除这次购买，需要核对真实配置。",
        "conclusion_code": code,
        "followups": [],
        "citations": [{"id": i, "quote": q} for i, q in citations],
        "output": output,
    }
    return said(json.dumps(content, ensure_ascii=False))


def test_an_honest_live_model_gives_a_verified_result(
    prompt_skill: Skill, agent: User, stub: Stub
) -> None:
    stub.replies = [SEARCH, final([(RULE_B, RULE_B_QUOTE)])]

    result = run_prompt(prompt_skill, agent, provider="live")

    assert result["status"] == "needs_review", result["reason"]
    assert result["provider"] == "live"
    assert result["output"] == OUTPUT
    # The model saw only the declared tool, the skill's prompt and its inputs as data.
    first = stub.requests[0]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["search_knowledge"]
    assert prompt_data()["instructions"] in first["messages"][0]["content"]
    assert COMPLAINT in first["messages"][1]["content"]
    assert "scope" not in json.dumps(first["messages"][1], ensure_ascii=False)


def test_a_call_outside_the_declared_tools_is_refused_and_the_skill_falls_back(
    prompt_skill: Skill, agent: User, stub: Stub
) -> None:
    stub.replies = [
        tool_call("retrieve_experience", {"query": "优惠券"}),
        SEARCH,
        final([(RULE_B, RULE_B_QUOTE)]),
    ]

    result = run_prompt(prompt_skill, agent, provider="live")

    assert result["status"] == "fallback"
    assert result["reason"].startswith(executor.TOOL_REFUSED)
    assert result["steps"][0]["outcome"] == "unknown_tool"
    assert result["output"] is None and result["cases"] == []
    # The refused tool never ran: nothing of memory was read through it.
    stored = Run.objects.get(run_id="prompt-run-1")
    assert stored.prompt["trace"][0]["result"] is None


def test_a_model_past_the_call_budget_is_cut(prompt_skill: Skill, agent: User, stub: Stub) -> None:
    stub.replies = [SEARCH]  # asks for a search, again and again

    result = run_prompt(prompt_skill, agent, provider="live")

    assert result["status"] == "fallback"
    assert result["reason"].startswith(f"{executor.BUDGET_EXHAUSTED}: tool_calls")
    assert result["tool_calls"] == prompt_skill.prompt["max_calls"] == 2


def test_a_citation_not_in_its_own_trace_is_refused(
    prompt_skill: Skill, agent: User, stub: Stub
) -> None:
    # Rule A exists in the knowledge base, but this run never returned it.
    stub.replies = [SEARCH, final([("doc:rule-a@2", RULE_B_QUOTE)])]

    result = run_prompt(prompt_skill, agent, provider="live")

    assert result["status"] == "fallback"
    assert result["reason"].startswith(executor.ANSWER_REFUSED)
    assert CITATION_NOT_IN_RUN in result["verification"]["reasons"]
    assert result["output"] is None


@pytest.mark.parametrize(
    "output",
    [
        {"conclusion_code": "cause_confirmed", "rule_ids": [RULE_B]},
        {"conclusion_code": RULES_DO_NOT_EXPLAIN},
        {"conclusion_code": RULES_DO_NOT_EXPLAIN, "rule_ids": [RULE_B], "fix": "已修复"},
        "规则匹配",
        None,
    ],
)
def test_an_output_not_in_the_declared_shape_is_refused(
    prompt_skill: Skill, agent: User, stub: Stub, output: object
) -> None:
    stub.replies = [SEARCH, final([(RULE_B, RULE_B_QUOTE)], output=output)]

    result = run_prompt(prompt_skill, agent, provider="live")

    assert result["status"] == "fallback"
    assert result["verification"]["reasons"] == [OUTPUT_SHAPE_MISMATCH]


def test_a_scope_argument_is_refused_and_the_skill_falls_back(
    prompt_skill: Skill, agent: User, stub: Stub
) -> None:
    stub.replies = [
        tool_call("search_knowledge", {"query": "优惠券", "store": "store-001"}),
        final([]),
    ]

    result = run_prompt(prompt_skill, agent, provider="live")

    assert result["status"] == "fallback"
    assert result["reason"].startswith(executor.TOOL_REFUSED)
    assert result["steps"][0]["outcome"] == "scope_argument_refused"


# --- offered to agents like recipe skills: inside an investigation -----------------------------


def test_an_investigation_runs_a_prompt_skill_through_the_runner(
    prompt_skill: Skill, agent: User, stub: Stub
) -> None:
    from investigations.services import investigation_run

    stub.replies = [
        tool_call("run_skill", {"skill_id": prompt_skill.id, "inputs": {"complaint": COMPLAINT}}),
        # The skill's sub-agent, on the same endpoint:
        SEARCH,
        final([(RULE_B, RULE_B_QUOTE)]),
        # The investigation's answer: the skill is a lead.
        said(
            json.dumps(
                {
                    "conclusion": "技能给出线索",
                    "conclusion_code": LEAD_NEEDS_REVIEW,
                    "followups": [],
                    "citations": [
                        {
                            "id": prompt_skill.id,
                            "quote": f"{HISTORICAL_CASE_PREFIX}：{prompt_skill.id}",
                        }
                    ],
                },
                ensure_ascii=False,
            )
        ),
    ]

    investigation = investigation_run(
        actor=agent,
        text="两杯水果茶，优惠券用不了",
        scope=SCOPE,
        occurred_at=datetime.fromisoformat(AT),
        known_at=datetime.fromisoformat(KNOWN),
        facts=FACTS,
        provider="live",
        run_id="inv-prompt-1",
    )

    skill_step = investigation.steps[0]
    assert skill_step["tool"] == "run_skill" and skill_step["outcome"] == "ok"
    assert skill_step["result"]["form"] == "prompt"
    assert skill_step["result"]["status"] == "needs_review"
    assert investigation.status == "answered", investigation.verification
    # The sub-agent's words are not the skill's own text: quoting them proves nothing.
    assert Run.objects.get(run_id="inv-prompt-1").prompt["form"] == "prompt"


def test_the_scripted_investigator_supplies_a_prompt_skills_inputs_from_the_ticket(
    prompt_skill: Skill, memory: Skill, agent: User, second_reviewer: User
) -> None:
    from investigations.services import investigation_run

    # Only the prompt skill is left for retrieval to find.
    skill_revoke(skill=memory, actor=second_reviewer, reason="只留下提示型技能")
    investigation = investigation_run(
        actor=agent,
        text="两杯水果茶，优惠券用不了",
        scope=SCOPE,
        occurred_at=datetime.fromisoformat(AT),
        known_at=datetime.fromisoformat(KNOWN),
        facts=FACTS,
        run_id="inv-prompt-2",
    )

    skill_steps = [step for step in investigation.steps if step["tool"] == "run_skill"]
    assert skill_steps[0]["result"]["missing"] == ["inputs.complaint"]
    assert skill_steps[1]["arguments"]["inputs"] == {"complaint": "两杯水果茶，优惠券用不了"}
    assert skill_steps[1]["result"]["status"] == "needs_review"
    assert investigation.status == "answered", investigation.verification


def test_a_revocation_during_the_run_stops_it_before_the_next_tool_call(
    prompt_skill: Skill, agent: User, second_reviewer: User
) -> None:
    from investigations.domain import ToolCall, Transcript, Turn

    class RevokingModel:
        """Asks for a search; while it 'thinks', a reviewer revokes the skill."""

        name = "revoking"

        def next_turn(self, transcript: Transcript) -> Turn:
            if not transcript.rounds:
                skill_revoke(skill=prompt_skill, actor=second_reviewer, reason="撤销：演示")
                return Turn(calls=(ToolCall("c1", "search_knowledge", '{"query": "优惠券"}'),))
            return Turn(answer='{"conclusion": "x", "conclusion_code": "knowledge_has_no_answer"}')

    result = run_prompt(prompt_skill, agent, provider_instance=RevokingModel())

    assert result["status"] == "fallback"
    assert result["reason"].startswith(executor.REVOKED_DURING_RUN)
    stored = Run.objects.get(run_id="prompt-run-1")
    assert stored.prompt["trace"][0]["outcome"] == "tool_error"
    assert stored.prompt["trace"][0]["result"] is None
