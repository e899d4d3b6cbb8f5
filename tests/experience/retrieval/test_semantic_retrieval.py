"""The vector branch of ``retrieve_experience`` and the context block: after the gate, fused by
RRF with the lexical branches, and never an error (plumbing tested with a deterministic
embedder, ``tests.semantic.fakes``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from experience.cases.models import Case
from experience.retrieval.block import experience_context
from experience.retrieval.service import retrieve_experience
from experience.review.revocation import case_revoke
from semantic.branch import caches_cleared
from semantic.models import ScopeVectors
from tests.experience.conftest import NOW, SCOPE, case_data
from tests.semantic import fakes

CONCEPTS = "tests.semantic.fakes.concepts"
DUMMY_TASKS = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
# No token of either lexical branch in common with the delivery case; its concept only.
QUERY = "delivery 为啥不行"


def delivery_case() -> dict[str, Any]:
    return case_data(
        incident="INC-DELIVERY",
        title="外卖订单优惠券无法使用：配送渠道未参加活动",
        summary="顾客在外卖平台下单，券无法抵扣。",
        observations=[{"source_id": "thread:2#m1", "excerpt": "顾客：外卖下单券抵扣失败。"}],
        diagnosis={
            "statement": "活动渠道列表不含配送渠道。",
            "evidence": [
                {
                    "source_id": "thread:2#m4",
                    "excerpt": "运营：渠道列表没有配送。",
                    "verified": True,
                }
            ],
        },
    )


@pytest.fixture
def cases(settings: Any, approved_case: Callable[..., Case]) -> tuple[Case, Case]:
    settings.SEMANTIC_EMBEDDER = CONCEPTS
    store_case = approved_case()
    return store_case, approved_case(**delivery_case())


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]


def test_a_case_phrased_otherwise_is_retrieved_by_the_vector_branch(
    cases: tuple[Case, Case], agent: User
) -> None:
    _, delivery = cases
    assert ScopeVectors.objects.filter(space="experience", dirty=False).count() == 1

    result = retrieve_experience(QUERY, SCOPE, NOW, "run-v1", actor=agent)
    with override_settings(SEMANTIC_EMBEDDER="off"):
        lexical = retrieve_experience(QUERY, SCOPE, NOW, "run-v2", actor=agent)

    assert result["semantic"] == "used"
    assert ids(result["items"]) == [delivery.id]
    assert result["items"][0]["found_by"] == ["vector"]
    assert "confidence" in result["items"][0]
    assert delivery.id not in ids(lexical["items"]) and "semantic" not in lexical


def test_the_context_block_holds_what_the_vector_branch_found(
    cases: tuple[Case, Case], agent: User
) -> None:
    _, delivery = cases

    block = experience_context(QUERY, SCOPE, NOW, "run-c1", 500, actor=agent)

    assert block["semantic"] == "used"
    assert delivery.id in [item["id"] for item in block["items"]]
    assert delivery.title in block["block"]


def test_a_revoked_case_is_never_retrieved_though_its_vector_is_still_packed(
    cases: tuple[Case, Case], agent: User, second_reviewer: User, settings: Any
) -> None:
    _, delivery = cases
    settings.TASKS = DUMMY_TASKS
    case_revoke(case=delivery, actor=second_reviewer, reason="wrong channel")

    result = retrieve_experience(QUERY, SCOPE, NOW, "run-v3", actor=agent)

    assert delivery.id not in ids(result["items"])


@pytest.mark.parametrize("broken", ["tests.semantic.fakes.failing", "tests.semantic.fakes.hanging"])
def test_a_failing_or_hanging_embedder_leaves_the_lexical_answer(
    cases: tuple[Case, Case], agent: User, settings: Any, broken: str
) -> None:
    query = "二号店 delivery 优惠券"
    with override_settings(SEMANTIC_EMBEDDER="off"):
        lexical = retrieve_experience(query, SCOPE, NOW, "run-l", actor=agent)
    settings.SEMANTIC_EMBEDDER = broken
    settings.SEMANTIC_QUERY_TIMEOUT = 0.2
    caches_cleared()
    fakes.RELEASE.clear()
    try:
        result = retrieve_experience(query, SCOPE, NOW, "run-b", actor=agent)
    finally:
        fakes.RELEASE.set()

    assert result["semantic"] == "unavailable"
    assert result["items"] == lexical["items"]


def test_a_candidate_saying_the_same_in_other_words_is_proposed_as_a_near_duplicate(
    cases: tuple[Case, Case], submit_case: Callable[..., Case], reviewer: User, client: Any
) -> None:
    from curation.models import NearDuplicate

    _, delivery = cases
    # No shingle in common with the approved delivery case; the same concept (配送 / delivery).
    candidate = submit_case(
        case_data(
            incident="INC-DELIVERY-2",
            title="delivery order coupon rejected",
            summary="customer ordered via delivery app",
            observations=[{"source_id": "thread:3#m1", "excerpt": "customer: delivery coupon no"}],
            diagnosis={
                "statement": "delivery channel missing",
                "evidence": [{"source_id": "thread:3#m2", "excerpt": "ops: delivery missing"}],
            },
        )
    )

    (link,) = NearDuplicate.objects.filter(found_by="meaning")
    assert {link.case_a_id, link.case_b_id} == {candidate.id, delivery.id}
    assert link.similarity >= 0.92
    assert not NearDuplicate.objects.filter(found_by="words").exists()
    client.force_login(reviewer)
    page = client.get("/curation/similar/").content.decode()
    assert "in meaning" in page


def test_no_semantic_near_duplicate_while_the_branch_is_off(
    approved_case: Callable[..., Case], submit_case: Callable[..., Case]
) -> None:
    from curation.models import NearDuplicate

    approved_case(**delivery_case())
    submit_case(case_data(incident="INC-D3", title="delivery order coupon rejected"))

    assert not NearDuplicate.objects.filter(found_by="meaning").exists()


def test_an_agent_retrieves_the_case_through_the_api_and_mcp_by_meaning(
    cases: tuple[Case, Case], agent: User, at_now: Any
) -> None:
    """The ticket shares no word with the delivery case: over HTTP and over MCP the agent gets
    it, found by the vector branch, and each read is recorded under the caller's run."""
    from asgiref.sync import async_to_sync
    from mcp import Client as McpClient

    from agentapi.mcp_server import build_server
    from agentapi.services import token_create
    from experience.runs.models import Reference
    from tests.api.conftest import BearerClient

    _, delivery = cases
    token = token_create(user=agent, name="semantic").text
    body = {"query": QUERY, "scope": dict(SCOPE), "run_id": "run-http"}

    response = BearerClient(token).post_json("/api/v1/experience/retrieve", body)

    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["semantic"] == "used"
    assert [(i["id"], i["found_by"]) for i in answer["items"]] == [(delivery.id, ["vector"])]

    async def over_mcp() -> Any:
        async with McpClient(build_server(token, manage_connections=False)) as client:
            return await client.call_tool("retrieve_experience", {**body, "run_id": "run-mcp"})

    result = async_to_sync(over_mcp)()
    assert not result.is_error
    items = result.structured_content["items"]
    assert [(i["id"], i["found_by"]) for i in items] == [(delivery.id, ["vector"])]
    read = Reference.objects.filter(item_id=delivery.id).values_list("run_id", flat=True)
    assert set(read) == {"run-http", "run-mcp"}


