"""The live provider against a stub chat-completions server on 127.0.0.1 (``llm_stub``).

The stub speaks the OpenAI protocol and replays recorded model turns, honest and hostile: a
paraphrased quote, a dropped case prefix, an id from another run, a tool call that names the
scope, a loop that never answers. Nothing here leaves the machine.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from openai import APITimeoutError

from experience.cases.schema import TicketContext
from experience.runs.models import Reference
from investigations.domain import (
    ANSWERED,
    BUDGET_EXHAUSTED,
    ERROR,
    INSTRUCTIONS,
    REFUSED_ANSWER,
    SCOPE_ARGUMENT_REFUSED,
    ProviderTimeout,
    Ticket,
    Transcript,
)
from investigations.live import LiveProvider
from investigations.models import Investigation
from investigations.providers import provider_for
from investigations.services import investigation_run
from investigations.verification import (
    CITATION_NOT_IN_RUN,
    MISSING_CASE_PREFIX,
    QUOTE_NOT_VERBATIM,
)
from knowledge.conclusions import RULES_DO_NOT_EXPLAIN, RULES_EXCLUDE_PURCHASE
from knowledge.domain import HISTORICAL_CASE_PREFIX
from tests.investigations.conftest import AT, KNOWN, TICKET
from tests.investigations.llm_stub import Stub, answer, stub, tool_call

__all__ = ["stub"]

pytestmark = pytest.mark.django_db

RULE_B_QUOTE = "[rule] 活动B优惠券使用条件 (v1); conditions: match"
RULE_A_QUOTE = "[rule] 活动A优惠券使用条件 (v2); conditions: mismatch (mismatch: product)"
CASE_A_BODY = "[case] A店两杯水果茶优惠券无法使用 (v1); conditions: mismatch (mismatch: product)"
CASE_A_QUOTE = f"{HISTORICAL_CASE_PREFIX}：{CASE_A_BODY}"
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}


def scope(store: str, campaign: str) -> dict[str, str]:
    return {
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "store": store,
        "campaign": campaign,
        "deployment": "release-1",
    }


STORE_A = scope("store-001", "campaign-a")
STORE_B = scope("store-002", "campaign-b")


SEARCH = tool_call("search_knowledge", {"query": TICKET})


def run(actor: User, where: dict[str, str], **changes: Any) -> Investigation:
    arguments: dict[str, Any] = {
        "actor": actor,
        "text": TICKET,
        "scope": where,
        "occurred_at": datetime.fromisoformat(AT),
        "known_at": datetime.fromisoformat(KNOWN),
        "facts": FACTS,
        "provider": "live",
    }
    arguments.update(changes)
    return investigation_run(**arguments)


# --- conversations -----------------------------------------------------------------------------


def test_an_honest_model_is_answered(knowledge_base: None, operator: User, stub: Stub) -> None:
    stub.replies = [SEARCH, answer(RULES_DO_NOT_EXPLAIN, [("doc:rule-b@1", RULE_B_QUOTE)])]

    investigation = run(operator, STORE_B)

    assert investigation.status == ANSWERED, investigation.verification
    assert investigation.provider == "live"
    assert RULE_B_QUOTE in json.dumps(investigation.steps[0]["result"], ensure_ascii=False)
    # What the model was sent: the chat-completions protocol, the declared tools, the results.
    assert stub.paths == ["/v1/chat/completions"] * 2
    first, second = stub.requests
    assert first["model"] == "stub-model"
    assert [t["function"]["name"] for t in first["tools"]] == ["search_knowledge"]
    parameters = first["tools"][0]["function"]["parameters"]
    assert set(parameters["properties"]) == {"query"}  # no scope, no time: the runner binds them
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][3]["tool_call_id"] == "call_1"
    assert json.loads(second["messages"][3]["content"]) == investigation.steps[0]["result"]


def test_a_paraphrased_quote_is_refused(knowledge_base: None, operator: User, stub: Stub) -> None:
    paraphrase = "活动B的规则允许小程序购买水果茶使用优惠券"
    stub.replies = [SEARCH, answer(RULES_DO_NOT_EXPLAIN, [("doc:rule-b@1", paraphrase)])]

    investigation = run(operator, STORE_B)

    assert investigation.status == REFUSED_ANSWER
    assert investigation.verification["reasons"] == [QUOTE_NOT_VERBATIM]
    assert investigation.answer is not None  # stored with its reasons


def test_a_dropped_case_prefix_is_refused(knowledge_base: None, operator: User, stub: Stub) -> None:
    stub.replies = [
        SEARCH,
        answer(
            RULES_EXCLUDE_PURCHASE,
            [("doc:rule-a@2", RULE_A_QUOTE), ("doc:case-a@1", CASE_A_BODY)],
            conclusion="Fruit tea is not in campaign A, as in the earlier ticket.",
        ),
    ]

    investigation = run(operator, STORE_A)

    assert CASE_A_QUOTE in json.dumps(investigation.steps[0]["result"], ensure_ascii=False)
    assert investigation.status == REFUSED_ANSWER
    assert investigation.verification["reasons"] == [MISSING_CASE_PREFIX]


def test_the_same_answer_with_the_prefix_is_accepted(
    knowledge_base: None, operator: User, stub: Stub
) -> None:
    stub.replies = [
        SEARCH,
        answer(
            RULES_EXCLUDE_PURCHASE, [("doc:rule-a@2", RULE_A_QUOTE), ("doc:case-a@1", CASE_A_QUOTE)]
        ),
    ]
    assert run(operator, STORE_A).status == ANSWERED


def test_an_id_from_another_run_is_refused(
    knowledge_base: None, operator: User, stub: Stub
) -> None:
    # Store A's rule is real and its quote verbatim, but it was returned to another run.
    stub.replies = [SEARCH, answer(RULES_DO_NOT_EXPLAIN, [("doc:rule-a@2", RULE_A_QUOTE)])]
    run(operator, STORE_A, run_id="other-run")
    stub.replies = [SEARCH, answer(RULES_EXCLUDE_PURCHASE, [("doc:rule-a@2", RULE_A_QUOTE)])]

    investigation = run(operator, STORE_B, run_id="this-run")

    assert investigation.status == REFUSED_ANSWER
    assert CITATION_NOT_IN_RUN in investigation.verification["reasons"]


def test_a_tool_call_naming_the_scope_is_refused_and_recorded(
    knowledge_base: None, operator: User, stub: Stub
) -> None:
    widened = tool_call("search_knowledge", {"query": TICKET, "store": "store-001"})
    stub.replies = [
        widened,
        SEARCH,
        answer(RULES_DO_NOT_EXPLAIN, [("doc:rule-b@1", RULE_B_QUOTE)]),
    ]

    investigation = run(operator, STORE_B, run_id="widened")

    refused, searched = investigation.steps
    assert refused["outcome"] == SCOPE_ARGUMENT_REFUSED
    assert refused["refused_arguments"] == ["store"]
    assert refused["result"] is None
    assert searched["outcome"] == "ok"
    # Only store B's documents were ever read in this run.
    read = set(Reference.objects.filter(run_id="widened").values_list("item_id", flat=True))
    assert read and not any("rule-a" in item or "case-a" in item for item in read)
    # The model was told why, in the tool message of its refused call.
    told = json.loads(stub.requests[1]["messages"][3]["content"])
    assert told["error"] == SCOPE_ARGUMENT_REFUSED
    assert investigation.status == ANSWERED


def test_a_loop_that_never_answers_exhausts_the_budget(
    knowledge_base: None, operator: User, stub: Stub
) -> None:
    stub.replies = [SEARCH]

    investigation = run(operator, STORE_B, max_calls=3)

    assert investigation.status == BUDGET_EXHAUSTED
    assert investigation.tool_calls == 3
    assert investigation.answer is None
    assert len(stub.requests) == 4  # three calls ran; the fourth request asked for one more


def test_an_unreachable_endpoint_ends_in_error(
    knowledge_base: None, operator: User, settings: Any
) -> None:
    settings.CONSOLE_LLM_BASE_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    settings.CONSOLE_LLM_MODEL = "stub-model"

    investigation = run(operator, STORE_B)

    assert investigation.status == ERROR
    assert investigation.reason.startswith("provider_error")


# --- how long a model call may wait (issue 24, item 4) -----------------------------------------


def _transcript(seconds_left: float | None) -> Transcript:
    ticket = Ticket(TICKET, STORE_B, TicketContext(None, None))
    return Transcript(INSTRUCTIONS, ticket, (), (), seconds_left)


@pytest.mark.parametrize(
    ("seconds_left", "waits", "budget_left"),
    [(2.5, 2.5, True), (100.0, 30.0, False), (None, 30.0, False)],
)
def test_a_model_call_waits_for_the_budget_left_at_most_the_configured_timeout(
    monkeypatch: pytest.MonkeyPatch, seconds_left: float | None, waits: float, budget_left: bool
) -> None:
    provider = LiveProvider(base_url="http://127.0.0.1:9/v1", model="stub-model", timeout=30.0)
    sent: dict[str, Any] = {}

    def create(**request: Any) -> Any:
        sent.update(request)
        raise APITimeoutError(request=None)  # type: ignore[arg-type]  # what the SDK raises

    monkeypatch.setattr(provider.client.chat.completions, "create", create)
    with pytest.raises(ProviderTimeout) as cut:
        provider.next_turn(_transcript(seconds_left))
    assert sent["timeout"] == waits
    assert cut.value.budget_left is budget_left


def test_the_model_call_timeout_is_configured(settings: Any) -> None:
    settings.CONSOLE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.CONSOLE_LLM_MODEL = "stub-model"
    settings.LLM_TIMEOUT_SECONDS = 7.0
    provider = provider_for("live")
    assert isinstance(provider, LiveProvider) and provider.timeout == 7.0
