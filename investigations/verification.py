"""The final citation check: an answer stands only on evidence returned in this run.

Pure (no Django imports). An answer is ``{"conclusion", "conclusion_code", "followups",
"citations": [{"id", "quote"}]}``. It is accepted only when

- every cited id was returned by a tool in this run (``citation_not_in_run``);
- every quote appears verbatim in what the tool returned for that id (``quote_not_verbatim``; a
  fragment under ``MIN_QUOTE`` characters must be a whole returned value),
  and a quote of a historical case keeps the case prefix (``missing_case_prefix``), so an old
  cause cannot be passed off as the current one;
- the conclusion is one the cited evidence allows (``conclusion_not_allowed``): each knowledge
  evidence item allows one conclusion (``knowledge.conclusions.allowed_conclusion``); a skill
  run that ended in ``needs_review`` allows only ``lead_needs_review`` for the skill and its
  cases; a search that matched nothing allows ``knowledge_has_no_answer`` and one that lacked
  facts allows ``ask_for_facts``, without citations; an item of memory merely retrieved allows
  nothing on its own;
- nothing cited was revoked while the run went on (``cited_item_revoked``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowledge.conclusions import (
    ASK_FOR_FACTS,
    CHECK_CAMPAIGN_CONFIGURATION,
    CONCLUSION_CODES,
    KNOWLEDGE_HAS_NO_ANSWER,
    LEAD_NEEDS_REVIEW,
    NEEDS_CONTEXT_STATUS,
    NO_MATCH_STATUS,
    allowed_conclusion,
)
from knowledge.domain import HISTORICAL_CASE_PREFIX

QUOTE_NOT_VERBATIM = "quote_not_verbatim"
CITATION_NOT_IN_RUN = "citation_not_in_run"
CONCLUSION_NOT_ALLOWED = "conclusion_not_allowed"
MISSING_CASE_PREFIX = "missing_case_prefix"
CITED_ITEM_REVOKED = "cited_item_revoked"
ANSWER_MALFORMED = "answer_malformed"
REASON_CODES = (
    QUOTE_NOT_VERBATIM,
    CITATION_NOT_IN_RUN,
    CONCLUSION_NOT_ALLOWED,
    MISSING_CASE_PREFIX,
    CITED_ITEM_REVOKED,
    ANSWER_MALFORMED,
)

MAX_TEXT = 4_000
# "match" or "v1" is in every quote; a fragment this short proves nothing unless it is the
# whole returned value (an id, a title).
MIN_QUOTE = 8
MAX_ITEMS = 20
SKILL_NEEDS_REVIEW = "needs_review"


@dataclass
class Verification:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "reasons": list(self.reasons), "details": list(self.details)}


# --- the answer's shape ------------------------------------------------------------------------


def parse_answer(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The structured answer in ``text``, or None and what is wrong with it (naming the field)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None, "the answer is not a JSON object"
    if not isinstance(data, dict):
        return None, "the answer is not a JSON object"
    conclusion = data.get("conclusion")
    if not isinstance(conclusion, str) or not conclusion.strip() or len(conclusion) > MAX_TEXT:
        return None, f"conclusion: must be a non-empty string of at most {MAX_TEXT} characters"
    code = data.get("conclusion_code")
    if code not in CONCLUSION_CODES:
        return None, f"conclusion_code: must be one of {', '.join(CONCLUSION_CODES)}"
    followups = data.get("followups", [])
    if (
        not isinstance(followups, list)
        or len(followups) > MAX_ITEMS
        or not all(isinstance(f, str) and 0 < len(f) <= MAX_TEXT for f in followups)
    ):
        return None, f"followups: must be a list of at most {MAX_ITEMS} non-empty strings"
    citations = data.get("citations", [])
    if not isinstance(citations, list) or len(citations) > MAX_ITEMS:
        return None, f"citations: must be a list of at most {MAX_ITEMS} items"
    parsed = []
    for index, citation in enumerate(citations):
        if not (
            isinstance(citation, dict)
            and isinstance(citation.get("id"), str)
            and isinstance(citation.get("quote"), str)
            and citation["id"]
            and len(citation["quote"]) <= MAX_TEXT
        ):
            return None, f"citations[{index}]: must be {{'id': string, 'quote': string}}"
        parsed.append({"id": citation["id"], "quote": citation["quote"]})
    return {
        "conclusion": conclusion,
        "conclusion_code": code,
        "followups": list(followups),
        "citations": parsed,
    }, None


# --- what this run returned --------------------------------------------------------------------


@dataclass
class Evidence:
    """One id returned in this run: where its quote may come from and what it allows."""

    texts: list[str] = field(default_factory=list)
    allows: set[str] = field(default_factory=set)
    case_quote: bool = False
    conflict: bool = False


@dataclass
class RunEvidence:
    items: dict[str, Evidence] = field(default_factory=dict)
    # Conclusions a result allows without anything to cite (no match, facts missing).
    uncited: set[str] = field(default_factory=set)

    def add(self, item_id: object, source: object, allows: Collection[str] = ()) -> Evidence:
        evidence = self.items.setdefault(str(item_id), Evidence())
        evidence.texts.extend(strings(source))
        evidence.allows.update(allows)
        return evidence


def strings(value: object) -> Iterator[str]:
    """Every string inside a JSON value (keys excluded)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def _knowledge_item(run: RunEvidence, item: Mapping[str, Any]) -> None:
    if not item.get("id"):
        return
    evidence = run.add(item["id"], item, {allowed_conclusion(item)})
    evidence.case_quote = evidence.case_quote or str(item.get("quote", "")).startswith(
        HISTORICAL_CASE_PREFIX
    )
    evidence.conflict = evidence.conflict or bool(item.get("conflict"))


