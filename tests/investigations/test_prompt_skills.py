"""Prompt-form skills (issue 27, item 3): reviewed like recipe skills, run only through the
investigation runner and its verifier, with the scripted provider and a stub live model.

The knowledge base and the memory are real; the live model is a stub OpenAI-compatible server
on 127.0.0.1 (``llm_stub``) replaying recorded turns, honest or hostile.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases import executor, services
from experience.cases.executor import TicketContext, run_skill
from experience.cases.models import Skill
from experience.cases.prompting import prompt_tools
from experience.cases.schema import parse_skill
from experience.cases.tools import tool_specs
from experience.runs.models import Reference, Run
from knowledge.conclusions import RULES_DO_NOT_EXPLAIN
from tests.experience.conftest import prompt_skill_data
from tests.investigations.conftest import AT, KNOWN, REVIEWED_AT, memory
from tests.investigations.llm_stub import stub

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
