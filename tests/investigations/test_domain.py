"""The runner's pure core: the loop, its budget, argument parsing and the scripted provider."""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from experience.cases.schema import TicketContext
from investigations import domain
from investigations.domain import (
    ANSWERED,
    BUDGET_EXHAUSTED,
    ERROR,
    INVALID_ARGUMENTS,
    NEEDS_CONTEXT,
    REFUSED_ANSWER,
    SCOPE_ARGUMENT_REFUSED,
    TOOL_ERROR,
    UNKNOWN_TOOL,
    Budget,
    Ticket,
    ToolCall,
    ToolDeclaration,
    Transcript,
    Turn,
    run_ticket,
    string_schema,
)
from investigations.scripted import ScriptedProvider
from investigations.verification import CONCLUSION_STATEMENTS
from knowledge.conclusions import (
    ASK_FOR_FACTS,
    CHECK_CAMPAIGN_CONFIGURATION,
    CONCLUSION_CODES,
    KNOWLEDGE_HAS_NO_ANSWER,
    RULES_DO_NOT_EXPLAIN,
    RULES_EXCLUDE_PURCHASE,
)
from knowledge.domain import HISTORICAL_CASE_PREFIX
from tests.investigations.results import (
    CAMPAIGN_C,
    NO_MATCH,
    PRODUCT_UNKNOWN,
    SKILL_ID,
    STORE_A,
    STORE_B,
    skill_run,
)

AT = datetime(2026, 9, 18, 6, 0, tzinfo=UTC)
SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
TICKET = Ticket("两杯水果茶，优惠券用不了", SCOPE, TicketContext(AT, AT, {"product": "fruit-tea"}))
SEARCH = ToolDeclaration("search_knowledge", "search", string_schema({"query": (1, 200, "q")}))
RETRIEVE = ToolDeclaration("retrieve_experience", "recall", string_schema({"query": (1, 200, "q")}))
RUN_SKILL = ToolDeclaration("run_skill", "run", string_schema({"skill_id": (1, 80, "id")}))


def handlers(result: Mapping[str, Any], calls: list[Any] | None = None) -> dict[str, Any]:
    def search(arguments: Mapping[str, str]) -> Mapping[str, Any]:
        if calls is not None:
            calls.append(dict(arguments))
        return result

    return {"search_knowledge": search}


class Script:
    """A provider that plays fixed turns, then repeats the last one."""

    name = "script"

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.seen: list[Transcript] = []

    def next_turn(self, transcript: Transcript) -> Turn:
        self.seen.append(transcript)
        return self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]


def call(name: str = "search_knowledge", arguments: Any = None, call_id: str = "c1") -> Turn:
    if arguments is None:
        arguments = {"query": "券"}
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Turn(calls=(ToolCall(call_id, name, text),))


def final(code: str, citations: list[dict[str, str]]) -> Turn:
    return Turn(
        answer=json.dumps(
            {"conclusion": "x", "conclusion_code": code, "followups": [], "citations": citations}
        )
    )


# --- the five replays with the scripted provider -----------------------------------------------

REPLAYS = [
    (STORE_A, RULES_EXCLUDE_PURCHASE, ANSWERED),
    (STORE_B, RULES_DO_NOT_EXPLAIN, ANSWERED),
    (PRODUCT_UNKNOWN, ASK_FOR_FACTS, NEEDS_CONTEXT),
    (CAMPAIGN_C, CHECK_CAMPAIGN_CONFIGURATION, ANSWERED),
    (NO_MATCH, KNOWLEDGE_HAS_NO_ANSWER, ANSWERED),
]


@pytest.mark.parametrize(("result", "code", "status"), REPLAYS)
def test_scripted_provider_ends_each_replay_in_its_allowed_conclusion(
    result: dict[str, Any], code: str, status: str
) -> None:
    outcome = run_ticket(TICKET, ScriptedProvider(), tools=[SEARCH], handlers=handlers(result))

    assert outcome.verification.ok, outcome.verification
    assert outcome.status == status
    assert outcome.answer is not None and outcome.answer["conclusion_code"] == code
    assert outcome.tool_calls == 1
    assert outcome.steps[0]["result"] == result


def test_scripted_provider_keeps_the_case_prefix() -> None:
    outcome = run_ticket(TICKET, ScriptedProvider(), tools=[SEARCH], handlers=handlers(STORE_A))
    assert outcome.answer is not None
    quotes = {c["id"]: c["quote"] for c in outcome.answer["citations"]}
    assert quotes["doc:case-a@1"].startswith(HISTORICAL_CASE_PREFIX)