def _read_search(run: RunEvidence, result: Mapping[str, Any]) -> None:
    status = result.get("status")
    if status == NO_MATCH_STATUS:
        run.uncited.add(KNOWLEDGE_HAS_NO_ANSWER)
    if status == NEEDS_CONTEXT_STATUS and result.get("missing"):
        run.uncited.add(ASK_FOR_FACTS)
    for item in result.get("evidence") or []:
        if isinstance(item, Mapping):
            _knowledge_item(run, item)


def _read_retrieval(run: RunEvidence, result: Mapping[str, Any]) -> None:
    for item in result.get("items") or []:
        if isinstance(item, Mapping) and item.get("id"):
            run.add(item["id"], item)


def _read_skill_run(run: RunEvidence, result: Mapping[str, Any]) -> None:
    lead = {LEAD_NEEDS_REVIEW} if result.get("status") == SKILL_NEEDS_REVIEW else set()
    if result.get("skill"):
        run.add(result["skill"], result, lead)
    for case_id in result.get("cases") or []:
        run.add(case_id, result, lead)
    for observation in result.get("observations") or []:
        for item in (observation or {}).get("evidence") or []:
            if isinstance(item, Mapping):
                _knowledge_item(run, item)


READERS = {
    "search_knowledge": _read_search,
    "retrieve_experience": _read_retrieval,
    "run_skill": _read_skill_run,
}


def run_evidence(steps: Sequence[Mapping[str, Any]]) -> RunEvidence:
    """The ids returned by this run's successful tool calls, with their texts and allowances."""
    run = RunEvidence()
    for step in steps:
        result = step.get("result")
        reader = READERS.get(str(step.get("tool")))
        if step.get("outcome") == "ok" and isinstance(result, Mapping) and reader:
            reader(run, result)
    return run


# --- the check ---------------------------------------------------------------------------------


def _verbatim(quote: str, texts: Sequence[str]) -> bool:
    """Inside a returned text; a fragment too short to say anything must be a whole text."""
    if not quote.strip():
        return False
    if len(quote.strip()) < MIN_QUOTE:
        return quote in texts
    return any(quote in text for text in texts)


def verify(
    answer: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]],
    *,
    revoked: Collection[str] = (),
) -> Verification:
    run = run_evidence(steps)
    reasons: list[str] = []
    details: list[dict[str, Any]] = []

    def refuse(code: str, **detail: Any) -> None:
        if code not in reasons:
            reasons.append(code)
        details.append({"reason": code, **detail})

    cited: list[Evidence] = []
    for citation in answer["citations"]:
        item_id, quote = citation["id"], citation["quote"]
        evidence = run.items.get(item_id)
        if evidence is None:
            refuse(CITATION_NOT_IN_RUN, id=item_id)
            continue
        cited.append(evidence)
        if evidence.case_quote and not quote.startswith(HISTORICAL_CASE_PREFIX):
            refuse(MISSING_CASE_PREFIX, id=item_id)
        if not _verbatim(quote, evidence.texts):
            refuse(QUOTE_NOT_VERBATIM, id=item_id)
        if item_id in revoked:
            refuse(CITED_ITEM_REVOKED, id=item_id)

    code = answer["conclusion_code"]
    allowed = set().union(*(e.allows for e in cited)) if cited else set(run.uncited)
    if any(e.conflict for e in cited):
        # Sources that disagree leave only the live campaign to decide.
        allowed &= {CHECK_CAMPAIGN_CONFIGURATION, ASK_FOR_FACTS}
    if code not in allowed:
        refuse(CONCLUSION_NOT_ALLOWED, conclusion_code=code, allowed=sorted(allowed))
    return Verification(not reasons, reasons, details)
