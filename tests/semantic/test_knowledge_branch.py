"""The vector branch of ``search_knowledge``: after the gate, fused by RRF, never an error.

The plumbing is tested with a deterministic embedder (``fakes.Concepts``); the real local model
and its calibration in ``test_abstention``.
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings

from agentapi.services import token_create
from experience.review.documents import document_revoke
from knowledge.models import Document
from knowledge.search import KnowledgeContext, search_knowledge
from knowledge.services import documents_import
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from semantic.branch import caches_cleared
from semantic.models import ItemVector, ScopeVectors
from tests.helpers import tenants_exist
from tests.knowledge.conftest import document
from tests.semantic import fakes

CONCEPTS = "tests.semantic.fakes.concepts"
DUMMY_TASKS = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
AT = datetime.fromisoformat("2026-10-01T12:00:00+08:00")

THRESHOLD_RULE = document(
    doc_key="rule-threshold",
    title="活动X满减规则",
    text="满50元减10元，起用金额以活动商品计。",
)
CHANNEL_RULE = document(
    doc_key="rule-channel", title="活动X渠道限制", text="活动X的优惠券仅限小程序下单使用。"
)


@pytest.fixture
def searcher(db: None) -> User:
    tenants_exist(settings.DEMO_TENANT)
    return user_set_role(username="sam-agent", role=Role.AGENT, tenants=[settings.DEMO_TENANT])


def search(query: str, actor: User, **overrides: Any) -> dict[str, Any]:
    context = KnowledgeContext(
        tenant=settings.DEMO_TENANT,
        brand=settings.DEMO_BRAND,
        store="store-100",
        campaign="campaign-x",
        occurred_at=AT,
        known_at=AT,
        facts={},
        limit=overrides.pop("limit", 4),
    )
    return search_knowledge(query, context, actor=actor)


def ids(result: dict[str, Any]) -> list[str]:
    return [item["id"] for item in result["evidence"]]


def found_by(result: dict[str, Any]) -> dict[str, list[str]]:
    return {item["id"]: item["found_by"] for item in result["evidence"]}


def load(operator: User, *documents: dict[str, Any]) -> None:
    documents_import(items=list(documents), actor=operator)


@pytest.fixture
def concepts(settings: Any) -> None:
    settings.SEMANTIC_EMBEDDER = CONCEPTS


def test_an_approval_packs_the_scope_and_a_paraphrase_is_found_by_the_vector_branch(
    concepts: None, operator: User, searcher: User
) -> None:
    load(operator, THRESHOLD_RULE, CHANNEL_RULE)

    (packed,) = ScopeVectors.objects.all()
    assert packed.model == fakes.Concepts.name and not packed.dirty
    assert ItemVector.objects.filter(space="knowledge").count() == 2
    # "threshold" shares no token with the rule, only its concept.
    result = search("threshold 提高了吗", searcher)

    assert result["semantic"] == "used"
    assert ids(result) == ["doc:rule-threshold@1"]
    assert found_by(result) == {"doc:rule-threshold@1": ["vector"]}
    with override_settings(SEMANTIC_EMBEDDER="off"):
        lexical = search("threshold 提高了吗", searcher)
    assert lexical["status"] == "no_match" and "semantic" not in lexical


def test_the_branches_are_fused_by_reciprocal_rank(
    concepts: None, operator: User, searcher: User
) -> None:
    # Both rules share the token 活动 with the query; only the threshold rule its concept.
    load(operator, THRESHOLD_RULE, CHANNEL_RULE)

    result = search("活动 threshold", searcher)

    # The channel rule's title and text are shorter, so it ranks first lexically; the
    # threshold rule adds the vector branch's 1/61 and overtakes it.
    with override_settings(SEMANTIC_EMBEDDER="off"):
        lexical = search("活动 threshold", searcher)
    assert ids(lexical) == ["doc:rule-channel@1", "doc:rule-threshold@1"]
    assert ids(result) == ["doc:rule-threshold@1", "doc:rule-channel@1"]
    assert found_by(result) == {
        "doc:rule-threshold@1": ["raw", "expanded", "vector"],
        "doc:rule-channel@1": ["raw", "expanded"],
    }


def test_a_revoked_document_is_never_returned_though_its_vector_is_still_packed(
    concepts: None, operator: User, searcher: User, settings: Any
) -> None:
    load(operator, THRESHOLD_RULE, CHANNEL_RULE)
    settings.TASKS = DUMMY_TASKS  # the repacking after the revocation has not run yet
    document_revoke(
        document=Document.objects.get(doc_key="rule-threshold"),
        actor=operator,
        reason="the threshold changed",
    )

    assert ScopeVectors.objects.get().dirty
    result = search("threshold 提高了吗", searcher)

    assert result["status"] == "no_match"


def test_a_document_not_yet_embedded_is_ranked_by_its_words_and_the_answer_says_so(
    concepts: None, operator: User, searcher: User, settings: Any
) -> None:
    load(operator, THRESHOLD_RULE)
    settings.TASKS = DUMMY_TASKS  # the worker has not packed the new version yet
    load(operator, CHANNEL_RULE)

    result = search("小程序 threshold", searcher)

    assert result["semantic"] == "partial"
    assert found_by(result) == {
        "doc:rule-channel@1": ["raw", "expanded"],
        "doc:rule-threshold@1": ["vector"],
    }


# Shares the bigram 说明 with "门槛说明" but not its concept (积分/会员 are the points concept).
WORDS_ONLY = document(doc_key="rule-points", title="会员积分说明", text="积分说明见会员页。")
# Shares no bigram with "门槛说明", only the threshold concept (起用金额).
MEANING_ONLY = document(doc_key="rule-minimum", title="起用金额调整", text="起用金额调整为三十元。")
# The threshold concept and the delivery concept: cosine 0.71 to a query of the first alone.
HALF_MEANING = document(
    doc_key="rule-mixed", title="起用金额与配送", text="起用金额与配送费分开计。"
)


@pytest.mark.parametrize(("votes", "first"), [(1, "doc:rule-points@1"), (3, "doc:rule-minimum@1")])
def test_the_vector_branch_counts_its_votes_in_the_fused_score(
    concepts: None, operator: User, searcher: User, settings: Any, votes: int, first: str
) -> None:
    """One document ranked first by both lexical branches (2/61), one ranked first by meaning
    alone (votes/61): the vector branch's votes decide which leads."""
    load(operator, WORDS_ONLY, MEANING_ONLY)
    settings.SEMANTIC_VOTES = votes

    result = search("门槛说明", searcher)

    assert ids(result)[0] == first
    assert found_by(result) == {
        "doc:rule-points@1": ["raw", "expanded"],
        "doc:rule-minimum@1": ["vector"],
    }


