"""What a piece of evidence lets an investigator conclude, and nothing more.

Pure (no Django imports). A search result is evidence about the rules, never about the cause of
the current failure: a rule the purchase does not meet says the rules do not cover it; a rule it
fully meets says only that the rules do not explain the failure, so the real configuration and
requests must be checked; a historical case is a lead. The conclusion codes are the ones an
investigation's answer must use (docs/contracts.md, Investigations).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledge.domain import MATCH, MISMATCH, UNKNOWN

RULES_EXCLUDE_PURCHASE = "rules_exclude_purchase"
RULES_DO_NOT_EXPLAIN = "rules_do_not_explain"
ASK_FOR_FACTS = "ask_for_facts"
CHECK_CAMPAIGN_CONFIGURATION = "check_campaign_configuration"
KNOWLEDGE_HAS_NO_ANSWER = "knowledge_has_no_answer"
LEAD_NEEDS_REVIEW = "lead_needs_review"

CONCLUSION_CODES = (
    RULES_EXCLUDE_PURCHASE,
    RULES_DO_NOT_EXPLAIN,
    ASK_FOR_FACTS,
    CHECK_CAMPAIGN_CONFIGURATION,
    KNOWLEDGE_HAS_NO_ANSWER,
    LEAD_NEEDS_REVIEW,
)


def allowed_conclusion(item: Mapping[str, Any]) -> str:
    """The one conclusion a ``search_knowledge`` evidence item supports.

    A conflict comes first (the sources disagree, so only the live campaign can say which rule is
    in force); then unknown conditions (the facts must be asked for); a historical case is a
    lead whatever its conditions; a rule decides by its comparison.
    """
    conditions = item.get("conditions") or {}
    status = conditions.get("status")
    if item.get("conflict"):
        return CHECK_CAMPAIGN_CONFIGURATION
    if status == UNKNOWN:
        return ASK_FOR_FACTS
    if item.get("kind") == "case":
        return LEAD_NEEDS_REVIEW
    if status == MISMATCH:
        return RULES_EXCLUDE_PURCHASE
    if status == MATCH:
        return RULES_DO_NOT_EXPLAIN
    return ASK_FOR_FACTS


def with_allowed_conclusions(result: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a search result whose evidence items each name their ``allowed_conclusion``."""
    evidence = [
        {**item, "allowed_conclusion": allowed_conclusion(item)}
        for item in result.get("evidence") or []
    ]
    return {**result, "evidence": evidence}
