"""The live provider against a stub chat-completions server on 127.0.0.1 (started here).

The stub speaks the OpenAI protocol and replays recorded model turns, honest and hostile: a
paraphrased quote, a dropped case prefix, an id from another run, a tool call that names the
scope, a loop that never answers. Nothing here leaves the machine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.models import Reference
from investigations.domain import (
    ANSWERED,
    BUDGET_EXHAUSTED,
    ERROR,
    REFUSED_ANSWER,
    SCOPE_ARGUMENT_REFUSED,
)
from investigations.models import Investigation
from investigations.services import investigation_run
from investigations.verification import (
    CITATION_NOT_IN_RUN,
    MISSING_CASE_PREFIX,
    QUOTE_NOT_VERBATIM,
)
from knowledge.conclusions import RULES_DO_NOT_EXPLAIN, RULES_EXCLUDE_PURCHASE
from knowledge.domain import HISTORICAL_CASE_PREFIX
from tests.investigations.conftest import AT, KNOWN, TICKET

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


# --- recorded model turns ----------------------------------------------------------------------


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return _completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        },
        "tool_calls",
    )


def answer(code: str, citations: list[tuple[str, str]], conclusion: str = "…") -> dict[str, Any]:
    content = json.dumps(
        {
            "conclusion": conclusion,
            "conclusion_code": code,
            "followups": [],
            "citations": [{"id": i, "quote": q} for i, q in citations],
        },
        ensure_ascii=False,
    )
    return _completion({"role": "assistant", "content": content}, "stop")


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_790_000_000,
        "model": "stub-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


SEARCH = tool_call("search_knowledge", {"query": TICKET})


# --- the stub server ---------------------------------------------------------------------------


@dataclass
class Stub:
    replies: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def next_reply(self) -> dict[str, Any]:
        # The last recorded turn repeats: a model stuck in a loop says the same thing forever.
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


@pytest.fixture
def stub(settings: Any) -> Iterator[Stub]:
    recorded = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            recorded.requests.append(json.loads(self.rfile.read(length)))
            recorded.paths.append(self.path)
            body = json.dumps(recorded.next_reply()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.CONSOLE_LLM_BASE_URL = f"http://127.0.0.1:{server.server_address[1]}/v1"
    settings.CONSOLE_LLM_MODEL = "stub-model"
    settings.CONSOLE_LLM_API_KEY = "test-key"
    try:
        yield recorded
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


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
