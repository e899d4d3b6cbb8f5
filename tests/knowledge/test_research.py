"""The two demo searches through ``research --json``, plus the gate's and ranking's boundaries."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from knowledge.domain import HISTORICAL_CASE_PREFIX
from knowledge.services import documents_import, synonym_set
from tests.helpers import run_json
from tests.knowledge.conftest import document

TICKET = "两杯水果茶，优惠券用不了"
AT = "2026-09-18T14:00:00+08:00"
KNOWN = "2026-09-18T14:10:00+08:00"
FULL_FACTS = ("--channel", "miniapp", "--product", "fruit-tea", "--basket-cents", "3200")

pytestmark = pytest.mark.django_db


def research(*args: str, query: str = TICKET, at: str = AT, known: str = KNOWN) -> dict[str, Any]:
    status, result = run_json("research", query, "--at", at, "--known-at", known, *args)
    assert status == 0, result
    return result


def ids(result: dict[str, Any]) -> list[str]:
    return [item["id"] for item in result["evidence"]]


def by_id(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in result["evidence"]}


# --- the five knowledge replays of the coupon article -------------------------------------


def test_store_a_campaign_a_rule_and_case_mismatch_on_product(knowledge_base: None) -> None:
    result = research("--campaign", "campaign-a", "--store", "store-001", *FULL_FACTS)

    assert result["status"] == "retrieved"
    items = by_id(result)
    assert set(items) == {"doc:rule-a@2", "doc:case-a@1"}
    assert items["doc:rule-a@2"]["kind"] == "rule"
    assert items["doc:case-a@1"]["kind"] == "case"
    for item in items.values():
        assert item["conditions"]["status"] == "mismatch"
        assert "product" in item["conditions"]["mismatches"]
    assert items["doc:case-a@1"]["quote"].startswith(HISTORICAL_CASE_PREFIX)
    assert not items["doc:rule-a@2"]["quote"].startswith(HISTORICAL_CASE_PREFIX)


def test_store_b_campaign_b_rule_matches(knowledge_base: None) -> None:
    result = research("--campaign", "campaign-b", "--store", "store-002", *FULL_FACTS)

    assert result["status"] == "retrieved"
    rule = by_id(result)["doc:rule-b@1"]
    assert rule["conditions"] == {"status": "match", "mismatches": [], "unknown": []}
    assert rule["conflict"] is False
    assert rule["source"] == "fixture://knowledge/rule-b"


def test_store_a_without_product_needs_context(knowledge_base: None) -> None:
    result = research(
        "--campaign",
        "campaign-a",
        "--store",
        "store-001",
        "--channel",
        "miniapp",
        "--basket-cents",
        "3200",
    )

    assert result["status"] == "needs_context"
    assert result["missing"] == ["product"]
    assert by_id(result)["doc:rule-a@2"]["conditions"]["unknown"] == ["product"]


def test_campaign_c_conflicting_thresholds_are_both_flagged(knowledge_base: None) -> None:
    result = research("--campaign", "campaign-c", "--store", "store-003", *FULL_FACTS)

    assert result["status"] == "conflicting_sources"
    items = by_id(result)
    assert set(items) == {"doc:rule-c-30@1", "doc:rule-c-40@1"}
    assert all(item["conflict"] for item in items.values())


def test_unrelated_ticket_is_no_match(knowledge_base: None) -> None:
    result = research(
        "--campaign",
        "campaign-a",
        "--store",
        "store-001",
        *FULL_FACTS,
        query="the printer lost power",
    )

    assert result == {"status": "no_match", "missing": [], "truncated": False, "evidence": []}


NEVER = {
    "doc:rule-a@1",  # expired before the ticket
    "doc:rule-b@2",  # published after the time of knowledge
    "doc:case-a-draft@1",  # never approved
    "doc:rule-b-preview@1",  # revoked
    "doc:rule-a-other-brand@1",  # another brand
    "doc:rule-a-store-009@1",  # another store
}


@pytest.mark.parametrize(
    ("campaign", "store"),
    [("campaign-a", "store-001"), ("campaign-b", "store-002"), ("campaign-c", "store-003")],
)
@pytest.mark.parametrize(
    "query", [TICKET, "优惠券无法使用的适用条件", "活动 优惠券 门槛 水果茶 奶茶"]
)
def test_gated_documents_are_never_returned(
    knowledge_base: None, campaign: str, store: str, query: str
) -> None:
    result = research(
        "--campaign", campaign, "--store", store, *FULL_FACTS, "--limit", "50", query=query
    )

    assert not NEVER & set(ids(result))


def test_evidence_item_carries_the_documented_fields(knowledge_base: None) -> None:
    result = research("--campaign", "campaign-b", "--store", "store-002", *FULL_FACTS)
    item = by_id(result)["doc:rule-b@1"]

    assert set(item) == {
        "id",
        "source",
        "kind",
        "title",
        "version",
        "rule_key",
        "quote",
        "conditions",
        "conflict",
        "text",
        "valid_from",
        "valid_to",
        "published_at",
        "content_hash",
        "allowed_conclusion",
        "found_by",
        "relevance",
    }
    assert item["allowed_conclusion"] == "rules_do_not_explain"  # a full match explains nothing
    # Found by its words alone: a relevance from the share of the query's words it holds, and
    # no similarity (the vector branch did not score it).
    assert 0.0 < item["relevance"] <= 1.0
    # With the vector branch off, only the lexical branches can have found it.
    assert item["found_by"] and set(item["found_by"]) <= {"raw", "expanded"}
    assert "semantic" not in result
    assert item["version"] == 1
    assert item["rule_key"] == "campaign-b/coupon"
    assert item["valid_from"] == "2026-09-17T16:00:00Z"  # 2026-09-18T00:00+08:00 in UTC
    assert item["valid_to"] is None
    assert len(item["content_hash"]) == 64
    assert "v1" in item["quote"] and item["title"] in item["quote"]


# --- missing scope --------------------------------------------------------------------------


def test_missing_campaign_never_widens_the_search(knowledge_base: None) -> None:
    result = research("--store", "store-001", *FULL_FACTS)

    assert result == {
        "status": "needs_context",
        "missing": ["campaign"],
        "truncated": False,
        "evidence": [],
    }


def test_missing_store_and_campaign_are_both_named(knowledge_base: None) -> None:
    result = research(*FULL_FACTS)

    assert result["status"] == "needs_context"
    assert result["missing"] == ["store", "campaign"]
    assert result["evidence"] == []


def test_other_tenant_sees_nothing(knowledge_base: None) -> None:
    result = research(
        "--tenant", "other-tenant", "--campaign", "campaign-a", "--store", "store-001", *FULL_FACTS
    )

    assert result["status"] == "no_match"


# --- time boundaries --------------------------------------------------------------------------


@pytest.fixture
def windowed(operator: User) -> None:
    documents_import(
        items=[
            document(
                valid_from="2026-09-01T00:00:00+08:00",
                valid_to="2026-09-18T14:00:00+08:00",
                published_at="2026-09-18T14:10:00+08:00",
            )
        ],
        actor=operator,
    )


SCOPE_X = ("--campaign", "campaign-x", "--store", "store-100")


def test_valid_to_is_exclusive(windowed: None) -> None:
    assert (
        ids(
            research(
                *SCOPE_X,
                query="优惠券",
                at="2026-09-18T14:00:00+08:00",
                known="2026-09-18T15:00:00+08:00",
            )
        )
        == []
    )
    assert ids(
        research(
            *SCOPE_X,
            query="优惠券",
            at="2026-09-18T13:59:59+08:00",
            known="2026-09-18T15:00:00+08:00",
        )
    ) == ["doc:rule-x@1"]


def test_published_at_equal_to_known_at_is_included(windowed: None) -> None:
    assert ids(
        research(
            *SCOPE_X,
            query="优惠券",
            at="2026-09-18T10:00:00+08:00",
            known="2026-09-18T14:10:00+08:00",
        )
    ) == ["doc:rule-x@1"]
    assert (
        ids(
            research(
                *SCOPE_X,
                query="优惠券",
                at="2026-09-18T10:00:00+08:00",
                known="2026-09-18T14:09:59+08:00",
            )
        )
        == []
    )


def test_the_same_instant_in_two_time_zones_gives_the_same_result(knowledge_base: None) -> None:
    shanghai = research("--campaign", "campaign-b", "--store", "store-002", *FULL_FACTS)
    utc = research(
        "--campaign",
        "campaign-b",
        "--store",
        "store-002",
        *FULL_FACTS,
        at="2026-09-18T06:00:00Z",
        known="2026-09-18T06:10:00+00:00",
    )

    assert utc == shanghai


@pytest.mark.parametrize(
    ("flag", "value"), [("--at", "2026-09-18T14:00:00"), ("--known-at", "2026-09-18 14:10")]
)
def test_naive_datetimes_are_refused(knowledge_base: None, flag: str, value: str) -> None:
    args = {"--at": AT, "--known-at": KNOWN, flag: value}
    status, result = run_json(
        "research",
        TICKET,
        "--campaign",
        "campaign-b",
        "--store",
        "store-002",
        "--at",
        args["--at"],
        "--known-at",
        args["--known-at"],
    )

    assert status != 0
    assert result["ok"] is False
    assert result["field"] == flag
    assert "timezone" in result["error"]


# --- ranking --------------------------------------------------------------------------------


def test_truncation_and_ties_by_id(operator: User) -> None:
    same_text = [document(doc_key=f"tie-{n}", source=f"fixture://t/{n}") for n in (5, 3, 1, 4, 2)]
    documents_import(items=same_text, actor=operator)

    result = research(*SCOPE_X, "--limit", "3", query="优惠券")

    assert ids(result) == ["doc:tie-1@1", "doc:tie-2@1", "doc:tie-3@1"]
    assert result["truncated"] is True
    assert research(*SCOPE_X, "--limit", "5", query="优惠券")["truncated"] is False


def test_better_overlap_ranks_first(operator: User) -> None:
    documents_import(
        items=[
            document(doc_key="a-weak", title="门店营业时间", text="门店营业时间与优惠券无关。"),
            document(doc_key="z-strong", title="水果茶优惠券", text="两杯水果茶的优惠券无法使用。"),
        ],
        actor=operator,
    )

    assert ids(research(*SCOPE_X, query="两杯水果茶优惠券无法使用"))[0] == "doc:z-strong@1"


def test_a_synonym_matches_only_through_the_expanded_branch(operator: User) -> None:
    documents_import(
        items=[document(title="优惠券规则", text="优惠券限小程序使用。")], actor=operator
    )
    # "抵扣" shares no bigram with the document; only the lexicon rewrite makes it match.
    assert ids(research(*SCOPE_X, query="抵扣券")) == ["doc:rule-x@1"]


def test_lexicon_edits_apply_to_documents_saved_earlier(operator: User) -> None:
    documents_import(items=[document(title="会员积分", text="积分规则说明。")], actor=operator)
    assert research(*SCOPE_X, query="点数")["status"] == "no_match"

    synonym_set(term="点数", canonical="积分", actor=operator)

    assert ids(research(*SCOPE_X, query="点数")) == ["doc:rule-x@1"]


# --- conditions and conflicts ---------------------------------------------------------------


def test_conflict_is_flagged_on_a_sibling_that_did_not_rank(operator: User) -> None:
    documents_import(
        items=[
            document(
                doc_key="slot-a",
                rule_key="slot",
                title="优惠券门槛",
                text="优惠券满30元可用。",
                requirements={"basket_cents": {"min": 3000}},
            ),
            document(
                doc_key="slot-b",
                rule_key="slot",
                title="会员日",
                text="会员日说明。",
                requirements={"basket_cents": {"min": 4000}},
            ),
        ],
        actor=operator,
    )

    result = research(*SCOPE_X, "--basket-cents", "3200", query="优惠券")

    assert ids(result) == ["doc:slot-a@1"]
    assert result["evidence"][0]["conflict"] is True
    assert result["status"] == "conflicting_sources"


def test_same_slot_same_requirements_is_not_a_conflict(operator: User) -> None:
    requirement = {"basket_cents": {"min": 3000}}
    documents_import(
        items=[
            document(doc_key="twin-a", rule_key="slot", requirements=requirement),
            document(doc_key="twin-b", rule_key="slot", requirements=requirement),
        ],
        actor=operator,
    )

    result = research(*SCOPE_X, "--basket-cents", "3200", query="优惠券")

    assert result["status"] == "retrieved"
    assert not any(item["conflict"] for item in result["evidence"])


@pytest.mark.parametrize(
    ("cents", "expected"),
    [("2999", "mismatch"), ("3000", "match"), ("5000", "match"), ("5001", "mismatch")],
)
def test_min_and_max_bounds_are_inclusive(operator: User, cents: str, expected: str) -> None:
    documents_import(
        items=[document(requirements={"basket_cents": {"min": 3000, "max": 5000}})], actor=operator
    )

    result = research(*SCOPE_X, "--basket-cents", cents, query="优惠券")

    assert result["evidence"][0]["conditions"]["status"] == expected


def test_generic_fact_flags_feed_the_comparison(operator: User) -> None:
    documents_import(
        items=[document(requirements={"member_level": ["gold"], "cups": {"min": 2}})],
        actor=operator,
    )

    matched = research(*SCOPE_X, "--fact", "member_level=gold", "--fact", "cups=2", query="优惠券")
    short = research(*SCOPE_X, "--fact", "member_level=gold", "--fact", "cups=1", query="优惠券")

    assert matched["evidence"][0]["conditions"]["status"] == "match"
    assert short["evidence"][0]["conditions"]["mismatches"] == ["cups"]


def test_mismatch_keeps_the_unknown_facts(operator: User) -> None:
    documents_import(
        items=[document(requirements={"channel": ["miniapp"], "product": ["milk-tea"]})],
        actor=operator,
    )

    result = research(*SCOPE_X, "--product", "fruit-tea", query="优惠券")

    assert result["status"] == "retrieved"
    assert result["evidence"][0]["conditions"] == {
        "status": "mismatch",
        "mismatches": ["product"],
        "unknown": ["channel"],
    }


def test_bad_fact_flag_names_the_flag(knowledge_base: None) -> None:
    status, result = run_json(
        "research",
        TICKET,
        "--campaign",
        "campaign-b",
        "--store",
        "store-002",
        "--at",
        AT,
        "--known-at",
        KNOWN,
        "--fact",
        "oops",
    )

    assert status != 0
    assert result["field"] == "--fact"
