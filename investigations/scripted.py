"""The scripted provider: a fixed, deterministic strategy in place of a model (no network).

Pure (no Django imports). It reads only the transcript, so the same ticket and the same tool
results always give the same calls and the same answer:

1. when memory tools are offered, retrieve experience for the ticket text and run the first
   skill returned;
2. search the knowledge base once with the ticket text;
3. answer with the conclusion the search allows, quoting every cited item's ``quote`` verbatim
   (a historical case keeps its prefix; a skill is quoted as the prefix and its id). A skill's
   ``needs_review`` is named as a lead to review, never as the cause.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from investigations.declarations import MAX_QUERY, RETRIEVE_EXPERIENCE, RUN_SKILL, SEARCH_KNOWLEDGE
from investigations.domain import ToolCall, Transcript, Turn
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

MAX_INPUT = 2_000
INPUTS_PREFIX = "inputs."

CONCLUSIONS = {
    RULES_EXCLUDE_PURCHASE: "The rules do not cover this purchase ({detail}).",
    RULES_DO_NOT_EXPLAIN: (
        "The rules do not explain the failure: the purchase meets every condition of {detail}. "
        "Check the real campaign configuration and the checkout request."
    ),
    ASK_FOR_FACTS: "The conditions cannot be decided yet: {detail} must be confirmed first.",
    CHECK_CAMPAIGN_CONFIGURATION: (
        "The sources disagree ({detail}); check the actual campaign configuration."
    ),
    KNOWLEDGE_HAS_NO_ANSWER: "The knowledge base does not answer this ticket.",
    LEAD_NEEDS_REVIEW: "A reviewed skill points at a lead ({detail}); it needs review, it is "
    "not a confirmed cause.",
}
CHECK_CONFIGURATION = "Check the live campaign configuration against the rule."
CHECK_REQUEST = "Check the checkout request the client actually sent."
CONFIRM_FACT = "Please confirm the {name} of this purchase."
REVIEW_LEAD = "Review the lead of {skill} (needs review, not a confirmed cause)."


def _results(transcript: Transcript, tool: str) -> list[Mapping[str, Any]]:
    return [
        exchange.content
        for round_ in transcript.rounds
        for exchange in round_.exchanges
        if exchange.call.name == tool
    ]


def _called(transcript: Transcript, tool: str) -> bool:
    return any(
        exchange.call.name == tool for round_ in transcript.rounds for exchange in round_.exchanges
    )


def _call(transcript: Transcript, tool: str, arguments: dict[str, Any]) -> Turn:
    index = sum(len(round_.exchanges) for round_ in transcript.rounds)
    return Turn(calls=(ToolCall(f"call-{index}", tool, json.dumps(arguments)),))


def _cite(items: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    return [{"id": str(item["id"]), "quote": str(item.get("quote") or "")} for item in items]


def _answer(code: str, detail: str, followups: list[str], citations: list[dict[str, str]]) -> Turn:
    answer = {
        "conclusion": CONCLUSIONS[code].format(detail=detail),
        "conclusion_code": code,
        "followups": followups,
        "citations": citations,
    }
    return Turn(answer=json.dumps(answer, ensure_ascii=False))


class ScriptedProvider:
    name = "scripted"

    def next_turn(self, transcript: Transcript) -> Turn:
        offered = {tool.name for tool in transcript.tools}
        query = transcript.ticket.text.strip()[:MAX_QUERY]
        if RETRIEVE_EXPERIENCE in offered and not _called(transcript, RETRIEVE_EXPERIENCE):
            return _call(transcript, RETRIEVE_EXPERIENCE, {"query": query})
        skill = self._skill_to_run(transcript, offered)
        if skill:
            return _call(transcript, RUN_SKILL, skill)
        if SEARCH_KNOWLEDGE in offered and not _called(transcript, SEARCH_KNOWLEDGE):
            return _call(transcript, SEARCH_KNOWLEDGE, {"query": query})
        turn = self._conclude(transcript)
        if transcript.answer_shape is not None and turn.answer:
            return _with_output(turn, transcript.answer_shape)
        return turn

    def _skill_to_run(self, transcript: Transcript, offered: set[str]) -> dict[str, Any] | None:
        """The first skill retrieved; once more with the ticket's text as every input a prompt
        skill said it lacks (``missing`` naming ``inputs.NAME``)."""
        if RUN_SKILL not in offered:
            return None
        runs = _results(transcript, RUN_SKILL)
        if not runs:
            for result in _results(transcript, RETRIEVE_EXPERIENCE):
                for item in result.get("items") or []:
                    if item.get("type") == "skill":
                        return {"skill_id": str(item["id"])}
            return None
        lacking = [
            str(name).removeprefix(INPUTS_PREFIX)
            for name in runs[0].get("missing") or []
            if str(name).startswith(INPUTS_PREFIX)
        ]
        if len(runs) == 1 and runs[0].get("status") == "fallback" and lacking:
            text = transcript.ticket.text.strip()[:MAX_INPUT]
            return {"skill_id": str(runs[0]["skill"]), "inputs": dict.fromkeys(lacking, text)}
        return None

    def _conclude(self, transcript: Transcript) -> Turn:
        lead = next(
            (r for r in _results(transcript, RUN_SKILL) if r.get("status") == "needs_review"),
            None,
        )
        lead_followups = [REVIEW_LEAD.format(skill=lead["skill"])] if lead else []
        search = next(
            (
                r
                for r in _results(transcript, SEARCH_KNOWLEDGE)
                if "status" in r and "error" not in r
            ),
            None,
        )
        if search is None:
            if lead is not None:
                return _lead_answer(lead)
            return Turn(answer="")
        evidence = [item for item in search.get("evidence") or [] if item.get("id")]
        by_code: dict[str, list[Mapping[str, Any]]] = {}
        for item in evidence:
            by_code.setdefault(allowed_conclusion(item), []).append(item)
        status = search.get("status")
        if status == "no_match" or not evidence:
            if status == "needs_context":
                missing = [str(name) for name in search.get("missing") or []]
                return _answer(
                    ASK_FOR_FACTS,
                    ", ".join(missing),
                    [CONFIRM_FACT.format(name=name) for name in missing],
                    [],
                )
            if lead is not None:
                return _lead_answer(lead)
            return _answer(KNOWLEDGE_HAS_NO_ANSWER, "", [], [])
        if CHECK_CAMPAIGN_CONFIGURATION in by_code:
            items = by_code[CHECK_CAMPAIGN_CONFIGURATION]
            return _answer(
                CHECK_CAMPAIGN_CONFIGURATION,
                ", ".join(str(item["id"]) for item in items),
                [CHECK_CONFIGURATION],
                _cite(items),
            )
        if ASK_FOR_FACTS in by_code:
            items = by_code[ASK_FOR_FACTS]
            missing = sorted(
                {
                    str(n)
                    for item in items
                    for n in (item.get("conditions") or {}).get("unknown", [])
                }
            )
            return _answer(
                ASK_FOR_FACTS,
                ", ".join(missing),
                [CONFIRM_FACT.format(name=name) for name in missing],
                _cite(items),
            )
        cases = by_code.get(LEAD_NEEDS_REVIEW, [])
        if RULES_EXCLUDE_PURCHASE in by_code:
            items = by_code[RULES_EXCLUDE_PURCHASE]
            detail = "; ".join(
                f"{item['id']}: {', '.join((item.get('conditions') or {}).get('mismatches', []))}"
                for item in items
            )
            return _answer(RULES_EXCLUDE_PURCHASE, detail, [], _cite([*items, *cases]))
        if RULES_DO_NOT_EXPLAIN in by_code:
            items = by_code[RULES_DO_NOT_EXPLAIN]
            return _answer(
                RULES_DO_NOT_EXPLAIN,
                ", ".join(str(item["id"]) for item in items),
                [CHECK_CONFIGURATION, CHECK_REQUEST, *lead_followups],
                _cite([*items, *cases]),
            )
        return _answer(
            LEAD_NEEDS_REVIEW, ", ".join(str(item["id"]) for item in cases), [], _cite(cases)
        )


def _lead_answer(lead: Mapping[str, Any]) -> Turn:
    skill = str(lead["skill"])
    return _answer(
        LEAD_NEEDS_REVIEW,
        skill,
        [REVIEW_LEAD.format(skill=skill)],
        [{"id": skill, "quote": f"{HISTORICAL_CASE_PREFIX}：{skill}"}],
    )


def _with_output(turn: Turn, shape: Mapping[str, Any]) -> Turn:
    """The answer with the ``output`` a prompt skill declares, filled from the answer itself:
    an enum takes the conclusion code when it lists it (else its first value), other text the
    first cited id for a property named ``…id…``, else the conclusion; a list of text the cited
    ids; a number how many items are cited; a boolean whether any is."""
    answer = json.loads(turn.answer or "{}")
    cited = [str(c["id"]) for c in answer.get("citations") or []]
    output = {
        name: _filled(name, schema, answer, cited)
        for name, schema in (shape.get("properties") or {}).items()
    }
    return Turn(answer=json.dumps({**answer, "output": output}, ensure_ascii=False))


def _filled(
    name: str, schema: Mapping[str, Any], answer: Mapping[str, Any], cited: list[str]
) -> Any:
    kind = schema.get("type")
    code = str(answer.get("conclusion_code") or "")
    if kind == "string":
        if "enum" in schema:
            return code if code in schema["enum"] else schema["enum"][0]
        wants_id = "id" in name.split("_")
        text = (cited[0] if cited else "") if wants_id else str(answer.get("conclusion") or "")
        return text[: int(schema.get("maxLength", MAX_INPUT))]
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", len(cited)), schema.get("maximum", len(cited))
        return max(low, min(high, len(cited)))
    if kind == "boolean":
        return bool(cited)
    if kind == "array":
        items = schema.get("items") or {}
        values: list[Any] = []
        if items.get("type") == "string":
            values = ([code] if code in items["enum"] else []) if "enum" in items else list(cited)
        return values[: int(schema.get("maxItems", len(values)))]
    return None
