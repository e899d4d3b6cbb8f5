"""The MCP server, driven by the SDK's in-process client: tools, schemas, calls, refusals."""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

from agentapi.api import api
from agentapi.limits import (
    LIVE_RETRY_AFTER_SECONDS,
    TOO_MANY_LIVE,
    TooBusy,
    live_run_held,
    live_run_stale_after,
)
from agentapi.mcp_server import TOOLS as SPECS
from agentapi.mcp_server import build_server
from agentapi.models import LiveRun
from agentapi.services import token_create, token_revoke
from experience.cases.models import Case, EvidenceCheck
from experience.runs.models import Reference, Run
from investigations.services import RUN_ID_TAKEN
from reviewconsole import clock
from tests.api.conftest import (
    FACTS,
    KNOWN_AT,
    OCCURRED_AT,
    SCOPE,
    BearerClient,
    Demo,
    case_body,
    retrieve_body,
    run_body,
    search_body,
)

pytestmark = pytest.mark.django_db

T = TypeVar("T")
TOOLS = {
    "search_knowledge",
    "retrieve_experience",
    "run_skill",
    "propose_case",
    "investigate",
    "experience_context",
    "run_outcome",
}


def with_client(token: str, scenario: Callable[[Client], Awaitable[T]]) -> T:
    """Run ``scenario`` against an in-process server acting as ``token``'s user.

    Called from this synchronous test, the tools' thread-sensitive ORM calls come back to the
    test's thread, so they see the test's database transaction.
    """
    server = build_server(token, manage_connections=False)

    async def run() -> T:
        async with Client(server) as client:
            return await scenario(client)

    return async_to_sync(run)()


