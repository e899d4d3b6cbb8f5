"""What the MCP endpoint answers before the SDK reads a message (docs/agents.md, MCP errors).

- A body that is not JSON: ``-32700`` Parse error; JSON that is not a JSON-RPC 2.0 message:
  ``-32600`` Invalid Request, saying what is wrong in words (never a library's URL). Both
  ``400``, with ``"id": null`` unless the message's id could be read.
- An ``MCP-Protocol-Version`` header naming a version this server does not speak: ``400``, naming
  the header's value and the versions it speaks.
- A JSON-RPC batch (an array of messages) is part of protocol 2025-03-26 only (added there,
  removed in 2025-06-18). It is served when the request's protocol version is 2025-03-26: an
  ``MCP-Protocol-Version: 2025-03-26`` header, or none at all, which the specification says a
  server should then assume. Each message is handled as if posted alone; the answers come back
  as one array (``202`` with no body when the batch held no request). Under any later version a
  batch is refused ``-32600``, saying so. ``initialize`` may not be part of a batch.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
# The version a request without the header is read as (MCP 2025-06-18, transports, protocol
# version header), and the only one whose JSON-RPC allows batches.
BATCH_VERSION = "2025-03-26"
VERSION_HEADER = "mcp-protocol-version"

NOT_JSON = "Parse error: the request body is not JSON ({problem})"
UNSUPPORTED_VERSION = (
    "Unsupported MCP-Protocol-Version header value {requested!r}: this server speaks {supported}"
)
BATCH_REFUSED = (
    "Invalid Request: JSON-RPC batches (a JSON array of messages) are part of MCP protocol "
    "2025-03-26 only; this request's MCP-Protocol-Version is {version}: send one message per "
    "POST"
)
EMPTY_BATCH = "Invalid Request: an empty JSON-RPC batch"
INITIALIZE_IN_BATCH = "Invalid Request: initialize must not be part of a JSON-RPC batch"
INVALID = "Invalid Request: {problem}"


def message_problem(message: Any) -> str | None:
    """What makes ``message`` something other than one JSON-RPC 2.0 message as MCP uses it
    (a request, a notification or a response), in words; None when it is one."""
    if not isinstance(message, dict):
        return "a JSON-RPC message is a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'a JSON-RPC 2.0 message has "jsonrpc": "2.0"'
    if "id" in message and not _valid_id(message["id"]):
        return 'an "id" is a string or an integer (never null)'
    if "method" in message:
        if not isinstance(message["method"], str):
            return 'a request\'s "method" is a string'
        if "params" in message and not isinstance(message["params"], dict):
            return 'an MCP request\'s "params" is a JSON object'
    elif "id" not in message or ("result" in message) == ("error" in message):
        return (
            'a JSON-RPC message has a "method" (a request or a notification), or an "id" with '
            'either a "result" or an "error" (a response)'
        )
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError as refused:
        first = refused.errors(include_url=False, include_context=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "the message"
        return f"{where}: {first['msg']}"
    return None


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _readable_id(message: Any) -> str | int | None:
    value = message.get("id") if isinstance(message, dict) else None
    return value if _valid_id(value) else None


def error_object(
    code: int, message: str, *, id: str | int | None = None, data: Any = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": error}


def _refusal(code: int, message: str, *, id: str | int | None = None, data: Any = None) -> Response:
    return JSONResponse(error_object(code, message, id=id, data=data), status_code=400)


class JsonRpcGate:
    """In front of the SDK's Streamable HTTP transport (``app``), for POSTed messages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        version = headers.get(VERSION_HEADER)
        if version is not None and version not in SUPPORTED_VERSIONS:
            refused = _refusal(
                UNSUPPORTED_PROTOCOL_VERSION,
                UNSUPPORTED_VERSION.format(
                    requested=version, supported=", ".join(SUPPORTED_VERSIONS)
                ),
                data={"supported": list(SUPPORTED_VERSIONS), "requested": version},
            )
            await refused(scope, receive, send)
            return
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            await self.app(scope, receive, send)  # the transport answers 415
            return
        body = await _body(receive)
        try:
            message = json.loads(body)
        except (ValueError, UnicodeDecodeError) as not_json:
            await _refusal(PARSE_ERROR, NOT_JSON.format(problem=_parse_problem(not_json)))(
                scope, receive, send
            )
            return
        if isinstance(message, list):
            await self._batch(scope, message, version or BATCH_VERSION, send, receive)
            return
        problem = message_problem(message)
        if problem is not None:
            refused = _refusal(
                INVALID_REQUEST, INVALID.format(problem=problem), id=_readable_id(message)
            )
            await refused(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _batch(
        self, scope: Scope, messages: list[Any], version: str, send: Send, receive: Receive
    ) -> None:
        if version != BATCH_VERSION:
            await _refusal(INVALID_REQUEST, BATCH_REFUSED.format(version=version))(
                scope, receive, send
            )
            return
        if not messages:
            await _refusal(INVALID_REQUEST, EMPTY_BATCH)(scope, receive, send)
            return
        answers: list[Any] = []
        for message in messages:
            answered = await self._one(scope, message, receive)
            if isinstance(answered, Response):
                # The transport refused the request as a whole (e.g. 406 for its Accept header):
                # that answer stands for the batch.
                await answered(scope, receive, send)
                return
            if answered is not None:
                answers.append(answered)
        reply: Response = JSONResponse(answers) if answers else Response(status_code=202)
        await reply(scope, receive, send)

    async def _one(self, scope: Scope, message: Any, receive: Receive) -> Any:
        """The answer to one message of a batch: a response object, None for a notification or
        a response, or the transport's whole answer when it refused the HTTP request."""
        problem = message_problem(message)
        if problem is not None:
            return error_object(
                INVALID_REQUEST, INVALID.format(problem=problem), id=_readable_id(message)
            )
        if message.get("method") == "initialize":
            return error_object(INVALID_REQUEST, INITIALIZE_IN_BATCH, id=_readable_id(message))
        body = json.dumps(message).encode()
        alone = {
            **scope,
            "headers": [
                (name, value) for name, value in scope["headers"] if name != b"content-length"
            ]
            + [(b"content-length", str(len(body)).encode())],
        }
        captured = _Captured()
        await self.app(alone, _replay(body, receive), captured)
        if captured.status == 202:
            return None
        if captured.status == 200 and captured.is_json:
            return json.loads(captured.body)
        return Response(captured.body, status_code=captured.status, headers=captured.headers)


class _Captured:
    def __init__(self) -> None:
        self.status = 500
        self.headers: dict[str, str] = {}
        self.body = b""

    @property
    def is_json(self) -> bool:
        return self.headers.get("content-type", "").startswith("application/json")

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {
                name.decode("latin-1").lower(): value.decode("latin-1")
                for name, value in message.get("headers", [])
            }
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body, already read, then the client's own messages (its disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _parse_problem(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg}: line {error.lineno}, column {error.colno}"
    return "it is not UTF-8 text"
