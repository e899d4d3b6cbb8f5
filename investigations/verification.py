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

What each tool's result returns, item by item, is read in one place (``ITEMS_OF``). The
conclusion a reader is told is composed from the verified code and citations
(``composed_conclusion``); the model's own wording is kept apart as ``model_text``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowledge.conclusions import (
    ASK_FOR_FACTS,
    CHECK_CAMPAIGN_CONFIGURATION,
    CONCLUSION_CODES,
    KNOWLEDGE_HAS_NO_ANSWER,
    LEAD_NEEDS_REVIEW,
    RULES_DO_NOT_EXPLAIN,
    RULES_EXCLUDE_PURCHASE,
    allowed_conclusion,
)
from knowledge.domain import HISTORICAL_CASE_PREFIX, NEEDS_CONTEXT, NO_MATCH

QUOTE_NOT_VERBATIM = "quote_not_verbatim"
CITATION_NOT_IN_RUN = "citation_not_in_run"
CONCLUSION_NOT_ALLOWED = "conclusion_not_allowed"
MISSING_CASE_PREFIX = "missing_case_prefix"
CITED_ITEM_REVOKED = "cited_item_revoked"
ANSWER_MALFORMED = "answer_malformed"
# A prompt skill's answer whose ``output`` does not match the skill's declared shape.
OUTPUT_SHAPE_MISMATCH = "output_shape_mismatch"
REASON_CODES = (
    QUOTE_NOT_VERBATIM,
    CITATION_NOT_IN_RUN,
    CONCLUSION_NOT_ALLOWED,
    MISSING_CASE_PREFIX,
    CITED_ITEM_REVOKED,
    ANSWER_MALFORMED,
    OUTPUT_SHAPE_MISMATCH,
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


# --- what this run returned: each tool's items and their own text -----------------------------
#
# The one place that says, per tool, which items a result returns, what each item's own text is
# (a quote of the item must come from it, never from a neighbour in the same result), whether
# it is historical (a lead: quoted with the prefix, allowing at most a lead) and what it allows.

# Kinds of item that are history, not evidence about the current ticket: a knowledge case, an
# experience case, a lesson, a skill and what a skill run answered about itself.
HISTORICAL_KINDS = frozenset({"case", "lesson", "skill"})
# The most a historical item allows: it is a lead to review, never a statement of what the rules
# say about this purchase, let alone a cause. Unknown conditions and disagreeing sources still
# say what to do next.
HISTORICAL_CEILING = frozenset({LEAD_NEEDS_REVIEW, ASK_FOR_FACTS, CHECK_CAMPAIGN_CONFIGURATION})
# What may stand between the prefix and the quoted text (the knowledge base writes "：").
PREFIX_SEPARATORS = "：:，, \t\n"


@dataclass(frozen=True)
class ReturnedItem:
    """One item a tool returned in this run."""

    id: str
    kind: str
    texts: tuple[str, ...]
    historical: bool = False
    allows: frozenset[str] = frozenset()
    conflict: bool = False


def _item(
    item_id: object,
    kind: object,
    own: object,
    *,
    historical: bool,
    allows: Collection[str] = (),
    conflict: bool = False,
) -> ReturnedItem:
    allowed = frozenset(allows)
    if historical:
        allowed &= HISTORICAL_CEILING
    return ReturnedItem(
        str(item_id), str(kind or ""), tuple(strings(own)), historical, allowed, conflict
    )


def _knowledge_items(result: Mapping[str, Any]) -> Iterator[ReturnedItem]:
    """``search_knowledge`` (and a skill step's observation of it): each evidence item, its own
    text every string of that item; a ``case`` document is historical."""
    for item in result.get("evidence") or []:
        if isinstance(item, Mapping) and item.get("id"):
            historical = item.get("kind") == "case" or str(item.get("quote", "")).startswith(
                HISTORICAL_CASE_PREFIX
            )
            yield _item(
                item["id"],
                item.get("kind") or "rule",
                item,
                historical=historical,
                allows={allowed_conclusion(item)},
                conflict=bool(item.get("conflict")),
            )


def _memory_items(result: Mapping[str, Any]) -> Iterator[ReturnedItem]:
    """``retrieve_experience``: each case, skill or lesson, its own text every string of that
    item (title, why, a lesson's conclusion); all historical, and merely retrieved, so each
    allows nothing on its own."""
    for item in result.get("items") or []:
        if isinstance(item, Mapping) and item.get("id"):
            yield _item(item["id"], item.get("type"), item, historical=True)


# What a skill run's result holds that is not what the run says of itself: the observations and
# cases (items in their own right), and a prompt skill's sub-agent answer and output (a model's
# words, verified in that run, never the skill's own text).
NOT_OWN_TEXT = frozenset({"observations", "cases", "answer", "output", "verification"})


def _skill_run_items(result: Mapping[str, Any]) -> Iterator[ReturnedItem]:
    """``run_skill``: the skill, whose own text is what the run says of itself (status, reason,
    its recipe steps), not its observations or cases; each case handed back, whose own text is
    its id; both historical, and a lead when the run ended in ``needs_review``. The observations
    are knowledge results in their own right."""
    lead = {LEAD_NEEDS_REVIEW} if result.get("status") == SKILL_NEEDS_REVIEW else set()
    if result.get("skill"):
        own = {k: v for k, v in result.items() if k not in NOT_OWN_TEXT}
        yield _item(result["skill"], "skill", own, historical=True, allows=lead)
    for case_id in result.get("cases") or []:
        if isinstance(case_id, str) and case_id:
            yield _item(case_id, "case", case_id, historical=True, allows=lead)
    for observation in result.get("observations") or []:
        if isinstance(observation, Mapping):
            yield from _knowledge_items(observation)


def _uncited(result: Mapping[str, Any]) -> set[str]:
    """What a search result allows with nothing to cite: no match, or facts it lacks."""
    status = result.get("status")
    allowed = set()
    if status == NO_MATCH:
        allowed.add(KNOWLEDGE_HAS_NO_ANSWER)
    if status == NEEDS_CONTEXT and result.get("missing"):
        allowed.add(ASK_FOR_FACTS)
    return allowed


ITEMS_OF: dict[str, Callable[[Mapping[str, Any]], Iterator[ReturnedItem]]] = {
    "search_knowledge": _knowledge_items,
    "retrieve_experience": _memory_items,
    "run_skill": _skill_run_items,
}
UNCITED_OF: dict[str, Callable[[Mapping[str, Any]], set[str]]] = {"search_knowledge": _uncited}


def returned_items(tool: str, result: object) -> list[ReturnedItem]:
    """The items ``tool`` returned in ``result`` (none for a tool the runner does not know)."""
    reader = ITEMS_OF.get(tool)
    return list(reader(result)) if reader and isinstance(result, Mapping) else []


@dataclass
class Evidence:
    """One id returned in this run (merged over every result that returned it)."""

    kind: str = ""
    texts: list[str] = field(default_factory=list)
    allows: set[str] = field(default_factory=set)
    historical: bool = False
    conflict: bool = False


@dataclass
class RunEvidence:
    items: dict[str, Evidence] = field(default_factory=dict)
    # Conclusions a result allows without anything to cite (no match, facts missing).
    uncited: set[str] = field(default_factory=set)

    def add(self, item: ReturnedItem) -> None:
        evidence = self.items.setdefault(item.id, Evidence(kind=item.kind))
        evidence.texts.extend(item.texts)
        evidence.allows.update(item.allows)
        evidence.historical = evidence.historical or item.historical
        evidence.conflict = evidence.conflict or item.conflict


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


def run_evidence(steps: Sequence[Mapping[str, Any]]) -> RunEvidence:
    """The ids returned by this run's successful tool calls, with their texts and allowances."""
    run = RunEvidence()
    for step in steps:
        result, tool = step.get("result"), str(step.get("tool"))
        if step.get("outcome") != "ok" or not isinstance(result, Mapping):
            continue
        for item in returned_items(tool, result):
            run.add(item)
        if tool in UNCITED_OF:
            run.uncited |= UNCITED_OF[tool](result)
    return run


# --- the check ---------------------------------------------------------------------------------


def _verbatim(quote: str, texts: Sequence[str]) -> bool:
    """Inside a returned text; a fragment too short to say anything must be a whole text."""
    if not quote.strip():
        return False
    if len(quote.strip()) < MIN_QUOTE:
        return quote in texts
    return any(quote in text for text in texts)


def quote_problems(quote: str, evidence: Evidence) -> list[str]:
    """Why ``quote`` is no quote of the item ``evidence`` stands for (empty: it is one).

    A historical item is quoted as the prefix, then its own text verbatim (the knowledge base
    already writes a case's quote that way); the prefix alone quotes nothing.
    """
    problems = []
    body = quote
    if evidence.historical:
        if quote.startswith(HISTORICAL_CASE_PREFIX):
            body = quote.removeprefix(HISTORICAL_CASE_PREFIX).lstrip(PREFIX_SEPARATORS)
        else:
            problems.append(MISSING_CASE_PREFIX)
    if not _verbatim(body, evidence.texts):
        problems.append(QUOTE_NOT_VERBATIM)
    return problems


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
        for problem in quote_problems(quote, evidence):
            refuse(problem, id=item_id)
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


# --- what a reader is told ---------------------------------------------------------------------
#
# The conclusion a user or agent reads is composed here from the verified code and citations,
# never taken from the model: its prose may claim a confirmed cause or a fix the evidence does
# not allow, and no phrase list can tell. The model's wording is kept as ``model_text``, shown
# as its own unverified words (docs/contracts.md, Investigations).

# One sentence per code; the console shows the same sentences translated
# (``investigations.sentences.CONCLUSIONS``, kept equal by a test).
CONCLUSION_STATEMENTS = {
    RULES_EXCLUDE_PURCHASE: "A rule's conditions exclude this purchase.",
    RULES_DO_NOT_EXPLAIN: "The rules match this purchase; check the real configuration and requests.",
    ASK_FOR_FACTS: "The rules cannot be decided yet; ask for the missing facts.",
    CHECK_CAMPAIGN_CONFIGURATION: "The sources conflict; check the live campaign configuration.",
    KNOWLEDGE_HAS_NO_ANSWER: "The knowledge base does not answer this.",
    LEAD_NEEDS_REVIEW: "A skill or historical case is a lead only, never a confirmed cause.",
}
NOT_VERIFIED = "No conclusion: the answer did not pass verification ({reasons})."
CITED = "Cited: {items}."
HISTORICAL_CITATION = "{id} (historical {kind}: a lead, not a confirmed cause)"


@dataclass(frozen=True)
class CitedItem:
    id: str
    kind: str
    historical: bool


def cited_items(answer: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]) -> list[CitedItem]:
    """The distinct items an answer cites, as this run returned them (unknown ids left out)."""
    run = run_evidence(steps)
    cited = []
    for item_id in dict.fromkeys(str(c.get("id")) for c in answer.get("citations") or []):
        evidence = run.items.get(item_id)
        if evidence is not None:
            cited.append(CitedItem(item_id, evidence.kind or "item", evidence.historical))
    return cited


def composed_conclusion(
    answer: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], verification: Verification
) -> str:
    """What the answer concludes, in the product's words: the statement of its verified code
    and the items it cites, each historical one marked as a lead; for a refused answer, that
    nothing is concluded."""
    if not verification.ok:
        return NOT_VERIFIED.format(reasons=", ".join(verification.reasons))
    cited = [
        HISTORICAL_CITATION.format(id=item.id, kind=item.kind)
        if item.historical
        else f"{item.id} ({item.kind})"
        for item in cited_items(answer, steps)
    ]
    statement = CONCLUSION_STATEMENTS[answer["conclusion_code"]]
    return f"{statement} {CITED.format(items='; '.join(cited))}" if cited else statement


def with_composed_conclusion(
    answer: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], verification: Verification
) -> dict[str, Any]:
    """The answer whose ``conclusion`` is composed, the model's own wording in ``model_text``."""
    return {
        **answer,
        "conclusion": composed_conclusion(answer, steps, verification),
        "model_text": answer["conclusion"],
    }