@pytest.mark.parametrize(("floor", "returned"), [(1e9, []), (1.0, ["doc:rule-minimum@1"])])
def test_an_item_found_by_meaning_alone_is_returned_only_when_its_significance_exceeds_the_floor(
    concepts: None,
    operator: User,
    searcher: User,
    settings: Any,
    floor: float,
    returned: list[str],
) -> None:
    """The fake model has no fitted curve: its floor is SEMANTIC_SIGNIFICANCE. Above every
    significance the document shares only meaning with the query, and nothing is returned."""
    load(operator, MEANING_ONLY)
    settings.SEMANTIC_SIGNIFICANCE = floor

    result = search("threshold", searcher)

    assert ids(result) == returned
    assert result["status"] == ("no_match" if not returned else "retrieved")
    assert result["semantic"] == "used"


def test_every_item_says_its_relevance_and_the_similarity_where_meaning_scored_it(
    concepts: None, operator: User, searcher: User
) -> None:
    load(operator, THRESHOLD_RULE, CHANNEL_RULE)

    result = search("小程序 threshold", searcher)

    by_id = {item["id"]: item for item in result["evidence"]}
    for item in by_id.values():
        assert 0.0 <= item["relevance"] <= 1.0
        assert -1.0 <= item["similarity"] <= 1.0
    # The threshold rule is the query's concept exactly (cosine 1 in the fake model).
    assert by_id["doc:rule-threshold@1"]["similarity"] == 1.0
    with override_settings(SEMANTIC_EMBEDDER="off"):
        lexical = search("小程序 threshold", searcher)
    (channel,) = lexical["evidence"]
    assert "similarity" not in channel
    assert 0.0 < channel["relevance"] <= 1.0


