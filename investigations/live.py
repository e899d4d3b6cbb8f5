"""The live provider: any OpenAI-compatible chat-completions endpoint with tool calling.

It speaks the protocol through the official ``openai`` SDK, so a hosted model, vLLM or Ollama
plug in by base URL. The model sees the instructions, the ticket's text and facts, the tools of
this run and every result so far; it never sees or sets the scope, which the handlers bind.
No Django here: the base URL, model and key come from ``investigations.providers``.
"""

from __future__ import annotations

import json
from typing import Any

from openai import OpenAI

from investigations.domain import ToolCall, Transcript, Turn

DEFAULT_TIMEOUT = 60.0
# Local servers (vLLM, Ollama) take any key; the SDK insists on one.
NO_KEY = "not-needed"


def messages_for(transcript: Transcript) -> list[dict[str, Any]]:
    """The chat conversation a transcript stands for, in the chat-completions format."""
    facts = dict(transcript.ticket.context.facts)
    ticket = transcript.ticket.text
    if facts:
        ticket += "\n\nFacts given by the caller: " + json.dumps(facts, ensure_ascii=False)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": transcript.instructions},
        {"role": "user", "content": ticket},
    ]
    for round_ in transcript.rounds:
        messages.append(
            {
                "role": "assistant",
                "content": round_.turn.text or None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in round_.turn.calls
                ],
            }
        )
        for exchange in round_.exchanges:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": exchange.call.id,
                    "content": json.dumps(dict(exchange.content), ensure_ascii=False),
                }
            )
    return messages


class LiveProvider:
    name = "live"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.model = model
        self.client = OpenAI(
            base_url=base_url, api_key=api_key or NO_KEY, timeout=timeout, max_retries=0
        )

    def next_turn(self, transcript: Transcript) -> Turn:
        tools = [tool.as_openai() for tool in transcript.tools]
        request: dict[str, Any] = {
            "model": self.model,
            "messages": messages_for(transcript),
            "temperature": 0,
        }
        if tools:
            request["tools"] = tools
        response = self.client.chat.completions.create(**request)
        if not response.choices:
            return Turn(answer="")
        message = response.choices[0].message
        calls = []
        for index, tool_call in enumerate(message.tool_calls or []):
            function = getattr(tool_call, "function", None)
            if function is None:
                continue
            calls.append(
                ToolCall(
                    tool_call.id or f"call-{index}",
                    str(function.name or ""),
                    str(function.arguments or ""),
                )
            )
        if calls:
            return Turn(calls=tuple(calls), text=message.content or "")
        return Turn(answer=message.content or "")
