"""``manage.py mcp_server --http``: the tools over Streamable HTTP, driven by the official SDK's
HTTP client (``mcp.client.streamable_http``) against a server process on 127.0.0.1, as a remote
agent reaches it: the bearer token on every request, the README's agent session, refusals."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx2
import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from agentapi.mcp_server import TOOLS
from tests.mcp.http_deployment import (
    FACTS,
    KNOWN_AT,
    OCCURRED_AT,
    QUERY,
    RATE,
    RATE_WAIT,
    SCOPE,
    SEARCH,
    Deployment,
    http_status,
)
from tests.mcp.test_server import refusal

T = TypeVar("T")


def _session(url: str, token: str, scenario: Callable[[Client], Awaitable[T]]) -> T:
    async def run() -> T:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await scenario(client)

    return asyncio.run(asyncio.wait_for(run(), timeout=240))


def _post(url: str, token: str | None, message: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """One raw JSON-RPC POST, as any HTTP client sends it."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(  # noqa: S310 - loopback
        url, data=json.dumps(message).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), json.loads(refused.read() or b"null")


def _structured(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def test_lists_every_tool_with_input_and_output_schemas(deployment: Deployment) -> None:
    token = deployment.token("agent-7")["token"]

    async def scenario(client: Client) -> Any:
        return await client.list_tools()

    listed = {tool.name: tool for tool in _session(deployment.url, token, scenario).tools}
    assert set(listed) == {spec.name for spec in TOOLS}
    for tool in listed.values():
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        Draft202012Validator.check_schema(tool.output_schema)


def test_the_readme_agent_session_over_http(deployment: Deployment) -> None:
    """Search, retrieve, run a skill, build the context block, investigate, report the outcome
    and propose a case: each answer is structured content of the tool's declared schema."""
    token = deployment.token("agent-7")["token"]
    run_id = "http-session-1"

    async def scenario(client: Client) -> dict[str, tuple[Any, CallToolResult]]:
        schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
        results: dict[str, tuple[Any, CallToolResult]] = {}

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(name, arguments)
            results[name] = (schemas[name], result)
            assert not result.is_error, (name, result.structured_content)
            return _structured(result)

        search = await call("search_knowledge", SEARCH)
        assert search["status"] == "retrieved" and search["evidence"]
        retrieved = await call(
            "retrieve_experience", {"query": QUERY, "scope": SCOPE, "run_id": run_id}
        )
        assert retrieved["status"] == "ok"
        skills = [item["id"] for item in retrieved["items"] if item["type"] == "skill"]
        assert skills, retrieved
        skill = await call(
            "run_skill",
            {
                "skill_id": skills[0],
                "scope": SCOPE,
                "occurred_at": OCCURRED_AT,
                "known_at": KNOWN_AT,
                "facts": FACTS,
                "run_id": run_id,
            },
        )
        assert skill["status"] == "needs_review" and skill["run_id"] == run_id
        block = await call(
            "experience_context", {"query": QUERY, "scope": SCOPE, "run_id": run_id, "budget": 200}
        )
        assert block["items"] and block["tokens"] <= 200
        investigation = await call(
            "investigate",
            {
                "text": "两杯水果茶，优惠券用不了",
                "scope": SCOPE,
                "occurred_at": OCCURRED_AT,
                "known_at": KNOWN_AT,
                "facts": FACTS,
            },
        )
        assert investigation["answer"]["conclusion_code"] == "rules_do_not_explain"
        assert investigation["context"]["facts"] == FACTS
        outcome = await call("run_outcome", {"run_id": run_id, "outcome": "resolved_by_lead"})
        assert outcome["reported_by"] == "agent-7" and outcome["items"]
        proposed = await call(
            "propose_case",
            {
                "scope": SCOPE,
                "incident": "INC-HTTP-1",
                "title": "二号店优惠券无法使用：远程代理提交",
                "diagnosis": {
                    "statement": "活动B商品列表缺少新品。",
                    "evidence": [{"source_id": "thread:7#m2", "excerpt": "新品不在活动里。"}],
                },
                "valid_from": "2026-09-01T00:00:00+08:00",
                "valid_to": "2027-09-01T00:00:00+08:00",
            },
        )
        assert proposed["status"] == "candidate" and proposed["created"] is True
        return results

    results = _session(deployment.url, token, scenario)
    assert set(results) == {spec.name for spec in TOOLS}
    for name, (schema, result) in results.items():
        errors = list(Draft202012Validator(schema).iter_errors(result.structured_content))
        assert not errors, (name, errors[0])


def test_a_request_without_a_valid_token_is_401(deployment: Deployment) -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    unknown = "rca_0123456789ab_" + "x" * 43
    for token in (None, "", "not-a-token", unknown):
        status, headers, body = _post(deployment.url, token, listing)
        assert status == 401, token
        assert headers["www-authenticate"].startswith("Bearer")
        assert body["error"] == "invalid_token"

    async def scenario(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises(BaseException) as refused:
        _session(deployment.url, unknown, scenario)
    assert _raised(refused.value, MCPError), refused.value


def _raised(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``error`` is ``kind`` or a task group's error holding one (the SDK's client
    raises from inside its task groups)."""
    if isinstance(error, BaseExceptionGroup):
        return any(_raised(inner, kind) for inner in error.exceptions)
    return isinstance(error, kind)


def test_a_revoked_token_is_refused_on_its_next_call(deployment: Deployment) -> None:
    issued = deployment.token("agent-7")

    async def scenario(client: Client) -> tuple[CallToolResult, BaseException | None]:
        before = await client.call_tool("search_knowledge", SEARCH)
        await asyncio.to_thread(
            deployment.manage, "revoke_token", issued["prefix"], "--reason", "rotated"
        )
        try:
            await client.call_tool("search_knowledge", SEARCH)
        except MCPError as refused:
            return before, refused
        return before, None

    before, after = _session(deployment.url, issued["token"], scenario)
    assert not before.is_error
    assert isinstance(after, MCPError)
    status, _, body = _post(
        deployment.url,
        issued["token"],
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert (status, body["error"]) == (401, "invalid_token")


def test_the_token_is_the_identity_and_its_tenant_the_limit(deployment: Deployment) -> None:
    """An agent of another tenant reaches nothing of teahouse, whatever its arguments say."""
    teahouse = deployment.token("agent-7")["token"]
    harbor = deployment.token("agent-h")["token"]
    run_id = "http-tenant-1"

    async def read_as_teahouse(client: Client) -> CallToolResult:
        return await client.call_tool(
            "retrieve_experience", {"query": QUERY, "scope": SCOPE, "run_id": run_id}
        )

    assert not _session(deployment.url, teahouse, read_as_teahouse).is_error

    async def as_harbor(client: Client) -> dict[str, CallToolResult]:
        return {
            "search": await client.call_tool("search_knowledge", SEARCH),
            "retrieve": await client.call_tool(
                "retrieve_experience", {"query": QUERY, "scope": SCOPE, "run_id": "h-1"}
            ),
            "outcome": await client.call_tool(
                "run_outcome", {"run_id": run_id, "outcome": "lead_was_wrong"}
            ),
            "impersonate": await client.call_tool(
                "search_knowledge", {**SEARCH, "user": "agent-7"}
            ),
        }

    refused = _session(deployment.url, harbor, as_harbor)
    for name in ("search", "retrieve"):
        assert refused[name].is_error, name
        assert refusal(refused[name])["error"] == "forbidden", name
    assert refusal(refused["outcome"])["loc"] == ["run_id"]
    assert refusal(refused["impersonate"])["error"] == "invalid"
    assert refusal(refused["impersonate"])["loc"] == ["user"]


def test_the_account_rate_holds_over_http(deployment: Deployment) -> None:
    token = deployment.token("agent-flood")["token"]
    cheap = {"query": QUERY}  # answered needs_context: nothing searched

    async def flood(client: Client) -> list[CallToolResult]:
        return [await client.call_tool("search_knowledge", cheap) for _ in range(RATE + 1)]

    results = _session(deployment.url, token, flood)
    assert not any(result.is_error for result in results[:RATE])
    refused = refusal(results[RATE])
    assert refused["error"] == "rate_limited"
    assert refused["retry_after"] == RATE_WAIT


def test_only_post_is_served_and_health_needs_no_token(deployment: Deployment) -> None:
    health = deployment.url.removesuffix("/mcp") + "/healthz"
    assert http_status(health) == 200
    assert http_status(deployment.url) == 405
