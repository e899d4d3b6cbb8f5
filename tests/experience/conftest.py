"""Builders for experience tests: cases and skills in the import format, and a loaded demo."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases import selectors, services
from experience.cases.models import Case, Skill
from experience.cases.schema import parse_case, parse_skill
from experience.cases.tools import tool_specs
from experience.core import review
from experience.review import decisions

SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
NOW = datetime.fromisoformat("2026-10-01T12:00:00+08:00")
VALID_FROM = "2026-09-01T00:00:00+08:00"
VALID_TO = "2027-12-31T00:00:00+08:00"
QUERY = "优惠券无法使用的适用条件"


def case_data(**changes: Any) -> dict[str, Any]:
    """An approvable case: checked diagnosis evidence and a refuted hypothesis with evidence."""
    data: dict[str, Any] = {
        "type": "case",
        "scope": dict(SCOPE),
        "incident": "INC-1",
        "title": "二号店优惠券无法使用：门店范围漏配",
        "summary": "顾客在二号店小程序使用优惠券失败。",
        "observations": [{"source_id": "thread:1#m1", "excerpt": "顾客：优惠券用不了。"}],
        "diagnosis": {
            "statement": "活动适用门店不含二号店。",
            "evidence": [
                {
                    "source_id": "thread:1#m7",
                    "excerpt": "运营：门店列表缺少二号店。",
                    "verified": True,
                }
            ],
        },
        "counterevidence": [
            {
                "hypothesis": "缓存未刷新",
                "statement": "刷新后仍失败。",
                "refutes": "仅客户端刷新；服务端缓存未排除",
                "evidence": [{"source_id": "thread:1#m5", "excerpt": "顾客：刷新了还是不行。"}],
            }
        ],
        "outcome": {
            "statement": "补充门店后恢复。",
            "evidence": [{"source_id": "thread:1#m9", "excerpt": "顾客：好了，谢谢。"}],
        },
        "valid_from": VALID_FROM,
        "valid_to": VALID_TO,
    }
    for key, value in changes.items():
        data[key] = value
    return data


def skill_data(cases: list[str], **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "skill",
        "scope": dict(SCOPE),
        "title": "优惠券无法使用：核对活动适用条件",
        "when": "小程序优惠券无法使用时，先核对当前活动规则的适用条件",
        "recipe": [{"tool": "search_knowledge", "arguments": {"query": QUERY}}],
        "cases": cases,
        "valid_from": VALID_FROM,
        "valid_to": VALID_TO,
    }
    data.update(changes)
    return data


PROMPT_INSTRUCTIONS = (
    "读顾客的原话，判断当前活动规则是否解释这次用券失败。先用 search_knowledge 按顾客提到的"
    "商品和优惠券搜索，只引用工具返回的规则；历史案例只是线索。"
)
PROMPT_OUTPUT = {
    "type": "object",
    "properties": {
        "conclusion_code": {
            "type": "string",
            "enum": [
                "rules_exclude_purchase",
                "rules_do_not_explain",
                "ask_for_facts",
                "check_campaign_configuration",
                "knowledge_has_no_answer",
                "lead_needs_review",
            ],
        },
        "rule_ids": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "summary": {"type": "string", "maxLength": 500},
    },
    "required": ["conclusion_code", "rule_ids"],
}


def prompt_data(**changes: Any) -> dict[str, Any]:
    """A prompt skill's body: one input (the customer's words), a three-field output, one tool."""
    prompt: dict[str, Any] = {
        "instructions": PROMPT_INSTRUCTIONS,
        "inputs": {
            "type": "object",
            "properties": {
                "complaint": {
                    "type": "string",
                    "maxLength": 1000,
                    "description": "the customer's own words",
                }
            },
            "required": ["complaint"],
        },
        "output": copy.deepcopy(PROMPT_OUTPUT),
        "tools": ["search_knowledge"],
        "max_calls": 2,
    }
    prompt.update(changes)
    return prompt


def prompt_skill_data(cases: list[str], **changes: Any) -> dict[str, Any]:
    """A prompt-form skill in the import format (``prompt`` in place of ``recipe``)."""
    data = skill_data(cases, title="顾客原话里的用券失败：按规则判断", **changes)
    data.pop("recipe", None)
    data.setdefault("prompt", prompt_data())
    return data


def without_verified(data: dict[str, Any]) -> dict[str, Any]:
    clean = copy.deepcopy(data)
    for evidence in (clean.get("diagnosis") or {}).get("evidence", []):
        evidence.pop("verified", None)
    return clean


@pytest.fixture
def at_now(frozen_clock: Callable[[datetime], Any]) -> datetime:
    frozen_clock(NOW)
    return NOW


@pytest.fixture
def submit_case(reviewer: User, at_now: datetime) -> Callable[..., Case]:
    """Submit as the reviewer (who may mark evidence verified); approve as someone else."""

    def submit(data: dict[str, Any] | None = None, *, actor: User | None = None) -> Case:
        case, _ = services.case_submit(
            content=parse_case(data or case_data()), actor=actor or reviewer
        )
        return case

    return submit


def approve_checked(case: Case, *, actor: User, reason: str = "checked") -> review.ReviewOutcome:
    """``actor`` checks ``diagnosis/0`` and approves ``case``, as a reviewer does: the submitter's
    own check (``verified: true`` in ``case_data``) does not count toward approval."""
    services.evidence_check(case=case, key="diagnosis/0", actor=actor)
    return decisions.case_approve(case=case, actor=actor, reason=reason)


@pytest.fixture
def approved_case(submit_case: Callable[..., Case], second_reviewer: User) -> Callable[..., Case]:
    def make(**changes: Any) -> Case:
        case = submit_case(case_data(**changes))
        approve_checked(case, actor=second_reviewer)
        return selectors.case_get(case.id)

    return make


@pytest.fixture
def approved_skill(
    approved_case: Callable[..., Case], reviewer: User, second_reviewer: User
) -> Callable[..., Skill]:
    """A skill citing two approved cases of distinct incidents, approved by a second reviewer."""

    def make(*, tag: str = "", **changes: Any) -> Skill:
        first = approved_case(incident="INC-1", title=f"二号店优惠券无法使用：门店范围漏配{tag}")
        second = approved_case(incident="INC-2", title=f"二号店水果茶券不可用：商品列表漏配{tag}")
        skill, _ = services.skill_submit(
            content=parse_skill(skill_data([first.id, second.id], **changes), tool_specs()),
            actor=reviewer,
        )
        decisions.skill_approve(skill=skill, actor=second_reviewer, reason="two incidents")
        return selectors.skill_get(skill.id)

    return make