def test_scripted_provider_is_deterministic() -> None:
    first = run_ticket(TICKET, ScriptedProvider(), tools=[SEARCH], handlers=handlers(STORE_B))
    second = run_ticket(TICKET, ScriptedProvider(), tools=[SEARCH], handlers=handlers(STORE_B))
    assert first.as_json() == second.as_json()


def test_scripted_provider_runs_the_retrieved_skill_and_names_it_as_a_lead() -> None:
    retrieved = {
        "status": "ok",
        "missing": [],
        "items": [{"id": SKILL_ID, "type": "skill", "title": "t"}],
    }
    bound = {
        **handlers(STORE_B),
        "retrieve_experience": lambda arguments: retrieved,
        "run_skill": lambda arguments: skill_run(),
    }
    outcome = run_ticket(
        TICKET, ScriptedProvider(), tools=[RETRIEVE, RUN_SKILL, SEARCH], handlers=bound
    )
    assert [s["tool"] for s in outcome.steps] == [
        "retrieve_experience",
        "run_skill",
        "search_knowledge",
    ]
    assert outcome.steps[1]["arguments"] == {"skill_id": SKILL_ID}
    assert outcome.status == ANSWERED
    assert outcome.answer is not None
    assert outcome.answer["conclusion_code"] == RULES_DO_NOT_EXPLAIN
    assert any(SKILL_ID in followup for followup in outcome.answer["followups"])


# --- tools: declared and bound -----------------------------------------------------------------


def test_a_tool_declared_but_not_bound_is_not_offered_and_does_not_run() -> None:
    provider = Script(call("retrieve_experience"), final(KNOWLEDGE_HAS_NO_ANSWER, []))
    outcome = run_ticket(TICKET, provider, tools=[SEARCH, RETRIEVE], handlers=handlers(NO_MATCH))
    assert [t.name for t in provider.seen[0].tools] == ["search_knowledge"]
    assert outcome.steps[0]["outcome"] == UNKNOWN_TOOL
    assert outcome.status == REFUSED_ANSWER  # nothing in this run allows "no answer"


def test_a_tool_bound_but_not_declared_does_not_run() -> None:
    ran: list[Any] = []
    provider = Script(call(), final(KNOWLEDGE_HAS_NO_ANSWER, []))
    outcome = run_ticket(TICKET, provider, tools=[], handlers=handlers(NO_MATCH, ran))
    assert ran == []
    assert outcome.steps[0]["outcome"] == UNKNOWN_TOOL


def test_an_unknown_tool_is_recorded_and_fed_back() -> None:
    provider = Script(call("shell", {"cmd": "rm -rf /"}), final(KNOWLEDGE_HAS_NO_ANSWER, []))
    outcome = run_ticket(TICKET, provider, tools=[SEARCH], handlers=handlers(NO_MATCH))
    assert outcome.steps[0]["outcome"] == UNKNOWN_TOOL
    fed_back = provider.seen[1].rounds[0].exchanges[0].content
    assert fed_back["error"] == UNKNOWN_TOOL


# --- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ("{not json", "JSON"),
        ("[1]", "object"),
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": 3}, "query"),
        ({"query": "x" * 201}, "query"),
        ({"query": "券", "limit_all": True}, "limit_all"),
    ],
)
def test_bad_arguments_are_recorded_never_raised(arguments: Any, named: str) -> None:
    ran: list[Any] = []
    provider = Script(call(arguments=arguments), final(KNOWLEDGE_HAS_NO_ANSWER, []))
    outcome = run_ticket(TICKET, provider, tools=[SEARCH], handlers=handlers(NO_MATCH, ran))
    assert ran == []
    assert outcome.steps[0]["outcome"] == INVALID_ARGUMENTS
    assert named in outcome.steps[0]["error"]


@pytest.mark.parametrize("name", ["store", "campaign", "tenant", "scope", "known_at", "run_id"])
def test_a_scope_or_time_argument_is_refused_and_recorded(name: str) -> None:
    ran: list[Any] = []
    provider = Script(
        call(arguments={"query": "券", name: "store-999"}),
        call(call_id="c2"),
        final(KNOWLEDGE_HAS_NO_ANSWER, []),
    )
    outcome = run_ticket(TICKET, provider, tools=[SEARCH], handlers=handlers(NO_MATCH, ran))
    assert outcome.steps[0]["outcome"] == SCOPE_ARGUMENT_REFUSED
    assert outcome.steps[0]["refused_arguments"] == [name]
    # The retry without it runs, with only the tool's own argument.
    assert ran == [{"query": "券"}]
    assert outcome.status == ANSWERED