def delivery_lesson(supports: list[str], **changes: Any) -> dict[str, Any]:
    from tests.experience.lessons.test_lessons import lesson_data

    data = lesson_data(
        supports,
        scene={"tags": ["外卖"], "description": "外卖订单用券失败"},
        precondition="顾客在外卖平台下单",
        conclusion="先核对活动渠道是否包含配送",
    )
    data.update(changes)
    return data


def test_a_lesson_saying_the_same_in_other_words_is_proposed_as_a_merge_of_its_type(
    cases: tuple[Case, Case], reviewer: User, second_reviewer: User
) -> None:
    """However a candidate lesson arrives (here submitted by a reviewer, not drafted), one that
    says an approved lesson of its type and scope in other words (no shingle in common, the same
    concept) is proposed as a merge; one of another type is not; nothing is merged."""
    from experience.lessons.models import Lesson, LessonMergeProposal
    from experience.lessons.schema import parse_lesson
    from experience.lessons.selectors import MEANING, merge_proposals
    from experience.lessons.services import lesson_submit
    from experience.review.decisions import lesson_approve

    supports = [case.id for case in cases]

    def approved(data: dict[str, Any]) -> Lesson:
        lesson, _ = lesson_submit(content=parse_lesson(data), actor=reviewer)
        lesson_approve(lesson=lesson, actor=second_reviewer, reason="two incidents")
        return Lesson.objects.get(pk=lesson.pk)

    failure = approved(delivery_lesson(supports))
    success = approved(
        delivery_lesson(supports, lesson_type="success_pattern", conclusion="配送渠道补上后可用")
    )
    english = delivery_lesson(
        supports,
        scene={"tags": ["delivery"], "description": "delivery order coupon fails"},
        precondition="ordered through a delivery app",
        conclusion="check the delivery channel list before anything else",
    )

    candidate, _ = lesson_submit(content=parse_lesson(english), actor=reviewer)

    proposed = LessonMergeProposal.objects.filter(candidate=candidate)
    assert [p.target_id for p in proposed] == [failure.id]
    assert proposed[0].similarity >= 0.92
    assert [(p.target, p.found_by) for p in merge_proposals(candidate)] == [(failure.id, MEANING)]
    assert success.id not in {p.target for p in merge_proposals(candidate)}
    candidate.refresh_from_db()
    assert candidate.status == "candidate"
