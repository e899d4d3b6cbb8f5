"""The scripted investigator against fake tools: its order of checks and its honesty."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import pytest

from evaluation import domain
from evaluation.domain import Ticket, Truth, parse_ticket_set
from evaluation.investigator import (
    CAMPAIGN_CONFIG,
    Lead,
    block_leads,
    by_record,
    investigate,
    lead_from_case,
    lead_from_line,
    plan_checks,
)
from tests.evaluation.conftest import ticket, ticket_set

RULE_MATCH = {
    "status": "retrieved",
    "missing": [],
    "evidence": [
        {"id": "doc:rule-b@1", "kind": "rule", "conditions": {"status": "match"}, "conflict": False}
    ],
}
RULE_MISMATCH = {
    "status": "retrieved",
    "missing": [],
    "evidence": [
        {
            "id": "doc:rule-b@1",
            "kind": "rule",
            "conditions": {"status": "mismatch", "mismatches": ["basket_cents"]},
            "conflict": False,
        }
    ],
}
CASE_MISMATCH = {
    "status": "retrieved",
    "missing": [],
    "evidence": [
        {"id": "doc:case-a@1", "kind": "case", "conditions": {"status": "mismatch"}},
        {"id": "doc:rule-b@1", "kind": "rule", "conditions": {"status": "match"}},
    ],
}
CONFLICT = {"status": "conflicting_sources", "missing": [], "evidence": []}
NO_MATCH = {"status": "no_match", "missing": [], "evidence": []}
STORE_CASE = {
    "id": "case:store",
    "diagnosis": {"statement": "活动B后台的适用门店列表缺少 store-002。"},
    "counterevidence": [
        {
            "hypothesis": "优惠券缓存未刷新",
            "statement": "刷新后仍无法使用",
            "evidence": [{"source_id": "t#m5"}],
        }
    ],
}
PRODUCT_CASE = {
    "id": "case:product",
    "diagnosis": {"statement": "活动商品列表没有包含新品水果茶的商品编码。"},
    "counterevidence": [
        {"hypothesis": "金额未达到门槛", "statement": "金额满足", "evidence": [{"source_id": "x"}]}
    ],
}


@dataclass
class FakeTools:
    """Answers each tool from a script; records what was asked."""

    memory: dict[str, Any] = field(default_factory=lambda: {"status": "ok", "items": []})
    block: dict[str, Any] = field(default_factory=lambda: {"status": "ok", "items": []})
    skill: dict[str, Any] = field(default_factory=dict)
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    searches: list[dict[str, Any]] = field(default_factory=lambda: [RULE_MATCH])
    calls: list[str] = field(default_factory=list)
    facts_seen: list[dict[str, object]] = field(default_factory=list)

    def experience_context(
        self, query: str, scope: Mapping[str, str], now: datetime
    ) -> Mapping[str, Any]:
        self.calls.append("context")
        return self.block

    def retrieve_experience(
        self, query: str, scope: Mapping[str, str], now: datetime
    ) -> Mapping[str, Any]:
        self.calls.append("retrieve")
        return self.memory

    def run_skill(
        self, skill_id: str, scope: Mapping[str, str], **kwargs: Any
    ) -> Mapping[str, Any]:
        self.calls.append(f"skill {skill_id}")
        return self.skill

    def read_case(self, case_id: str) -> Mapping[str, Any] | None:
        self.calls.append(f"read {case_id}")
        return self.cases.get(case_id)

    def search_knowledge(
        self, query: str, scope: Mapping[str, str], **kwargs: Any
    ) -> Mapping[str, Any]:
        self.calls.append("search")
        self.facts_seen.append(dict(kwargs["facts"]))
        return self.searches.pop(0) if len(self.searches) > 1 else self.searches[0]


NO_FACTS = {
    "occurred_at": "2026-09-18T14:31:00+08:00",
    "known_at": "2026-09-18T14:33:00+08:00",
    "facts": {},
}


def one_ticket(**changes: Any) -> Ticket:
    return parse_ticket_set(ticket_set(ticket(1, **changes))).tickets[0]


MEMORY = {
    "status": "ok",
    "items": [
        {"id": "case:product", "type": "case"},
        {"id": "skill:s", "type": "skill"},
        {"id": "case:store", "type": "case"},
    ],
}
PASSED = {
    "status": "needs_review",
    "tool_calls": 1,
    "observations": [{"status": "retrieved"}],
    "cases": ["case:store", "case:product"],
}


PREFIX = "历史案例，仅作排查线索"
PRODUCT_LINE = (
    f"[1] case case:product confidence=0.500 {PREFIX} 水果茶优惠券用不了：活动商品列表未包含新品: "
    "新品水果茶的商品编码没有加入活动商品。"
)
SKILL_LINE = f"[2] skill skill:s confidence=0.667 {PREFIX} 先核对当前活动规则: 再查真实配置。"
STORE_LINE = (
    f"[3] case case:store confidence=0.500 {PREFIX} 优惠券无法使用：适用门店漏配: "
    "先怀疑缓存，后经运营核对配置，确认二号店未加入适用门店。"
)
BLOCK: dict[str, Any] = {
    "status": "ok",
    "block": "\n".join(
        ["Reviewed experience for this scope.", PRODUCT_LINE, SKILL_LINE, STORE_LINE]
    ),
    "items": [
        {"id": "case:product", "type": "case", "confidence": 0.5},
        {"id": "skill:s", "type": "skill", "confidence": 0.667},
        {"id": "case:store", "type": "case", "confidence": 0.5},
    ],
}


def memory_tools(**changes: Any) -> FakeTools:
    values: dict[str, Any] = {
        "memory": MEMORY,
        "block": BLOCK,
        "skill": PASSED,
        "cases": {"case:store": STORE_CASE, "case:product": PRODUCT_CASE},
    }
    values.update(changes)
    return FakeTools(**values)


def test_leads_are_read_from_the_diagnosis_and_the_refuted_hypotheses() -> None:
    assert lead_from_case(STORE_CASE) == Lead("case:store", ("config:store-scope",), True)
    assert lead_from_case(PRODUCT_CASE) == Lead("case:product", ("config:product-list",), False)
    unsupported = {**STORE_CASE, "counterevidence": [{"hypothesis": "缓存", "evidence": []}]}
    assert not lead_from_case(unsupported).defers_client_retry


@pytest.mark.parametrize(
    ("status", "leads", "expected"),
    [
        ("retrieved", [], ["confirm:client-retry", CAMPAIGN_CONFIG]),
        ("conflicting_sources", [], [CAMPAIGN_CONFIG, "confirm:client-retry"]),
        (
            "retrieved",
            [Lead("a", ("config:product-list",), False)],
            ["config:product-list", "confirm:client-retry", CAMPAIGN_CONFIG],
        ),
        (
            "retrieved",
            [Lead("a", ("config:store-scope",), True), Lead("b", ("config:store-scope",), False)],
            ["config:store-scope", CAMPAIGN_CONFIG, "confirm:client-retry"],
        ),
        (
            "conflicting_sources",
            [Lead("a", (CAMPAIGN_CONFIG,), False)],
            [CAMPAIGN_CONFIG, "confirm:client-retry"],
        ),
    ],
)
def test_memory_reorders_and_adds_checks(
    status: str, leads: list[Lead], expected: list[str]
) -> None:
    assert plan_checks(status, leads) == expected


def test_without_memory_the_ordinary_path_never_finds_the_store_list() -> None:
    tools = FakeTools()
    done = investigate(one_ticket(), tools, with_memory=False)
    assert tools.calls == ["search"]
    assert done.questions == ("confirm:client-retry",)
    assert done.checks == ("knowledge:campaign-rules", CAMPAIGN_CONFIG)
    assert done.claim is None and done.outcome == domain.ESCALATED
    assert dict(done.calls) == {"memory": 0, "skill": 0, "knowledge": 1, "config": 1}


def test_leads_are_read_from_the_case_lines_of_the_context_block() -> None:
    assert block_leads(BLOCK) == [
        Lead("case:product", ("config:product-list",), False, 0.5),
        Lead("case:store", ("config:store-scope",), True, 0.5),
    ]
    assert lead_from_line("case:x", "[1] case case:x confidence=0.5 门槛提高") == Lead(
        "case:x", (CAMPAIGN_CONFIG,), False
    )
    # A case in an unresolved conflict is shown to the agent as disputed: no lead.
    disputed = {
        **BLOCK,
        "block": BLOCK["block"].replace(
            "case:store confidence=0.500", "case:store confidence=0.500 CONFLICT"
        ),
    }
    assert [lead.case_id for lead in block_leads(disputed)] == ["case:product"]


def test_with_memory_the_check_the_rules_name_comes_first_then_the_leads() -> None:
    tools = memory_tools()
    done = investigate(one_ticket(), tools, with_memory=True)
    # The rules match and do not explain the failure: the live campaign behind the matched rule
    # is read first (it shows no fault), and only then is memory asked, in one call.
    assert tools.calls == ["search", "context"]
    # Leads of equal record in the block's order: the product list is checked first and is
    # fine, then the store list; the store-list case set a cache suspicion aside, so no refresh
    # is asked for.
    assert done.checks == (
        "knowledge:campaign-rules",
        CAMPAIGN_CONFIG,
        "config:product-list",
        "config:store-scope",
    )
    assert done.questions == ()
    assert done.claim == "store-scope-missing" and done.outcome == domain.CLAIMED
    assert dict(done.calls) == {"memory": 1, "skill": 0, "knowledge": 1, "config": 3}


THRESHOLD_FAULT = {
    CAMPAIGN_CONFIG: {"fault": "the live threshold is 35 yuan", "cause": "live-threshold-raised"}
}


@pytest.mark.parametrize("search", [RULE_MATCH, CONFLICT])
def test_memory_costs_nothing_when_the_check_the_rules_name_finds_the_cause(
    search: dict[str, Any],
) -> None:
    # The regression: with memory the leads were checked before the live campaign, so
    # a ticket both arms solve took more calls with memory than without.
    answers = {"client_retry": "still_failing", "checks": THRESHOLD_FAULT}
    tools = memory_tools(searches=[search])
    with_memory = investigate(one_ticket(answers=answers), tools, with_memory=True)
    without = investigate(
        one_ticket(answers=answers), FakeTools(searches=[search]), with_memory=False
    )
    assert tools.calls == ["search"] and with_memory.calls["memory"] == 0
    assert with_memory.claim == without.claim == "live-threshold-raised"
    assert sum(with_memory.calls.values()) <= sum(without.calls.values())


def _block(*cases: tuple[str, float, str]) -> dict[str, Any]:
    """A context block of case lines, in the order given: (id, confidence, words)."""
    lines = [
        f"[{n}] case {case_id} confidence={confidence:.3f} {PREFIX} {words}"
        for n, (case_id, confidence, words) in enumerate(cases, start=1)
    ]
    return {
        "status": "ok",
        "block": "\n".join(["Reviewed experience for this scope.", *lines]),
        "items": [{"id": c, "type": "case", "confidence": conf} for c, conf, _ in cases],
    }


def test_leads_are_checked_in_order_of_their_record() -> None:
    # The product-list case is listed first but has the weaker record (one incident); the
    # store-list case was confirmed since (two incidents and a resolved run): it goes first.
    block = _block(
        ("case:product", 0.5, "活动商品列表未包含新品"),
        ("case:store", 0.75, "适用门店漏配"),
    )
    tools = memory_tools(block=block)
    done = investigate(one_ticket(), tools, with_memory=True)
    assert done.checks == ("knowledge:campaign-rules", CAMPAIGN_CONFIG, "config:store-scope")
    assert done.claim == "store-scope-missing"
    assert dict(done.calls) == {"memory": 1, "skill": 0, "knowledge": 1, "config": 2}


def test_by_record_orders_by_confidence_then_keeps_the_given_order() -> None:
    a = Lead("a", ("config:product-list",), False, 0.5)
    b = Lead("b", ("config:store-scope",), False, 0.667)
    c = Lead("c", ("config:release",), False, 0.5)
    unknown = Lead("d", ("config:release",), False)
    assert by_record([a, unknown, b, c]) == [b, a, c, unknown]
    assert by_record([c, a]) == [c, a]
    # The block's confidence is what orders them; a value that is not a number is no record.
    block = _block(("case:x", 0.5, "门槛"), ("case:y", 0.9, "发布版本"))
    block["items"][1]["confidence"] = "0.9"
    assert [lead.case_id for lead in block_leads(block)] == ["case:x", "case:y"]


def test_a_lead_is_never_a_cause() -> None:
    quiet = one_ticket(answers={"client_retry": "still_failing"})
    done = investigate(quiet, memory_tools(), with_memory=True)
    assert done.claim is None and done.outcome == domain.ESCALATED


def test_a_block_without_cases_leaves_the_ordinary_path_to_decide() -> None:
    skill_only = {
        "status": "ok",
        "block": SKILL_LINE,
        "items": [{"id": "skill:s", "type": "skill", "confidence": 0.667}],
    }
    with_memory = investigate(one_ticket(), memory_tools(block=skill_only), with_memory=True)
    without = investigate(one_ticket(), FakeTools(), with_memory=False)
    assert with_memory.checks == without.checks
    assert with_memory.questions == without.questions
    assert with_memory.claim == without.claim is None
    assert dict(with_memory.calls) == {"memory": 1, "skill": 0, "knowledge": 1, "config": 1}


def test_memory_is_not_consulted_when_the_rules_decide() -> None:
    tools = memory_tools(searches=[RULE_MISMATCH])
    done = investigate(one_ticket(), tools, with_memory=True)
    assert tools.calls == ["search"] and done.calls["memory"] == 0


def test_only_a_rule_mismatch_supports_the_rules_cause() -> None:
    done = investigate(one_ticket(), FakeTools(searches=[RULE_MISMATCH]), with_memory=False)
    assert done.claim == domain.RULES_EXCLUDE_PURCHASE and done.questions == ()
    # A historical case that does not match is a lead, not a rule: nothing is claimed from it.
    done = investigate(one_ticket(), FakeTools(searches=[CASE_MISMATCH]), with_memory=False)
    assert done.claim is None


def test_memory_never_overrides_a_rule_mismatch() -> None:
    done = investigate(one_ticket(), memory_tools(searches=[RULE_MISMATCH]), with_memory=True)
    assert done.claim == domain.RULES_EXCLUDE_PURCHASE
    assert done.calls["config"] == 0


def test_conflicting_rules_send_it_to_the_live_campaign_first() -> None:
    answers = {
        "client_retry": "works_now",
        "checks": {CAMPAIGN_CONFIG: {"fault": "live threshold is 40", "cause": "live-threshold"}},
    }
    done = investigate(
        one_ticket(answers=answers), FakeTools(searches=[CONFLICT]), with_memory=False
    )
    assert done.claim == "live-threshold" and done.questions == ()


def test_works_after_a_refresh_resolves_but_explains_nothing() -> None:
    done = investigate(
        one_ticket(answers={"client_retry": "works_now"}), FakeTools(), with_memory=False
    )
    assert done.outcome == domain.RESOLVED_UNEXPLAINED and done.claim is None
    assert done.calls["config"] == 0


def test_missing_facts_are_asked_for_and_the_search_repeated() -> None:
    needs = {"status": "needs_context", "missing": ["product", "channel"], "evidence": []}
    tools = FakeTools(searches=[needs, RULE_MISMATCH])
    asked = one_ticket(
        context={**NO_FACTS, "facts": {"basket_cents": 2500}},
        answers={"facts": {"product": "fruit-tea", "channel": "miniapp"}},
    )
    done = investigate(asked, tools, with_memory=False)
    assert done.questions == ("confirm:product", "confirm:channel")
    assert tools.facts_seen[-1] == {
        "basket_cents": 2500,
        "product": "fruit-tea",
        "channel": "miniapp",
    }
    assert done.claim == domain.RULES_EXCLUDE_PURCHASE and done.calls["knowledge"] == 2


def test_an_unanswered_question_leaves_it_waiting_for_the_customer() -> None:
    needs = {"status": "needs_context", "missing": ["product"], "evidence": []}
    tools = FakeTools(searches=[needs])
    done = investigate(one_ticket(context=NO_FACTS, answers={}), tools, with_memory=False)
    assert done.outcome == domain.AWAITING_CUSTOMER and done.claim is None
    assert "knowledge:campaign-rules" not in done.checks


def test_rules_that_keep_asking_stop_after_a_bounded_number_of_searches() -> None:
    needs = {"status": "needs_context", "missing": ["product"], "evidence": []}
    still = {"status": "needs_context", "missing": ["channel"], "evidence": []}
    again = {"status": "needs_context", "missing": ["size"], "evidence": []}
    answers = {"facts": {"product": "fruit-tea", "channel": "miniapp", "size": "large"}}
    tools = FakeTools(searches=[needs, still, again, again])
    done = investigate(one_ticket(context=NO_FACTS, answers=answers), tools, with_memory=False)
    assert done.outcome == domain.AWAITING_CUSTOMER and done.calls["knowledge"] == 3


def test_nothing_in_the_knowledge_base_is_handed_on_without_a_claim() -> None:
    done = investigate(one_ticket(), FakeTools(searches=[NO_MATCH]), with_memory=False)
    assert done.outcome == domain.ESCALATED and done.claim is None and done.calls["config"] == 0


def test_the_ground_truth_is_never_read() -> None:
    original = one_ticket()
    lied = replace(original, truth=Truth(("config:release",), "something-else", ()))
    for with_memory in (True, False):
        assert investigate(original, memory_tools(), with_memory=with_memory) == investigate(
            lied, memory_tools(), with_memory=with_memory
        )