def call(token: str, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    async def scenario(client: Client) -> CallToolResult:
        return await client.call_tool(tool, arguments)

    return with_client(token, scenario)


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def refusal(result: CallToolResult) -> dict[str, Any]:
    """A refused call's detail: ``isError`` with the detail as JSON text and no structured
    content, which the tool's outputSchema (a successful answer) would not describe."""
    assert result.is_error, result
    assert result.structured_content is None, result.structured_content
    detail: dict[str, Any] = json.loads(text_of(result))
    return detail


@pytest.fixture
def agent_token(agent: User) -> str:
    return token_create(user=agent, name="mcp").text


def test_an_unknown_tool_is_a_protocol_error_on_every_transport(agent_token: str) -> None:
    """The specification's tools page: an unknown tool is JSON-RPC error -32602, not a tool
    result (the stdio server is built as the HTTP one; tests/mcp/test_http_edges.py)."""
    with pytest.raises(BaseException) as raised:
        call(agent_token, "no_such_tool", {})
    refused = _mcp_error(raised.value)
    assert refused is not None, raised.value
    assert refused.code == -32602
    assert refused.error.message == "Unknown tool: no_such_tool"


def _mcp_error(error: BaseException) -> MCPError | None:
    """The MCPError raised, or held by the task groups the in-process client raises from."""
    if isinstance(error, BaseExceptionGroup):
        found = (_mcp_error(inner) for inner in error.exceptions)
        return next((inner for inner in found if inner is not None), None)
    return error if isinstance(error, MCPError) else None


def test_lists_the_tools_with_input_schemas(agent_token: str) -> None:
    async def scenario(client: Client) -> Any:
        return await client.list_tools()

    listed = {tool.name: tool for tool in with_client(agent_token, scenario).tools}
    assert set(listed) == TOOLS
    for tool in listed.values():
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        assert tool.description
    assert {"query", "campaign", "facts"} <= set(
        listed["search_knowledge"].input_schema["properties"]
    )
    assert set(listed["retrieve_experience"].input_schema["required"]) == {
        "query",
        "scope",
        "run_id",
    }
    assert "skill_id" in listed["run_skill"].input_schema["required"]
    assert "diagnosis" in listed["propose_case"].input_schema["properties"]
    assert listed["search_knowledge"].annotations.read_only_hint is True


def test_search_knowledge(agent_token: str, demo: Demo) -> None:
    result = call(agent_token, "search_knowledge", search_body())
    assert not result.is_error
    assert result.structured_content["status"] == "retrieved"
    # Every item says how relevant it is, and which branches found it (the vector branch is off
    # here: no similarity).
    for item in result.structured_content["evidence"]:
        assert 0.0 < item["relevance"] <= 1.0
        assert item["found_by"] and item.get("similarity") is None


def test_search_without_campaign_needs_context(agent_token: str, demo: Demo) -> None:
    body = search_body()
    del body["campaign"]
    result = call(agent_token, "search_knowledge", body)
    assert result.structured_content["status"] == "needs_context"
    assert result.structured_content["missing"] == ["campaign"]


def test_retrieve_experience_records_reads(agent_token: str, demo: Demo) -> None:
    result = call(agent_token, "retrieve_experience", retrieve_body(run_id="mcp-run-1"))
    assert not result.is_error
    items = result.structured_content["items"]
    assert items
    assert all(0.0 <= item["relevance"] <= 1.0 for item in items)
    assert set(Reference.objects.filter(run_id="mcp-run-1").values_list("item_id", flat=True)) == {
        item["id"] for item in items
    }


def test_run_skill(agent_token: str, demo: Demo, agent: User) -> None:
    result = call(
        agent_token, "run_skill", {"skill_id": demo.skill, **run_body(run_id="mcp-run-2")}
    )
    assert not result.is_error
    assert result.structured_content["status"] == "needs_review"
    assert Run.objects.get(run_id="mcp-run-2").actor == agent


def test_propose_case_as_the_agent_with_unchecked_evidence(
    agent_token: str, agent: User, at_now: Any
) -> None:
    result = call(agent_token, "propose_case", case_body())
    assert not result.is_error
    proposed = result.structured_content
    assert proposed["status"] == "candidate"
    case = Case.objects.get(pk=proposed["id"])
    assert case.submitted_by == agent
    assert not EvidenceCheck.objects.filter(evidence__case=case).exists()


def test_bad_arguments_are_an_error_naming_the_field(agent_token: str, demo: Demo) -> None:
    naive = call(agent_token, "search_knowledge", search_body(occurred_at="2026-09-18T14:00:00"))
    assert naive.is_error
    assert "occurred_at" in text_of(naive)
    placeholder = call(
        agent_token, "retrieve_experience", retrieve_body(scope={**SCOPE, "campaign": "*"})
    )
    assert placeholder.is_error
    assert "campaign" in text_of(placeholder)
    unknown = call(agent_token, "search_knowledge", search_body(submitted_by="rita"))
    assert unknown.is_error
    assert "submitted_by" in text_of(unknown)


def test_a_service_refusal_names_the_json_path(agent_token: str, at_now: Any) -> None:
    result = call(agent_token, "propose_case", case_body(valid_to="2026-01-01T00:00:00+08:00"))
    assert result.is_error
    assert refusal(result)["error"] == "invalid"
    assert refusal(result)["loc"] == ["valid_to"]


def test_a_role_without_the_permission_is_refused(agent: User, demo: Demo) -> None:
    token = token_create(user=agent).text
    Group.objects.get(name="agent").permissions.remove(
        Permission.objects.get(codename="search_knowledge")
    )
    result = call(token, "search_knowledge", search_body())
    assert result.is_error
    assert refusal(result)["error"] == "forbidden"


def test_a_token_revoked_while_serving_stops_the_next_call(agent: User, demo: Demo) -> None:
    issued = token_create(user=agent)
    revoke = sync_to_async(lambda: token_revoke(token=issued.token))

    async def scenario(client: Client) -> tuple[CallToolResult, CallToolResult]:
        before = await client.call_tool("search_knowledge", search_body())
        await revoke()
        after = await client.call_tool("search_knowledge", search_body())
        return before, after

    before, after = with_client(issued.text, scenario)
    assert not before.is_error
    assert after.is_error
    assert refusal(after)["error"] == "unauthorized"


def test_the_command_refuses_a_missing_or_invalid_token(
    agent: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONSOLE_AGENT_TOKEN", raising=False)
    with pytest.raises(CommandError, match="--token"):
        call_command("mcp_server", stdout=io.StringIO())
    with pytest.raises(CommandError, match="invalid"):
        call_command("mcp_server", "--token", "rca_0123456789ab_" + "x" * 43, stdout=io.StringIO())
    issued = token_create(user=agent)
    token_revoke(token=issued.token)
    monkeypatch.setenv("CONSOLE_AGENT_TOKEN", issued.text)
    with pytest.raises(CommandError, match="revoked"):
        call_command("mcp_server", stdout=io.StringIO())


def test_experience_context_and_run_outcome(agent_token: str, demo: Demo) -> None:
    body = {**retrieve_body(run_id="mcp-ctx-1"), "budget": 200}
    block = call(agent_token, "experience_context", body)
    assert not block.is_error
    assert block.structured_content["tokens"] <= 200
    assert block.structured_content["items"]
    outcome = call(agent_token, "run_outcome", {"run_id": "mcp-ctx-1", "outcome": "unresolved"})
    assert not outcome.is_error
    assert outcome.structured_content["outcome"] == "unresolved"
    refused = call(agent_token, "run_outcome", {"run_id": "mcp-none", "outcome": "unresolved"})
    assert refused.is_error and refusal(refused)["loc"] == ["run_id"]
    # Unknown, as over HTTP (404): the error kind every unknown id has.
    assert refusal(refused)["error"] == "not_found"


def _validate(schema: dict[str, Any], content: Any) -> None:
    Draft202012Validator.check_schema(schema)
    errors = sorted(Draft202012Validator(schema).iter_errors(content), key=str)
    assert not errors, errors[0]


def test_every_tool_declares_the_api_response_as_its_output_schema(agent_token: str) -> None:
    async def scenario(client: Client) -> Any:
        return await client.list_tools()

    components = api.get_openapi_schema()["components"]["schemas"]
    listed = {tool.name: tool for tool in with_client(agent_token, scenario).tools}
    for spec in SPECS:
        declared = listed[spec.name].output_schema
        assert declared is not None, spec.name
        Draft202012Validator.check_schema(declared)
        # The HTTP API's answer for the same operation, as its OpenAPI schema describes it.
        response = components[spec.result.__name__]
        assert declared["type"] == "object"
        assert set(declared["properties"]) == set(response["properties"]), spec.name
        assert set(declared.get("required", ())) == set(response.get("required", ())), spec.name


def test_every_successful_call_is_structured_content_of_the_declared_schema(
    agent_token: str, demo: Demo
) -> None:
    run_id = "mcp-shapes-1"
    calls = [
        ("search_knowledge", search_body()),
        ("retrieve_experience", retrieve_body(run_id=run_id)),
        ("run_skill", {"skill_id": demo.skill, **run_body(run_id=run_id)}),
        ("experience_context", {**retrieve_body(run_id=run_id), "budget": 200}),
        ("run_outcome", {"run_id": run_id, "outcome": "resolved_by_lead", "note": "fixed"}),
        ("propose_case", case_body()),
        (
            "investigate",
            {
                "text": "小程序优惠券无法使用",
                "scope": dict(SCOPE),
                "occurred_at": OCCURRED_AT,
                "known_at": KNOWN_AT,
                "facts": dict(FACTS),
            },
        ),
    ]

    async def scenario(client: Client) -> list[tuple[Any, CallToolResult]]:
        schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
        return [(schemas[name], await client.call_tool(name, body)) for name, body in calls]

    answers = with_client(agent_token, scenario)
    assert {name for name, _ in calls} == TOOLS
    for (name, _), (schema, result) in zip(calls, answers, strict=True):
        assert not result.is_error, (name, result.structured_content)
        _validate(schema, result.structured_content)
        # The text block carries the same answer, for clients that read only text.
        assert json.loads(text_of(result)) == result.structured_content


def test_a_tool_answers_what_the_http_api_answers_for_the_same_call(
    agent_token: str, demo: Demo
) -> None:
    """The outputSchema is the API's response: the structured content has its every field, an
    optional one as null (a skill retrieved has no lesson_type or conclusion), as the API writes
    it; a client reading either gets the same keys."""
    result = call(agent_token, "retrieve_experience", retrieve_body(run_id="mcp-alike-1"))
    expected = BearerClient(agent_token).post_json(
        "/api/v1/experience/retrieve", retrieve_body(run_id="mcp-alike-2")
    )
    assert expected.status_code == 200
    got = result.structured_content
    assert got is not None and not result.is_error
    skills = [item for item in got["items"] if item["type"] == "skill"]
    assert skills and all(
        item["lesson_type"] is None and item["conclusion"] is None for item in skills
    )
    assert {**got, "run_id": None} == {**expected.json(), "run_id": None}


def test_a_recipe_skill_run_answers_as_the_api_without_the_prompt_form_fields(
    agent_token: str, demo: Demo
) -> None:
    """The API leaves out what a recipe skill's run does not set (form, provider, answer,
    verification, output, a step's outcome); the tool answers the same keys, not nulls."""
    result = call(
        agent_token, "run_skill", {"skill_id": demo.skill, **run_body(run_id="mcp-recipe-1")}
    )
    expected = BearerClient(agent_token).post_json(
        f"/api/v1/skills/{demo.skill}/run", run_body(run_id="mcp-recipe-2")
    )
    assert expected.status_code == 200 and not result.is_error
    got = result.structured_content
    assert got is not None
    assert not {"form", "provider", "answer", "verification", "output"} & set(got)
    assert all("outcome" not in step for step in got["steps"])
    assert {**got, "run_id": None} == {**expected.json(), "run_id": None}


def test_tool_calls_count_against_the_api_rate_of_the_account(
    agent: User, demo: Demo, settings: Any
) -> None:
    settings.CONSOLE_API_RATE = "2/m"
    token = token_create(user=agent).text
    http = BearerClient(token)
    assert http.post_json("/api/v1/knowledge/search", search_body()).status_code == 200
    allowed = call(token, "search_knowledge", search_body())
    assert not allowed.is_error
    refused = call(token, "search_knowledge", search_body())
    assert refused.is_error
    assert refusal(refused)["error"] == "rate_limited"
    assert 1 <= refusal(refused)["retry_after"] <= 60
    assert http.post_json("/api/v1/knowledge/search", search_body()).status_code == 429


def test_live_investigations_count_with_the_accounts_queued_ones(
    agent: User, demo: Demo, settings: Any
) -> None:
    """A live run holds the call (and a thread of a remote server) for the model's time: the
    account's limit of live investigations covers those the MCP server runs too."""
    settings.CONSOLE_API_LIVE_INVESTIGATIONS = 1
    settings.CONSOLE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.CONSOLE_LLM_MODEL = "queued-only"
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    token = token_create(user=agent).text
    body = {
        "text": "小程序优惠券无法使用",
        "scope": dict(SCOPE),
        "occurred_at": OCCURRED_AT,
        "known_at": KNOWN_AT,
        "facts": dict(FACTS),
    }
    queued = BearerClient(token).post_json("/api/v1/investigations", {**body, "provider": "live"})
    assert queued.status_code == 202
    refused = call(token, "investigate", {**body, "provider": "live"})
    assert refused.is_error
    assert refusal(refused) == {
        "error": "rate_limited",
        "message": TOO_MANY_LIVE.format(limit=1),
        "retry_after": LIVE_RETRY_AFTER_SECONDS,
    }
    # Scripted runs answer at once and are not counted.
    assert not call(token, "investigate", body).is_error


def test_live_runs_held_within_calls_are_counted_per_account(
    agent: User, make_user: Callable[[str, str], User], settings: Any
) -> None:
    settings.CONSOLE_API_LIVE_INVESTIGATIONS = 1
    other = make_user("agent-9", "agent")
    with live_run_held(agent):
        with pytest.raises(TooBusy), live_run_held(agent):
            pass
        with live_run_held(other):
            pass
    with live_run_held(agent):
        pass


def test_a_live_run_left_by_a_process_that_died_stops_counting(agent: User, settings: Any) -> None:
    """A row whose call can no longer be running (its process died) holds no place."""
    settings.CONSOLE_API_LIVE_INVESTIGATIONS = 1
    now = clock.now()
    left = LiveRun.objects.create(actor=agent, started_at=now - live_run_stale_after())
    with live_run_held(agent):
        assert not LiveRun.objects.filter(pk=left.pk).exists()
    recent = LiveRun.objects.create(
        actor=agent, started_at=now - live_run_stale_after() + timedelta(seconds=1)
    )
    with pytest.raises(TooBusy), live_run_held(agent):
        pass
    assert LiveRun.objects.filter(pk=recent.pk).exists()


def test_over_http_the_token_comes_with_each_request_not_the_command() -> None:
    with pytest.raises(CommandError, match="stdio"):
        call_command("mcp_server", "--http", "--token", "rca_0123456789ab_" + "x" * 43)
    with pytest.raises(CommandError, match="--port"):
        call_command("mcp_server", "--http", "--port", "0")


def test_a_run_id_that_already_has_an_investigation_is_a_conflict(
    agent_token: str, demo: Demo
) -> None:
    """Issue 41.5: as the API's 409, the error kind ``conflict`` on ``run_id``."""
    body = {
        "text": "小程序优惠券无法使用",
        "scope": dict(SCOPE),
        "occurred_at": OCCURRED_AT,
        "known_at": KNOWN_AT,
        "facts": dict(FACTS),
        "run_id": "mcp-inv-taken",
    }
    assert not call(agent_token, "investigate", body).is_error
    detail = refusal(call(agent_token, "investigate", body))
    assert (detail["error"], detail["loc"], detail["message"]) == (
        "conflict",
        ["run_id"],
        RUN_ID_TAKEN,
    )
