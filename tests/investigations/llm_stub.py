"""A stub OpenAI-compatible chat-completions server on 127.0.0.1, for the live provider's tests.

It replays recorded model turns, honest or hostile, and records what the client sent. A turn
may be ``HANG``: the stub holds the request without answering until the client gives up and
closes its connection, or the test ends, waiting on those events and never on a clock. Nothing
here leaves the machine.
"""

from __future__ import annotations

import json
import os
import select
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# A turn that never comes: the request is held until the client disconnects or the test ends.
HANG: dict[str, Any] = {"hang": True}


@dataclass
class Stub:
    replies: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    # Set when a held request's client closed its connection (it stopped waiting).
    disconnected: threading.Event = field(default_factory=threading.Event)
    # Set when a request is being held.
    holding: threading.Event = field(default_factory=threading.Event)

    def next_reply(self) -> dict[str, Any]:
        # The last recorded turn repeats: a model stuck in a loop says the same thing forever.
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


# --- recorded model turns ----------------------------------------------------------------------


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_790_000_000,
        "model": "stub-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return completion(
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


def said(content: str) -> dict[str, Any]:
    """A final turn of free text (the runner parses it as the answer)."""
    return completion({"role": "assistant", "content": content}, "stop")


def answer(code: str, citations: list[tuple[str, str]], conclusion: str = "…") -> dict[str, Any]:
    content = {
        "conclusion": conclusion,
        "conclusion_code": code,
        "followups": [],
        "citations": [{"id": i, "quote": q} for i, q in citations],
    }
    return said(json.dumps(content, ensure_ascii=False))


# --- the server --------------------------------------------------------------------------------


@pytest.fixture
def stub(settings: Any) -> Iterator[Stub]:
    recorded = Stub()
    # Written to when the test ends: wakes every held request.
    wake_read, wake_write = os.pipe()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            recorded.requests.append(json.loads(self.rfile.read(length)))
            recorded.paths.append(self.path)
            reply = recorded.next_reply()
            if reply is HANG:
                self._hold()
                return
            body = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _hold(self) -> None:
            recorded.holding.set()
            # Readable connection: the client closed it (it sends nothing more after its request).
            ready, _, _ = select.select([self.connection, wake_read], [], [])
            if self.connection in ready and not self.connection.recv(1):
                recorded.disconnected.set()
            self.close_connection = True

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
        os.write(wake_write, b"x")
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        os.close(wake_read)
        os.close(wake_write)
