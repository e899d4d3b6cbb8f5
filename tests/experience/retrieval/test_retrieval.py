"""``retrieve_experience``: the exact-scope gate, time, revocation and references."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User

from experience.cases import selectors
from experience.cases.models import Case, Skill
from experience.index import postings
from experience.lessons import selectors as lesson_selectors
from experience.pages.selectors import QueueFilters, review_queue_rows
from experience.retrieval import pipeline
from experience.retrieval import service as retrieval
from experience.retrieval.block import experience_context
from experience.retrieval.service import retrieve_experience
from experience.review import decisions, revocation
from experience.runs.models import Reference
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.permissions import NOT_PERMITTED
from tests.experience.conftest import NOW, QUERY, SCOPE, approve_checked, case_data

pytestmark = pytest.mark.django_db


def ids(result: dict[str, Any]) -> list[str]:
    return [item["id"] for item in result["items"]]


@pytest.mark.parametrize("name", ["tenant", "brand", "store", "campaign", "deployment"])
def test_missing_scope_falls_back_without_guessing(
    name: str, approved_case: Callable[..., Case], agent: User
) -> None:
    approved_case()
    result = retrieve_experience(QUERY, {**SCOPE, name: None}, NOW, "run-1", actor=agent)
    assert result == {"status": "fallback", "missing": [name], "items": []}
    assert not Reference.objects.exists()


def test_candidates_are_invisible(submit_case: Callable[..., Case], agent: User) -> None:
    submit_case()
    assert retrieve_experience(QUERY, SCOPE, NOW, "run-1", actor=agent) == {
        "status": "ok",
        "missing": [],
        "items": [],
    }


def test_approved_case_is_returned_and_referenced(
    approved_case: Callable[..., Case], agent: User
) -> None:
    case = approved_case()
    result = retrieve_experience("优惠券用不了", SCOPE, NOW, "run-1", actor=agent)
    assert [{k: item[k] for k in ("id", "type", "title")} for item in result["items"]] == [
        {"id": case.id, "type": "case", "title": case.title}
    ]
    # One incident, confirmed at approval: the Wilson lower bound of 1 of 1 (z = 1), no decay.
    assert (result["items"][0]["confidence"], result["items"][0]["conflict"]) == (0.5, False)
    reference = Reference.objects.get()
    assert (reference.run_id, reference.item_id, reference.item_type, reference.read_at) == (
        "run-1",
        case.id,
        "case",
        NOW,
    )


@pytest.mark.parametrize("name", ["tenant", "brand", "store", "campaign", "deployment"])
def test_every_scope_field_must_match_exactly(
    name: str, approved_case: Callable[..., Case], agent: User
) -> None:
    approved_case()
    assert (
        retrieve_experience(QUERY, {**SCOPE, name: "other-value"}, NOW, "run-1", actor=agent)[
            "items"
        ]
        == []
    )


def test_approved_after_now_is_not_returned(
    approved_case: Callable[..., Case], agent: User
) -> None:
    case = approved_case()
    assert case.approved_at == NOW
    assert (
        retrieve_experience(QUERY, SCOPE, NOW - timedelta(seconds=1), "r", actor=agent)["items"]
        == []
    )
    assert ids(retrieve_experience(QUERY, SCOPE, NOW, "r", actor=agent)) == [case.id]


def test_validity_window_is_half_open(approved_case: Callable[..., Case], agent: User) -> None:
    case = approved_case()
    assert ids(
        retrieve_experience(QUERY, SCOPE, case.valid_to - timedelta(seconds=1), "r", actor=agent)
    ) == [case.id]
    assert retrieve_experience(QUERY, SCOPE, case.valid_to, "r", actor=agent)["items"] == []


def test_revoked_item_stays_closed_for_an_earlier_now(
    approved_case: Callable[..., Case],
    second_reviewer: User,
    frozen_clock: Callable[[datetime], Any],
    agent: User,
) -> None:
    case = approved_case()
    frozen_clock(NOW + timedelta(days=3))
    revocation.case_revoke(case=case, actor=second_reviewer, reason="诊断有误")
    # A check time before the revocation does not reopen it: revocation is current state.
    assert (
        retrieve_experience(QUERY, SCOPE, NOW + timedelta(days=1), "r", actor=agent)["items"] == []
    )


def test_rejected_and_superseded_are_invisible(
    submit_case: Callable[..., Case],
    approved_case: Callable[..., Case],
    second_reviewer: User,
    agent: User,
) -> None:
    rejected = submit_case(case_data(incident="INC-5"))
    decisions.case_reject(case=rejected, actor=second_reviewer, reason="no")
    old = approved_case()
    new = submit_case(case_data(supersedes=old.id))
    approve_checked(new, actor=second_reviewer, reason="更正")
    assert ids(retrieve_experience(QUERY, SCOPE, NOW, "r", actor=agent)) == [new.id]


def test_skill_is_returned_only_while_available(
    approved_skill: Callable[..., Skill], second_reviewer: User, agent: User
) -> None:
    skill = approved_skill()
    result = retrieve_experience("优惠券无法使用 适用条件", SCOPE, NOW, "r", limit=5, actor=agent)
    assert skill.id in ids(result)
    assert {"id": skill.id, "type": "skill", "title": skill.title} in [
        {k: item[k] for k in ("id", "type", "title")} for item in result["items"]
    ]
    case = skill.cases.first()
    assert case is not None
    revocation.case_revoke(case=case, actor=second_reviewer, reason="错误")
    assert skill.id not in ids(
        retrieve_experience("优惠券无法使用 适用条件", SCOPE, NOW, "r", limit=5, actor=agent)
    )


@pytest.mark.parametrize("from_texts", [False, True])
def test_a_returned_skills_cited_cases_are_read_once_and_score_it_as_the_tables_do(
    approved_skill: Callable[..., Skill],
    agent: User,
    monkeypatch: pytest.MonkeyPatch,
    from_texts: bool,
) -> None:
    """The ranking reads a skill's cited cases to decide whether it may be returned; its
    confidence is worked out from those rows, equal to the console's read from the tables."""
    skill = approved_skill()
    if from_texts:
        monkeypatch.setattr(postings, "scope_read", lambda scope, query: postings.STALE)
    reads: list[list[str]] = []
    read_rows = lesson_selectors.skill_evidence_rows

    def counted(skill_ids: list[str]) -> list[tuple[Any, ...]]:
        reads.append(list(skill_ids))
        return read_rows(skill_ids)

    monkeypatch.setattr(pipeline, "skill_evidence_rows", counted)
    monkeypatch.setattr(lesson_selectors, "skill_evidence_rows", counted)
    query = "优惠券无法使用 适用条件"
    retrieved = retrieve_experience(query, SCOPE, NOW, "r-1", limit=5, actor=agent)
    block = experience_context(query, SCOPE, NOW, "r-2", 2_000, actor=agent)
    assert reads == [[skill.id], [skill.id]]  # once by each call, to rank it
    monkeypatch.undo()
    expected = lesson_selectors.item_confidences([], [skill.id], NOW)[skill.id]
    (item,) = [item for item in retrieved["items"] if item["id"] == skill.id]
    assert (item["confidence"], item["why"]) == (expected.value, expected.why())
    assert {"id": skill.id, "type": "skill", "confidence": expected.value} in block["items"]


