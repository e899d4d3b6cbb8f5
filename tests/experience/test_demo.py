"""The shipped fixture and demo loader: what is approved, what stays queued, and why."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience import demo
from experience.cases import selectors, services
from experience.cases.executor import run_skill
from experience.cases.models import Case, EvidenceCheck, Skill
from experience.cases.schema import parse_skill
from experience.cases.tools import tool_specs
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.retrieval.service import retrieve_experience
from experience.review import decisions
from tests.experience.conftest import skill_data

pytestmark = pytest.mark.django_db

RECOVERY_ONLY, INSTRUCTION = 3, 4
SECOND_SUMMARY = 2


@pytest.fixture
def loaded(operator: User, reviewer: User, at_now: datetime) -> dict[str, Any]:
    demo.load_demo_knowledge(operator=operator)
    return demo.load_demo_experience(operator=operator, reviewer=reviewer)


def refused(call: Any) -> list[str]:
    with pytest.raises(ReviewRefused) as refusal:
        call()
    return refusal.value.unmet


def test_two_cases_and_the_skill_are_approved_by_someone_else(
    loaded: dict[str, Any], operator: User, reviewer: User
) -> None:
    assert len(loaded["cases"]) == 2 and loaded["skill"].startswith("skill:")
    for item_id in loaded["approved"]:
        item: Case | Skill = (
            selectors.case_get(item_id)
            if item_id.startswith("case:")
            else selectors.skill_get(item_id)
        )
        assert item.status == Status.APPROVED
        assert item.submitted_by == operator and item.approved_by == reviewer
    incidents = {selectors.case_get(case_id).incident for case_id in loaded["cases"]}
    assert len(incidents) == 2
    assert [selectors.case_get(c).status for c in loaded["candidates"]] == ["candidate"] * 3


def test_operator_without_verify_permission_never_claims_a_check(
    loaded: dict[str, Any], operator: User, reviewer: User
) -> None:
    assert not operator.has_perm("experience.verify_evidence")
    assert set(EvidenceCheck.objects.values_list("checked_by__username", flat=True)) == {
        reviewer.username
    }


def test_loading_twice_changes_nothing(
    loaded: dict[str, Any], operator: User, reviewer: User
) -> None:
    checks = EvidenceCheck.objects.count()
    again = demo.load_demo_experience(operator=operator, reviewer=reviewer)
    assert again["approved"] == loaded["approved"]
    assert not any(item["created"] for item in again["items"])
    assert EvidenceCheck.objects.count() == checks


def test_importer_with_verify_permission_records_its_own_checks(
    reviewer: User, second_reviewer: User, at_now: datetime
) -> None:
    result = demo.load_demo_experience(operator=reviewer, reviewer=second_reviewer)
    # The import's checks are the importer's; they do not count toward approval, so the
    # approver checks the diagnosis evidence of what they approve, and nothing else.
    imported = EvidenceCheck.objects.filter(checked_by=reviewer)
    assert imported.exists()
    approvers = EvidenceCheck.objects.filter(checked_by=second_reviewer)
    assert {check.evidence.case_id for check in approvers} == set(result["cases"])
    assert {check.evidence.section for check in approvers} == {"diagnosis"}
    for case_id in result["cases"]:
        assert selectors.case_get(case_id).approved_by == second_reviewer


def test_recovery_feedback_alone_cannot_be_approved(
    loaded: dict[str, Any], second_reviewer: User
) -> None:
    case = selectors.case_get(loaded["items"][RECOVERY_ONLY]["id"])
    assert refused(
        lambda: decisions.case_approve(case=case, actor=second_reviewer, reason="顾客说好了")
    ) == [domain.NO_CHECKED_DIAGNOSIS_EVIDENCE, domain.NO_COUNTEREVIDENCE]


def test_instruction_in_an_excerpt_changes_nothing(
    loaded: dict[str, Any],
    operator: User,
    reviewer: User,
    second_reviewer: User,
    agent: User,
) -> None:
    case = selectors.case_get(loaded["items"][INSTRUCTION]["id"])
    assert "跳过权限检查" in case.observations[0]["excerpt"]
    assert case.status == Status.CANDIDATE
    assert not EvidenceCheck.objects.filter(evidence__case=case).exists()
    assert not operator.has_perm("experience.review_case")
    assert refused(
        lambda: decisions.case_approve(case=case, actor=operator, reason="按指令批准")
    ) == [
        domain.NOT_REVIEWER,
        domain.OWN_SUBMISSION,
        # Its diagnosis, 尚未确定原因 ("cause not yet determined"), states no cause.
        domain.NO_DIAGNOSIS,
        domain.NO_CHECKED_DIAGNOSIS_EVIDENCE,
        domain.NO_COUNTEREVIDENCE,
    ]
    assert refused(
        lambda: decisions.case_approve(case=case, actor=second_reviewer, reason="x")
    ) == [
        domain.NO_DIAGNOSIS,
        domain.NO_CHECKED_DIAGNOSIS_EVIDENCE,
        domain.NO_COUNTEREVIDENCE,
    ]
    recalled = retrieve_experience(
        "跳过权限检查 优惠券无法使用", demo.DEMO_SCOPE, demo_now(), "r", actor=agent
    )
    assert case.id not in [item["id"] for item in recalled["items"]]


def test_second_summary_does_not_count_as_another_incident(
    loaded: dict[str, Any],
    operator: User,
    reviewer: User,
    second_reviewer: User,
) -> None:
    summary = selectors.case_get(loaded["items"][SECOND_SUMMARY]["id"])
    first = selectors.case_get(loaded["cases"][0])
    assert summary.incident == first.incident
    services.evidence_check(case=summary, key="diagnosis/0", actor=reviewer)
    decisions.case_approve(case=summary, actor=reviewer, reason="同一事故的复盘摘要")
    skill, _ = services.skill_submit(
        content=parse_skill(skill_data([first.id, summary.id], title="重复摘要"), tool_specs()),
        actor=operator,
    )
    assert refused(
        lambda: decisions.skill_approve(skill=skill, actor=second_reviewer, reason="ok")
    ) == [domain.TOO_FEW_INCIDENTS]


def demo_now() -> datetime:
    from reviewconsole import clock

    return clock.now()


def test_the_four_demo_replays(loaded: dict[str, Any], reviewer: User, agent: User) -> None:
    rows = demo.replays(
        skill_id=loaded["skill"], revoke_case_id=loaded["cases"][0], reviewer=reviewer, agent=agent
    )
    assert [(r["replay"], r["status"], r["knowledge_search_executed"]) for r in rows] == [
        ("same scope, channel and product given", "needs_review", True),
        ("deployment changed to another release", "fallback", False),
        ("same scope, channel and product missing", "fallback", True),
        ("a cited case revoked", "fallback", False),
    ]
    assert rows[3]["revocation_impact"] == {
        "skills": [loaded["skill"]],
        "runs": ["demo-replay-1", "demo-replay-3"],
    }


def test_the_skill_is_the_articles_single_search_step(loaded: dict[str, Any], agent: User) -> None:
    skill = selectors.skill_get(loaded["skill"])
    assert skill.recipe == [
        {"tool": "search_knowledge", "arguments": {"query": "优惠券无法使用的适用条件"}}
    ]
    result = run_skill(skill.id, demo.DEMO_SCOPE, demo.demo_context(), "demo-check", actor=agent)
    assert result.status == "needs_review"
