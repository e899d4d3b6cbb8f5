"""MCP arguments that fail a tool's input schema answer the contract's structured error
``{"error": "invalid", "message", "loc"}``, never the SDK's plain text (issue 24.10)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from agentapi.services import token_create
from experience.runs.models import Reference, Run
from reviewconsole.models import Event
from tests.api.conftest import KNOWN_AT, OCCURRED_AT, SCOPE, Demo, retrieve_body, run_body
from tests.mcp.test_server import call, refusal, text_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_token(agent: User) -> str:
    return token_create(user=agent, name="mcp-invalid").text


def _without(body: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != name}


def investigate_body(**changes: Any) -> dict[str, Any]:
    return {
        "text": "小程序优惠券无法使用",
        "scope": dict(SCOPE),
        "occurred_at": OCCURRED_AT,
        "known_at": KNOWN_AT,
        **changes,
    }


CASES = [
    ("missing field", "retrieve_experience", _without(retrieve_body(), "run_id"), ["run_id"]),
    ("extra field", "retrieve_experience", retrieve_body(extra=1), ["extra"]),
    (
        "placeholder store",
        "retrieve_experience",
        retrieve_body(scope={**SCOPE, "store": "*"}),
        ["scope", "store"],
    ),
    (
        "naive datetime",
        "retrieve_experience",
        retrieve_body(now="2026-10-01T12:00:00"),
        ["now"],
    ),
    ("limit 0", "retrieve_experience", retrieve_body(limit=0), ["limit"]),
    ("limit 21", "retrieve_experience", retrieve_body(limit=21), ["limit"]),
    ("budget 0", "experience_context", {**retrieve_body(), "budget": 0}, ["budget"]),
    ("bad outcome", "run_outcome", {"run_id": "run-x", "outcome": "fixed"}, ["outcome"]),
    (
        "malformed skill id",
        "run_skill",
        {"skill_id": "skill:nope", **run_body()},
        ["skill_id"],
    ),
    ("max_calls not a number", "investigate", investigate_body(max_calls="many"), ["max_calls"]),
    ("max_calls 0 as text", "investigate", investigate_body(max_calls="0"), ["max_calls"]),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "loc"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_schema_failures_are_structured_invalid_errors(
    agent_token: str, demo: Demo, tool: str, arguments: dict[str, Any], loc: list[str]
) -> None:
    before = (Run.objects.count(), Reference.objects.count(), Event.objects.count())
    result = call(agent_token, tool, arguments)

    detail = refusal(result)
    assert detail["error"] == "invalid"
    assert detail["loc"] == loc
    assert detail["message"]
    assert "pydantic" not in text_of(result)
    assert not text_of(result).startswith("Error executing tool")
    assert (Run.objects.count(), Reference.objects.count(), Event.objects.count()) == before


def test_max_calls_sent_as_text_is_read_as_a_number(agent_token: str, demo: Demo) -> None:
    # The MCP Inspector sends an ``integer | null`` argument as a string.
    result = call(agent_token, "investigate", investigate_body(max_calls="2", run_id="mcp-inv-2"))
    assert not result.is_error, text_of(result)
    assert result.structured_content["tool_calls"] <= 2


def test_an_unknown_skill_id_is_not_found_and_writes_nothing(agent_token: str, demo: Demo) -> None:
    before = (Run.objects.count(), Reference.objects.count(), Event.objects.count())
    unknown = "skill:" + "0" * 64
    result = call(agent_token, "run_skill", {"skill_id": unknown, **run_body(run_id="mcp-nope")})

    assert result.is_error
    assert refusal(result)["error"] == "not_found"
    assert refusal(result)["loc"] == ["skill_id"]
    assert (Run.objects.count(), Reference.objects.count(), Event.objects.count()) == before