def test_limit_and_ranking(approved_case: Callable[..., Case], agent: User) -> None:
    printer = approved_case(incident="INC-P", title="小票打印机断电", summary="", observations=[])
    coupon = approved_case(incident="INC-C", title="优惠券无法使用")
    approved_case(incident="INC-D", title="优惠券核销失败")
    result = retrieve_experience("优惠券无法使用", SCOPE, NOW, "run-9", limit=1, actor=agent)
    assert ids(result) == [coupon.id]
    assert printer.id not in ids(
        retrieve_experience("优惠券无法使用", SCOPE, NOW, "r", limit=3, actor=agent)
    )
    assert list(Reference.objects.filter(run_id="run-9").values_list("item_id", flat=True)) == [
        coupon.id
    ]


def test_bad_arguments_name_the_field(approved_case: Callable[..., Case], agent: User) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"limit": 0}, "limit"),
        ({"run_id": ""}, "run_id"),
        ({"query": ""}, "query"),
    ]
    for kwargs, field in cases:
        call: dict[str, Any] = {"query": QUERY, "run_id": "r", "limit": 3}
        call.update(kwargs)
        with pytest.raises(ValidationFailure) as failure:
            retrieve_experience(
                call["query"], SCOPE, NOW, call["run_id"], call["limit"], actor=agent
            )
        assert failure.value.field == field


def test_actor_needs_the_use_permission(
    approved_case: Callable[..., Case], agent: User, operator: User
) -> None:
    approved_case()
    assert retrieve_experience(QUERY, SCOPE, NOW, "r", actor=agent)["status"] == "ok"
    with pytest.raises(PermissionRefused) as refused:
        retrieve_experience(QUERY, SCOPE, NOW, "r-op", actor=operator)
    assert (refused.value.message, refused.value.unmet) == (retrieval.USE_REFUSED, NOT_PERMITTED)
    assert not Reference.objects.filter(run_id="r-op").exists()


def test_an_agent_of_another_tenant_is_refused_by_the_service_itself(
    approved_case: Callable[..., Case], agent: User
) -> None:
    """Not only the API checks the tenant: every caller of the service meets the same rule."""
    from reviewconsole.models import TenantMembership
    from reviewconsole.tenancy import NOT_IN_TENANT

    approved_case()
    TenantMembership.objects.create(user=agent, tenant="another-tenant")
    with pytest.raises(PermissionRefused) as refused:
        retrieve_experience(QUERY, SCOPE, NOW, "r-other", actor=agent)
    assert refused.value.unmet == NOT_IN_TENANT
    assert not Reference.objects.filter(run_id="r-other").exists()


def test_a_read_without_an_actor_is_refused_not_unchecked(
    approved_case: Callable[..., Case],
) -> None:
    """There is no unchecked path: no actor is a programming error, an empty one a refusal."""
    approved_case()
    with pytest.raises(TypeError):
        retrieve_experience(QUERY, SCOPE, NOW, "r")  # type: ignore[call-arg]
    for nobody in (None, AnonymousUser()):
        with pytest.raises(PermissionRefused):
            retrieve_experience(QUERY, SCOPE, NOW, "r", actor=nobody)  # type: ignore[arg-type]
    assert not Reference.objects.exists()


def test_the_review_queue_filters_candidates_by_store(submit_case: Callable[..., Case]) -> None:
    """The queue page's one selector (the earlier Case-only copy is gone)."""
    case = submit_case()

    def queued(store: str) -> list[str]:
        rows = review_queue_rows(QueueFilters(store=store), now=NOW)
        return [row["id"] for row in rows]

    assert queued("store-002") == [case.id]
    assert queued("store-009") == []
    assert not hasattr(selectors, "review_queue")