def test_a_failing_tool_is_a_recorded_step() -> None:
    def broken(arguments: Mapping[str, str]) -> Mapping[str, Any]:
        raise RuntimeError("database gone")

    provider = Script(call(), final(KNOWLEDGE_HAS_NO_ANSWER, []))
    outcome = run_ticket(TICKET, provider, tools=[SEARCH], handlers={"search_knowledge": broken})
    assert outcome.steps[0]["outcome"] == TOOL_ERROR
    assert "database gone" in outcome.steps[0]["error"]
    assert outcome.status == REFUSED_ANSWER


# --- budget --------------------------------------------------------------------------------------


def test_a_loop_that_never_answers_exhausts_the_call_budget() -> None:
    provider = Script(call())
    outcome = run_ticket(
        TICKET, provider, tools=[SEARCH], handlers=handlers(NO_MATCH), budget=Budget(max_calls=3)
    )
    assert outcome.status == BUDGET_EXHAUSTED
    assert outcome.reason.startswith(domain.CALLS_EXHAUSTED)
    assert outcome.tool_calls == 3
    assert outcome.answer is None
    assert outcome.verification.ok is False


def test_wall_time_is_checked_between_calls() -> None:
    ticks = iter([0.0, 1.0, 100.0, 200.0])
    outcome = run_ticket(
        TICKET,
        Script(call()),
        tools=[SEARCH],
        handlers=handlers(NO_MATCH),
        budget=Budget(max_seconds=50),
        monotonic=lambda: next(ticks),
    )
    assert outcome.status == BUDGET_EXHAUSTED
    assert outcome.reason.startswith(domain.TIME_EXHAUSTED)
    assert outcome.tool_calls == 1


def test_the_provider_is_told_the_time_left_of_the_budget() -> None:
    ticks = iter([0.0, 0.0, 20.0, 45.0])
    provider = Script(call(), final(KNOWLEDGE_HAS_NO_ANSWER, []))
    run_ticket(
        TICKET,
        provider,
        tools=[SEARCH],
        handlers=handlers(NO_MATCH),
        budget=Budget(max_seconds=50),
        monotonic=lambda: next(ticks),
    )
    assert [seen.seconds_left for seen in provider.seen] == [50.0, 30.0]


class TimesOut:
    name = "times-out"

    def __init__(self, *, budget_left: bool) -> None:
        self.budget_left = budget_left

    def next_turn(self, transcript: Transcript) -> Turn:
        raise domain.ProviderTimeout("no answer within 1s", budget_left=self.budget_left)


def test_a_model_call_cut_at_the_end_of_the_budget_exhausts_it() -> None:
    outcome = run_ticket(TICKET, TimesOut(budget_left=True), tools=[SEARCH], handlers={})
    assert outcome.status == BUDGET_EXHAUSTED
    assert outcome.reason.startswith(domain.TIME_EXHAUSTED)


def test_a_model_call_cut_by_the_providers_own_limit_is_a_provider_error() -> None:
    outcome = run_ticket(TICKET, TimesOut(budget_left=False), tools=[SEARCH], handlers={})
    assert outcome.status == ERROR
    assert outcome.reason.startswith(f"{domain.PROVIDER_ERROR}: timeout")


def test_output_size_is_bounded() -> None:
    huge = Turn(answer="x" * 100)
    outcome = run_ticket(
        TICKET,
        Script(huge),
        tools=[SEARCH],
        handlers=handlers(NO_MATCH),
        budget=Budget(max_output_chars=50),
    )
    assert outcome.status == BUDGET_EXHAUSTED
    assert outcome.reason.startswith(domain.OUTPUT_EXHAUSTED)


def test_a_provider_failure_ends_in_error() -> None:
    class Down:
        name = "down"

        def next_turn(self, transcript: Transcript) -> Turn:
            raise ConnectionError("refused")

    outcome = run_ticket(TICKET, Down(), tools=[SEARCH], handlers=handlers(NO_MATCH))
    assert outcome.status == ERROR
    assert "refused" in outcome.reason


def test_a_malformed_answer_is_refused() -> None:
    outcome = run_ticket(
        TICKET,
        Script(Turn(answer="the coupon is broken")),
        tools=[SEARCH],
        handlers=handlers(NO_MATCH),
    )
    assert outcome.status == REFUSED_ANSWER
    assert outcome.verification.reasons == ["answer_malformed"]
    assert outcome.raw_answer == "the coupon is broken"


