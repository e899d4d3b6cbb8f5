"""The MCP endpoint at the protocol's edges, as raw HTTP clients reach it (issue 41.4): JSON-RPC
batches where protocol 2025-03-26 has them, JSON-RPC 2.0's own error codes, an unknown tool, the
capabilities and version the server names, the protocol version header, and browsers (CORS and
the Origin check against DNS rebinding)."""

from __future__ import annotations

import json
import tomllib
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.helpers import ROOT
from tests.mcp.http_deployment import BROWSER_ORIGIN, Deployment

PROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "version"
]
SUPPORTED = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
ACCEPT = "application/json, text/event-stream"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def exchange(
    deployment: Deployment,
    body: bytes | None,
    *,
    token: str | None = None,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    sent = {"Content-Type": "application/json", "Accept": ACCEPT, **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(  # noqa: S310 - loopback
        deployment.url, data=body, headers=sent, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            status, answer_headers, text = response.status, response.headers, response.read()
    except urllib.error.HTTPError as refused:
        status, answer_headers, text = refused.code, refused.headers, refused.read()
    lowered = {name.lower(): value for name, value in answer_headers.items()}
    return status, lowered, json.loads(text) if text else None


def post(deployment: Deployment, message: Any, **options: Any) -> tuple[int, dict[str, str], Any]:
    return exchange(deployment, json.dumps(message).encode(), **options)


@pytest.fixture(scope="module")
def token(deployment: Deployment) -> str:
    return deployment.token("agent-7")["token"]


def _no_library_text(message: str) -> None:
    assert "http" not in message and "pydantic" not in message.lower(), message
    assert "validation error" not in message.lower(), message


# Batches.


@pytest.mark.parametrize("version", [None, "2025-03-26"])
def test_a_batch_under_2025_03_26_is_answered_as_an_array(
    deployment: Deployment, token: str, version: str | None
) -> None:
    """No header is protocol 2025-03-26 (the specification's default), whose JSON-RPC has
    batches: each message is answered in its place, a notification not at all."""
    batch = [
        LIST,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": "search",
            "method": "tools/call",
            "params": {"name": "search_knowledge", "arguments": {"query": "x"}},
        },
        {"jsonrpc": "1.0", "id": 3, "method": "tools/list"},
    ]
    headers = {} if version is None else {"MCP-Protocol-Version": version}
    status, _, answers = post(deployment, batch, token=token, headers=headers)
    assert status == 200, answers
    by_id = {answer["id"]: answer for answer in answers}
    assert set(by_id) == {1, "search", 3}
    assert {tool["name"] for tool in by_id[1]["result"]["tools"]} >= {"search_knowledge"}
    assert by_id["search"]["result"]["structuredContent"]["status"] == "needs_context"
    assert by_id[3]["error"]["code"] == -32600


def test_a_batch_of_notifications_only_is_accepted_without_a_body(
    deployment: Deployment, token: str
) -> None:
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, body = post(deployment, [notification, notification], token=token)
    assert (status, body) == (202, None)


def test_initialize_is_not_part_of_a_batch(deployment: Deployment, token: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    status, _, answers = post(deployment, [initialize], token=token)
    assert status == 200
    assert answers[0]["id"] == 7 and answers[0]["error"]["code"] == -32600
    assert "initialize" in answers[0]["error"]["message"]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_batch_under_a_later_version_is_refused_saying_why(
    deployment: Deployment, token: str, version: str
) -> None:
    status, _, answer = post(
        deployment, [LIST], token=token, headers={"MCP-Protocol-Version": version}
    )
    assert status == 400
    assert answer["id"] is None and answer["error"]["code"] == -32600
    message = answer["error"]["message"]
    assert "batch" in message and "2025-03-26" in message and version in message


def test_an_empty_batch_is_an_invalid_request(deployment: Deployment, token: str) -> None:
    status, _, answer = post(deployment, [], token=token)
    assert status == 400 and answer["error"]["code"] == -32600


# JSON-RPC 2.0's own errors.


def test_a_body_that_is_not_json_is_a_parse_error(deployment: Deployment, token: str) -> None:
    status, _, answer = exchange(deployment, b'{"jsonrpc": "2.0", "id": 1', token=token)
    assert status == 400
    assert answer["id"] is None and answer["error"]["code"] == -32700
    _no_library_text(answer["error"]["message"])


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 1},
        "tools/list",
        42,
    ],
    ids=["version", "no-version", "method", "null-id", "params", "neither", "string", "number"],
)
def test_json_that_is_not_a_json_rpc_message_is_an_invalid_request(
    deployment: Deployment, token: str, message: Any
) -> None:
    status, _, answer = post(deployment, message, token=token)
    assert status == 400
    assert answer["error"]["code"] == -32600, answer
    assert answer["error"]["message"].startswith("Invalid Request")
    _no_library_text(answer["error"]["message"])


