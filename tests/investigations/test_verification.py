"""The citation check: each rule with an answer it refuses and one it accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from investigations.verification import (
    ANSWER_MALFORMED,
    CITATION_NOT_IN_RUN,
    CITED_ITEM_REVOKED,
    CONCLUSION_NOT_ALLOWED,
    HISTORICAL_CEILING,
    MISSING_CASE_PREFIX,
    QUOTE_NOT_VERBATIM,
    parse_answer,
    returned_items,
    verify,
)
from knowledge.conclusions import (
    ASK_FOR_FACTS,
    CHECK_CAMPAIGN_CONFIGURATION,
    KNOWLEDGE_HAS_NO_ANSWER,
    LEAD_NEEDS_REVIEW,
    RULES_DO_NOT_EXPLAIN,
    RULES_EXCLUDE_PURCHASE,
    allowed_conclusion,
)
from knowledge.domain import HISTORICAL_CASE_PREFIX
from tests.investigations.results import (
    CAMPAIGN_C,
    CASE_A,
    CASE_IDS,
    NO_MATCH,
    PRODUCT_UNKNOWN,
    RULE_A,
    RULE_A_UNKNOWN,
    RULE_B,
    RULE_C_30,
    RULE_C_40,
    SKILL_ID,
    STORE_A,
    STORE_B,
    skill_run,
    step,
)


def answer(code: str, *citations: tuple[str, str]) -> dict[str, Any]:
    return {
        "conclusion": "…",
        "conclusion_code": code,
        "followups": [],
        "citations": [{"id": i, "quote": q} for i, q in citations],
    }


def cite(item: dict[str, Any]) -> tuple[str, str]:
    return item["id"], item["quote"]


def reasons(
    code: str, result: dict[str, Any], *citations: tuple[str, str], tool: str = "search_knowledge"
) -> list[str]:
    return verify(answer(code, *citations), [step(tool, result)]).reasons


# --- verbatim quotes ---------------------------------------------------------------------------


def test_a_verbatim_quote_passes() -> None:
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, cite(RULE_A)) == []


def test_a_part_of_a_returned_text_is_verbatim() -> None:
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, (RULE_A["id"], "conditions: mismatch")) == []


def test_a_paraphrased_quote_is_refused() -> None:
    paraphrase = (RULE_A["id"], "the rule says fruit tea is not in the campaign")
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, paraphrase) == [QUOTE_NOT_VERBATIM]


def test_a_fragment_too_short_to_say_anything_is_refused() -> None:
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, (RULE_A["id"], "match")) == [QUOTE_NOT_VERBATIM]
    # A whole returned value may be short: the id itself, say.
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, (RULE_A["id"], RULE_A["id"])) == []


def test_an_empty_quote_is_refused() -> None:
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, (RULE_A["id"], "  ")) == [QUOTE_NOT_VERBATIM]


def test_a_quote_of_another_item_is_not_verbatim_for_this_one() -> None:
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, (RULE_A["id"], CASE_A["quote"])) == [
        QUOTE_NOT_VERBATIM
    ]


# --- the historical-case prefix ----------------------------------------------------------------


def test_a_case_quote_with_its_prefix_passes() -> None:
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, cite(RULE_A), cite(CASE_A)) == []


def test_a_case_quote_without_its_prefix_is_refused() -> None:
    dropped = CASE_A["quote"].removeprefix(HISTORICAL_CASE_PREFIX + "：")
    assert dropped in CASE_A["quote"]  # verbatim, but no longer says it is a historical case
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_A, cite(RULE_A), (CASE_A["id"], dropped)) == [
        MISSING_CASE_PREFIX
    ]


def test_a_case_title_quoted_alone_also_drops_the_prefix() -> None:
    assert MISSING_CASE_PREFIX in reasons(
        LEAD_NEEDS_REVIEW, STORE_A, (CASE_A["id"], CASE_A["title"])
    )


# --- ids of this run ---------------------------------------------------------------------------


def test_an_id_from_another_run_is_refused() -> None:
    # rule-b was returned to some other investigation, not to this one.
    assert reasons(RULES_DO_NOT_EXPLAIN, STORE_A, cite(RULE_B)) == [
        CITATION_NOT_IN_RUN,
        CONCLUSION_NOT_ALLOWED,
    ]


def test_an_id_returned_in_this_run_passes() -> None:
    assert reasons(RULES_DO_NOT_EXPLAIN, STORE_B, cite(RULE_B)) == []


def test_a_failed_step_returns_no_ids() -> None:
    failed = {**step("search_knowledge", STORE_B), "outcome": "tool_error"}
    result = verify(answer(RULES_DO_NOT_EXPLAIN, cite(RULE_B)), [failed])
    assert CITATION_NOT_IN_RUN in result.reasons


# --- allowed conclusions -----------------------------------------------------------------------

ALLOWED = [
    # (search result, cited items, the one allowed conclusion)
    (STORE_A, [RULE_A], RULES_EXCLUDE_PURCHASE),
    (STORE_B, [RULE_B], RULES_DO_NOT_EXPLAIN),
    (PRODUCT_UNKNOWN, [RULE_A_UNKNOWN], ASK_FOR_FACTS),
    (CAMPAIGN_C, [RULE_C_30, RULE_C_40], CHECK_CAMPAIGN_CONFIGURATION),
    (NO_MATCH, [], KNOWLEDGE_HAS_NO_ANSWER),
    (STORE_A, [CASE_A], LEAD_NEEDS_REVIEW),
]
CODES = [
    RULES_EXCLUDE_PURCHASE,
    RULES_DO_NOT_EXPLAIN,
    ASK_FOR_FACTS,
    CHECK_CAMPAIGN_CONFIGURATION,
    KNOWLEDGE_HAS_NO_ANSWER,
    LEAD_NEEDS_REVIEW,
]


@pytest.mark.parametrize(("result", "cited", "allowed"), ALLOWED)
def test_the_evidence_allows_its_conclusion(
    result: dict[str, Any], cited: list[dict[str, Any]], allowed: str
) -> None:
    assert reasons(allowed, result, *map(cite, cited)) == []


@pytest.mark.parametrize(("result", "cited", "allowed"), ALLOWED)
@pytest.mark.parametrize("claimed", CODES)
def test_the_evidence_refuses_every_other_conclusion(
    result: dict[str, Any], cited: list[dict[str, Any]], allowed: str, claimed: str
) -> None:
    if claimed == allowed:
        return
    assert reasons(claimed, result, *map(cite, cited)) == [CONCLUSION_NOT_ALLOWED]


def test_a_full_match_never_allows_the_rules_to_exclude_the_purchase() -> None:
    assert reasons(RULES_EXCLUDE_PURCHASE, STORE_B, cite(RULE_B)) == [CONCLUSION_NOT_ALLOWED]


def test_no_match_allows_nothing_when_it_cites_something() -> None:
    both = [step("search_knowledge", NO_MATCH), step("search_knowledge", STORE_B, 1)]
    result = verify(answer(KNOWLEDGE_HAS_NO_ANSWER, cite(RULE_B)), both)
    assert result.reasons == [CONCLUSION_NOT_ALLOWED]


def test_a_conclusion_without_citations_needs_a_result_that_allows_it() -> None:
    assert reasons(RULES_DO_NOT_EXPLAIN, STORE_B) == [CONCLUSION_NOT_ALLOWED]
    assert reasons(ASK_FOR_FACTS, PRODUCT_UNKNOWN) == []


def test_a_conflict_cited_beside_a_rule_leaves_only_the_configuration_check() -> None:
    steps = [step("search_knowledge", STORE_B), step("search_knowledge", CAMPAIGN_C, 1)]
    refused = verify(answer(RULES_DO_NOT_EXPLAIN, cite(RULE_B), cite(RULE_C_30)), steps)
    accepted = verify(answer(CHECK_CAMPAIGN_CONFIGURATION, cite(RULE_B), cite(RULE_C_30)), steps)
    assert refused.reasons == [CONCLUSION_NOT_ALLOWED]
    assert accepted.ok


# --- a skill's needs_review is a lead ----------------------------------------------------------


def lead(text: str) -> str:
    """How a historical item is quoted: the prefix, then its own text."""
    return f"{HISTORICAL_CASE_PREFIX}：{text}"


def test_a_skill_needs_review_allows_a_lead() -> None:
    run = skill_run()
    assert reasons(LEAD_NEEDS_REVIEW, run, (SKILL_ID, lead(SKILL_ID)), tool="run_skill") == []
    assert reasons(LEAD_NEEDS_REVIEW, run, (CASE_IDS[0], lead(CASE_IDS[0])), tool="run_skill") == []


@pytest.mark.parametrize("claimed", [RULES_EXCLUDE_PURCHASE, KNOWLEDGE_HAS_NO_ANSWER])
def test_a_skill_needs_review_is_never_a_confirmed_cause(claimed: str) -> None:
    run = skill_run()
    assert reasons(claimed, run, (SKILL_ID, lead(SKILL_ID)), tool="run_skill") == [
        CONCLUSION_NOT_ALLOWED
    ]


def test_a_skill_fallback_allows_no_lead() -> None:
    run = skill_run("fallback")
    assert reasons(LEAD_NEEDS_REVIEW, run, (SKILL_ID, lead(SKILL_ID)), tool="run_skill") == [
        CONCLUSION_NOT_ALLOWED
    ]


def test_a_retrieved_memory_item_alone_allows_nothing() -> None:
    retrieved = {
        "status": "ok",
        "missing": [],
        "items": [{"id": SKILL_ID, "type": "skill", "title": "查活动商品"}],
    }
    assert reasons(
        LEAD_NEEDS_REVIEW, retrieved, (SKILL_ID, lead("查活动商品")), tool="retrieve_experience"
    ) == [CONCLUSION_NOT_ALLOWED]


# --- each citation against the cited item's own text (issue 24, item 2) ------------------------

MEMORY: dict[str, Any] = {
    "status": "ok",
    "missing": [],
    "items": [
        {"id": CASE_IDS[0], "type": "case", "title": "二号店优惠券无法使用：门店范围漏配"},
        {
            "id": "lesson:" + "d" * 64,
            "type": "lesson",
            "title": "门店范围先于商品列表核对",
            "lesson_type": "success_pattern",
            "conclusion": "先核对活动适用门店，再核对商品列表",
        },
        {"id": SKILL_ID, "type": "skill", "title": "优惠券无法使用：核对活动适用条件"},
    ],
}


def test_a_case_of_a_skill_run_is_not_quoted_with_a_rule_of_its_observations() -> None:
    # The rule's quote is inside the skill run's result, but not in the case's own text.
    run = skill_run()
    assert RULE_B["quote"] in json.dumps(run, ensure_ascii=False)
    assert reasons(LEAD_NEEDS_REVIEW, run, (CASE_IDS[0], RULE_B["quote"]), tool="run_skill") == [
        MISSING_CASE_PREFIX,
        QUOTE_NOT_VERBATIM,
    ]
    with_prefix = (CASE_IDS[0], lead(RULE_B["quote"]))
    assert reasons(LEAD_NEEDS_REVIEW, run, with_prefix, tool="run_skill") == [QUOTE_NOT_VERBATIM]


def test_a_skill_is_not_quoted_with_a_rule_of_its_observations() -> None:
    run = skill_run()
    assert reasons(LEAD_NEEDS_REVIEW, run, (SKILL_ID, RULE_B["quote"]), tool="run_skill") == [
        MISSING_CASE_PREFIX,
        QUOTE_NOT_VERBATIM,
    ]
    assert reasons(LEAD_NEEDS_REVIEW, run, (SKILL_ID, lead(RULE_B["quote"])), tool="run_skill") == [
        QUOTE_NOT_VERBATIM
    ]


def test_a_rule_observed_by_a_skill_run_is_quoted_as_the_rule() -> None:
    run = skill_run()
    assert reasons(RULES_DO_NOT_EXPLAIN, run, cite(RULE_B), tool="run_skill") == []


def test_a_retrieved_item_is_not_quoted_with_another_items_text() -> None:
    lesson_conclusion = MEMORY["items"][1]["conclusion"]
    citation = (CASE_IDS[0], lead(lesson_conclusion))
    assert reasons(LEAD_NEEDS_REVIEW, MEMORY, citation, tool="retrieve_experience") == [
        QUOTE_NOT_VERBATIM,
        CONCLUSION_NOT_ALLOWED,
    ]


HISTORICAL = [
    pytest.param("search_knowledge", STORE_A, CASE_A["id"], CASE_A["title"], id="knowledge-case"),
    pytest.param(
        "retrieve_experience", MEMORY, CASE_IDS[0], MEMORY["items"][0]["title"], id="case"
    ),
    pytest.param(
        "retrieve_experience",
        MEMORY,
        MEMORY["items"][1]["id"],
        MEMORY["items"][1]["conclusion"],
        id="lesson",
    ),
    pytest.param("retrieve_experience", MEMORY, SKILL_ID, MEMORY["items"][2]["title"], id="skill"),
    pytest.param("run_skill", skill_run(), SKILL_ID, SKILL_ID, id="skill-run"),
    pytest.param("run_skill", skill_run(), CASE_IDS[0], CASE_IDS[0], id="skill-run-case"),
]


@pytest.mark.parametrize(("tool", "result", "item_id", "text"), HISTORICAL)
def test_every_kind_of_historical_item_needs_its_prefix(
    tool: str, result: dict[str, Any], item_id: str, text: str
) -> None:
    refused = verify(answer(LEAD_NEEDS_REVIEW, (item_id, text)), [step(tool, result)])
    assert MISSING_CASE_PREFIX in refused.reasons
    accepted = verify(answer(LEAD_NEEDS_REVIEW, (item_id, lead(text))), [step(tool, result)])
    assert MISSING_CASE_PREFIX not in accepted.reasons
    assert QUOTE_NOT_VERBATIM not in accepted.reasons


@pytest.mark.parametrize(("tool", "result", "item_id", "text"), HISTORICAL)
def test_the_prefix_alone_quotes_nothing(
    tool: str, result: dict[str, Any], item_id: str, text: str
) -> None:
    alone = verify(
        answer(LEAD_NEEDS_REVIEW, (item_id, HISTORICAL_CASE_PREFIX)), [step(tool, result)]
    )
    assert QUOTE_NOT_VERBATIM in alone.reasons


@pytest.mark.parametrize(("tool", "result", "item_id", "text"), HISTORICAL)
def test_a_historical_item_allows_at_most_a_lead(
    tool: str, result: dict[str, Any], item_id: str, text: str
) -> None:
    (item,) = [i for i in returned_items(tool, result) if i.id == item_id]
    assert item.historical
    assert item.allows <= HISTORICAL_CEILING
    assert not item.allows & {RULES_EXCLUDE_PURCHASE, RULES_DO_NOT_EXPLAIN, KNOWLEDGE_HAS_NO_ANSWER}


# --- revocation during the run -----------------------------------------------------------------


def test_a_cited_item_revoked_during_the_run_is_refused() -> None:
    steps = [step("search_knowledge", STORE_B)]
    assert verify(answer(RULES_DO_NOT_EXPLAIN, cite(RULE_B)), steps).ok
    revoked = verify(answer(RULES_DO_NOT_EXPLAIN, cite(RULE_B)), steps, revoked={RULE_B["id"]})
    assert revoked.reasons == [CITED_ITEM_REVOKED]


# --- the shape of an answer --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ("not json", "JSON"),
        ([], "JSON"),
        ({"conclusion_code": RULES_DO_NOT_EXPLAIN}, "conclusion"),
        ({"conclusion": "x", "conclusion_code": "cause_confirmed"}, "conclusion_code"),
        (
            {"conclusion": "x", "conclusion_code": RULES_DO_NOT_EXPLAIN, "followups": "x"},
            "followups",
        ),
        (
            {"conclusion": "x", "conclusion_code": RULES_DO_NOT_EXPLAIN, "citations": [{"id": 1}]},
            "citations[0]",
        ),
    ],
)
def test_a_malformed_answer_names_the_field(data: Any, field: str) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    parsed, problem = parse_answer(text)
    assert parsed is None
    assert problem is not None and field in problem


def test_a_well_formed_answer_parses() -> None:
    parsed, problem = parse_answer(json.dumps(answer(RULES_DO_NOT_EXPLAIN, cite(RULE_B))))
    assert problem is None
    assert parsed == answer(RULES_DO_NOT_EXPLAIN, cite(RULE_B))
    assert ANSWER_MALFORMED == "answer_malformed"


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (RULE_A, RULES_EXCLUDE_PURCHASE),
        (CASE_A, LEAD_NEEDS_REVIEW),
        (RULE_B, RULES_DO_NOT_EXPLAIN),
        (RULE_A_UNKNOWN, ASK_FOR_FACTS),
        (RULE_C_30, CHECK_CAMPAIGN_CONFIGURATION),
    ],
)
def test_allowed_conclusion_per_evidence_item(item: dict[str, Any], expected: str) -> None:
    assert allowed_conclusion(item) == expected