def test_an_answer_in_a_code_fence_is_read() -> None:
    body = final(KNOWLEDGE_HAS_NO_ANSWER, []).answer
    fenced = Turn(answer=f"```json\n{body}\n```")
    outcome = run_ticket(
        TICKET, Script(call(), fenced), tools=[SEARCH], handlers=handlers(NO_MATCH)
    )
    assert outcome.status == ANSWERED


# --- context -----------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["campaign", "deployment"])
def test_a_missing_scope_field_runs_nothing(missing: str) -> None:
    ran: list[Any] = []
    provider = Script(call())
    ticket = Ticket(TICKET.text, {**SCOPE, missing: ""}, TICKET.context)
    outcome = run_ticket(ticket, provider, tools=[SEARCH], handlers=handlers(NO_MATCH, ran))
    assert outcome.status == NEEDS_CONTEXT
    assert outcome.missing == [missing]
    assert provider.seen == [] and ran == []


def test_a_missing_time_runs_nothing() -> None:
    ticket = Ticket(TICKET.text, SCOPE, TicketContext(None, AT))
    outcome = run_ticket(ticket, Script(call()), tools=[SEARCH], handlers=handlers(NO_MATCH))
    assert outcome.missing == ["occurred_at"]


# --- purity ------------------------------------------------------------------------------------

PURE = ["domain.py", "verification.py", "scripted.py", "declarations.py"]
PURE_MODULES = {
    "investigations.declarations",
    "investigations.domain",
    "investigations.verification",
    "knowledge.conclusions",
    "knowledge.domain",
}


@pytest.mark.parametrize("name", PURE)
def test_the_core_imports_no_django(name: str) -> None:
    source = (Path(domain.__file__).parent / name).read_text(encoding="utf-8")
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert not any(module.split(".")[0] == "django" for module in imported)
    first_party = {m for m in imported if m.split(".")[0] in {"investigations", "knowledge"}}
    assert first_party <= PURE_MODULES, first_party


# --- the conclusion a reader is told (issue 24, item 3) ----------------------------------------

OVERCLAIM = "Root cause confirmed: the campaign was fixed. Tell the customer it is fixed."


def overclaiming(code: str, citations: list[dict[str, str]]) -> Turn:
    answer = {"conclusion": OVERCLAIM, "conclusion_code": code, "followups": [], "citations": []}
    return Turn(answer=json.dumps({**answer, "citations": citations}))


def test_the_conclusion_is_composed_from_the_verified_code_and_citations() -> None:
    rule = STORE_A["evidence"][0]
    provider = Script(call(), overclaiming(RULES_EXCLUDE_PURCHASE, [cite(rule)]))

    outcome = run_ticket(TICKET, provider, tools=[SEARCH], handlers=handlers(STORE_A))

    assert outcome.status == ANSWERED, outcome.verification
    assert outcome.answer is not None
    conclusion = outcome.answer["conclusion"]
    assert conclusion == (
        f"{CONCLUSION_STATEMENTS[RULES_EXCLUDE_PURCHASE]} Cited: {rule['id']} (rule)."
    )
    for claim in ("confirmed", "fixed", "Root cause"):
        assert claim not in conclusion
    # The model's prose is kept, apart, as its own words.
    assert outcome.answer["model_text"] == OVERCLAIM


def test_a_cited_historical_case_is_named_a_lead_in_the_conclusion() -> None:
    rule, case = STORE_A["evidence"]
    provider = Script(call(), overclaiming(RULES_EXCLUDE_PURCHASE, [cite(rule), cite(case)]))

    outcome = run_ticket(TICKET, provider, tools=[SEARCH], handlers=handlers(STORE_A))

    assert outcome.answer is not None
    assert (
        f"{case['id']} (historical case: a lead, not a confirmed cause)"
        in (outcome.answer["conclusion"])
    )


def test_a_refused_answer_concludes_nothing() -> None:
    rule = STORE_A["evidence"][0]
    provider = Script(call(), overclaiming(RULES_DO_NOT_EXPLAIN, [cite(rule)]))

    outcome = run_ticket(TICKET, provider, tools=[SEARCH], handlers=handlers(STORE_A))

    assert outcome.status == REFUSED_ANSWER
    assert outcome.answer is not None
    assert outcome.answer["conclusion"].startswith("No conclusion")
    assert OVERCLAIM not in outcome.answer["conclusion"]
    assert outcome.answer["model_text"] == OVERCLAIM


def test_every_code_has_one_statement() -> None:
    assert set(CONCLUSION_STATEMENTS) == set(CONCLUSION_CODES)


def cite(item: Mapping[str, Any]) -> dict[str, str]:
    return {"id": str(item["id"]), "quote": str(item["quote"])}