def test_an_unknown_tool_is_a_protocol_error(deployment: Deployment, token: str) -> None:
    """The specification's tools page: an unknown tool is a JSON-RPC error, -32602."""
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "no_such_tool", "arguments": {}},
    }
    status, _, answer = post(deployment, call, token=token)
    assert status == 200
    assert answer["id"] == 9 and "result" not in answer
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"] == "Unknown tool: no_such_tool"


# What the server says it is and serves.


def _initialize(deployment: Deployment, token: str, version: str) -> dict[str, Any]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    status, _, answer = post(deployment, message, token=token)
    assert status == 200, answer
    result: dict[str, Any] = answer["result"]
    return result


def _discover(deployment: Deployment, token: str) -> dict[str, Any]:
    version = "2026-07-28"
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": "server/discover"}
    status, _, answer = post(deployment, message, token=token, headers=headers)
    assert status == 200, answer
    result: dict[str, Any] = answer["result"]
    return result


def _served(deployment: Deployment, token: str, method: str) -> bool:
    status, _, answer = post(deployment, {"jsonrpc": "2.0", "id": 1, "method": method}, token=token)
    return status == 200 and "result" in answer


@pytest.mark.parametrize("how", ["initialize 2025-06-18", "initialize 2025-03-26", "discover"])
def test_only_what_is_served_is_advertised(deployment: Deployment, token: str, how: str) -> None:
    """Tools only, with no change notifications (nothing to listen on: the server keeps no
    stream and its tools do not change); no resources, so no subscriptions, and no prompts."""
    if how == "discover":
        result = _discover(deployment, token)
    else:
        result = _initialize(deployment, token, how.split()[1])
    capabilities = result["capabilities"]
    assert set(capabilities) == {"tools"}, capabilities
    assert not capabilities["tools"].get("listChanged")
    assert _served(deployment, token, "tools/list")
    for unserved in ("resources/list", "prompts/list", "resources/subscribe"):
        assert not _served(deployment, token, unserved), unserved


def test_the_server_names_the_projects_version(deployment: Deployment, token: str) -> None:
    assert _initialize(deployment, token, "2025-06-18")["serverInfo"]["version"] == PROJECT_VERSION
    stamp = _discover(deployment, token)["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert stamp["version"] == PROJECT_VERSION


def test_an_unknown_protocol_version_header_names_the_value_and_the_versions(
    deployment: Deployment, token: str
) -> None:
    status, _, answer = post(
        deployment, LIST, token=token, headers={"MCP-Protocol-Version": "2099-01-01"}
    )
    assert status == 400
    message = answer["error"]["message"]
    assert "MCP-Protocol-Version" in message and "2099-01-01" in message
    assert all(version in message for version in SUPPORTED), message
    assert "_meta" not in message
    assert answer["error"]["data"]["supported"] == SUPPORTED


# Browsers.


def test_an_allowed_origins_preflight_is_answered(deployment: Deployment) -> None:
    status, headers, _ = exchange(
        deployment,
        None,
        method="OPTIONS",
        headers={
            "Origin": BROWSER_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        },
    )
    assert status == 204
    assert headers["access-control-allow-origin"] == BROWSER_ORIGIN
    assert "POST" in headers["access-control-allow-methods"]
    allowed = {name.strip().lower() for name in headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "mcp-protocol-version"} <= allowed
    assert "access-control-allow-credentials" not in headers


def test_an_allowed_origin_reads_the_answer_and_the_headers_it_needs(
    deployment: Deployment, token: str
) -> None:
    status, headers, answer = post(
        deployment, LIST, token=token, headers={"Origin": BROWSER_ORIGIN}
    )
    assert status == 200 and answer["result"]["tools"]
    assert headers["access-control-allow-origin"] == BROWSER_ORIGIN
    exposed = {name.strip().lower() for name in headers["access-control-expose-headers"].split(",")}
    assert {"mcp-session-id", "www-authenticate"} <= exposed
    status, headers, _ = post(deployment, LIST, token=None, headers={"Origin": BROWSER_ORIGIN})
    assert status == 401
    assert headers["access-control-allow-origin"] == BROWSER_ORIGIN


def test_another_origins_preflight_is_refused_saying_why(deployment: Deployment) -> None:
    status, headers, answer = exchange(
        deployment,
        None,
        method="OPTIONS",
        headers={"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST"},
    )
    assert status == 403
    assert "access-control-allow-origin" not in headers
    assert "CONSOLE_CORS_ALLOWED_ORIGINS" in answer["error_description"]


def test_a_rebound_host_name_is_refused(deployment: Deployment, token: str) -> None:
    """DNS rebinding: a page of another host name that resolves to this server."""
    port = deployment.url.split(":")[2].split("/")[0]
    status, _, answer = post(
        deployment, LIST, token=token, headers={"Origin": f"http://rebound.example:{port}"}
    )
    assert status == 403 and answer["error"] == "forbidden_origin"
    status, _, answer = post(
        deployment, LIST, token=token, headers={"Origin": f"http://127.0.0.1:{port}"}
    )
    assert status == 200 and answer["result"]["tools"]