@pytest.mark.parametrize("broken", ["tests.semantic.fakes.failing", "tests.semantic.fakes.hanging"])
def test_a_failing_or_hanging_embedder_leaves_the_lexical_answer(
    concepts: None, operator: User, searcher: User, settings: Any, broken: str
) -> None:
    load(operator, THRESHOLD_RULE, CHANNEL_RULE)
    with override_settings(SEMANTIC_EMBEDDER="off"):
        lexical = search("小程序 threshold", searcher)
    settings.SEMANTIC_EMBEDDER = broken
    settings.SEMANTIC_QUERY_TIMEOUT = 0.2
    caches_cleared()
    fakes.RELEASE.clear()
    try:
        result = search("小程序 threshold", searcher)
    finally:
        fakes.RELEASE.set()  # let the hung call end

    assert result["semantic"] == "unavailable"
    assert {k: v for k, v in result.items() if k != "semantic"} == lexical


def test_vectors_of_another_model_are_never_compared_until_reembedded(
    concepts: None, operator: User, searcher: User, settings: Any
) -> None:
    load(operator, THRESHOLD_RULE, CHANNEL_RULE)
    settings.SEMANTIC_EMBEDDER = "tests.semantic.fakes.other_model"

    before = search("threshold 提高了吗", searcher)
    call_command("reembed", "--wait", "--json", stdout=open_null(), stderr=open_null())
    after = search("threshold 提高了吗", searcher)

    assert before["semantic"] == "not_indexed" and before["status"] == "no_match"
    assert after["semantic"] == "used" and ids(after) == ["doc:rule-threshold@1"]
    assert set(ItemVector.objects.values_list("model", flat=True)) == {
        fakes.Concepts.name,
        fakes.OtherModel.name,
    }


def test_an_unchanged_text_is_embedded_once_however_many_scopes_list_it(
    operator: User, searcher: User, settings: Any
) -> None:
    settings.SEMANTIC_EMBEDDER = CONCEPTS
    load(operator, document(doc_key="rule-wide", stores=["store-100", "store-101", "store-102"]))

    assert ScopeVectors.objects.filter(dirty=False).count() == 3
    assert ItemVector.objects.filter(space="knowledge").count() == 1


def open_null() -> Any:
    return io.StringIO()


def test_the_console_preview_says_which_branch_found_each_document(
    concepts: None, operator: User, client: Any
) -> None:
    load(operator, THRESHOLD_RULE, CHANNEL_RULE)
    client.force_login(operator)

    page = client.get(
        "/knowledge/search/",
        {
            "query": "小程序 threshold",
            "tenant": settings.DEMO_TENANT,
            "brand": settings.DEMO_BRAND,
            "store": "store-100",
            "campaign": "campaign-x",
            "occurred_at": "2026-10-01T12:00:00",
            "known_at": "2026-10-01T12:00:00",
            "timezone": "Asia/Shanghai",
            "limit": 4,
        },
    ).content.decode()

    assert "Searched by words and by meaning." in page
    threshold = page[page.index("活动X满减规则") :]
    channel = page[page.index("活动X渠道限制") :]
    found_threshold = threshold[threshold.index('class="found-by"') :].split("</p>")[0]
    found_channel = channel[channel.index('class="found-by"') :].split("</p>")[0]
    assert "meaning" in found_threshold and "its words" not in found_threshold
    assert "its words" in found_channel and "meaning" not in found_channel


def test_the_api_says_what_the_vector_branch_did_and_which_branch_found_each_document(
    concepts: None, operator: User, searcher: User
) -> None:
    load(operator, THRESHOLD_RULE, CHANNEL_RULE)
    token = token_create(user=searcher, name="semantic")
    body = {
        "query": "小程序 threshold",
        "tenant": settings.DEMO_TENANT,
        "brand": settings.DEMO_BRAND,
        "store": "store-100",
        "campaign": "campaign-x",
        "occurred_at": "2026-10-01T12:00:00+08:00",
        "known_at": "2026-10-01T12:00:00+08:00",
    }

    answer = Client().post(
        "/api/v1/knowledge/search",
        body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token.text}"},
    )

    assert answer.status_code == 200, answer.content
    result = answer.json()
    assert result["semantic"] == "used"
    assert found_by(result) == {
        "doc:rule-channel@1": ["raw", "expanded"],
        "doc:rule-threshold@1": ["vector"],
    }
