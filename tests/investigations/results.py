"""Tool results shaped like the five knowledge replays, for the pure tests (no database)."""

from __future__ import annotations

from typing import Any

from knowledge.domain import HISTORICAL_CASE_PREFIX


def item(
    item_id: str,
    *,
    kind: str = "rule",
    status: str = "match",
    mismatches: tuple[str, ...] = (),
    unknown: tuple[str, ...] = (),
    conflict: bool = False,
    title: str = "活动优惠券使用条件",
) -> dict[str, Any]:
    gaps = []
    if mismatches:
        gaps.append("mismatch: " + ", ".join(mismatches))
    if unknown:
        gaps.append("unknown: " + ", ".join(unknown))
    if conflict:
        gaps.append("conflicts with another source of the same rule")
    quote = f"[{kind}] {title} (v1); conditions: {status}"
    if gaps:
        quote += " (" + "; ".join(gaps) + ")"
    if kind == "case":
        quote = f"{HISTORICAL_CASE_PREFIX}：{quote}"
    return {
        "id": item_id,
        "kind": kind,
        "title": title,
        "quote": quote,
        "conditions": {"status": status, "mismatches": list(mismatches), "unknown": list(unknown)},
        "conflict": conflict,
        "text": f"{title}：正文",
    }


def search(status: str, *items: dict[str, Any], missing: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"status": status, "missing": list(missing), "truncated": False, "evidence": list(items)}


RULE_A = item("doc:rule-a@2", status="mismatch", mismatches=("product",))
CASE_A = item("doc:case-a@1", kind="case", status="mismatch", mismatches=("product",))
RULE_B = item("doc:rule-b@1")
RULE_A_UNKNOWN = item("doc:rule-a@2", status="unknown", unknown=("product",))
RULE_C_30 = item("doc:rule-c-30@1", conflict=True)
RULE_C_40 = item("doc:rule-c-40@1", conflict=True)

STORE_A = search("retrieved", RULE_A, CASE_A)
STORE_B = search("retrieved", RULE_B)
PRODUCT_UNKNOWN = search("needs_context", RULE_A_UNKNOWN, missing=("product",))
CAMPAIGN_C = search("conflicting_sources", RULE_C_30, RULE_C_40)
NO_MATCH = search("no_match")

SKILL_ID = "skill:" + "a" * 64
CASE_IDS = ["case:" + "b" * 64, "case:" + "c" * 64]


def skill_run(status: str = "needs_review") -> dict[str, Any]:
    return {
        "status": status,
        "reason": "all_steps_passed: …" if status == "needs_review" else "step_failed: no_match",
        "run_id": "r1",
        "skill": SKILL_ID,
        "missing": [],
        "tool_calls": 1,
        "steps": [],
        "observations": [
            {
                "step": 0,
                "tool": "search_knowledge",
                "status": "retrieved",
                "missing": [],
                "evidence": [RULE_B],
            },
        ],
        "cases": CASE_IDS if status == "needs_review" else [],
    }


def step(tool: str, result: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {
        "index": index,
        "call_id": f"call-{index}",
        "tool": tool,
        "arguments": {"query": "两杯水果茶，优惠券用不了"},
        "result": result,
        "outcome": "ok",
        "error": None,
        "refused_arguments": [],
    }
