"""The live provider: any OpenAI-compatible chat-completions endpoint with tool calling.

It speaks the protocol through the official ``openai`` SDK, so a hosted model, vLLM or Ollama
plug in by base URL. The model sees the instructions, the ticket's text and facts, the tools of
this run and every result so far; it never sees or sets the scope, which the handlers bind.
No Django here: the base URL, model and key come from ``investigations.providers``.
"""

from __future__ import annotations

import json
from typing import Any

from openai import APITimeoutError, OpenAI

from investigations.domain import ProviderTimeout, ToolCall, Transcript, Turn

# The longest one model call may take (CONSOLE_LLM_TIMEOUT); a call never waits past what is
# left of the run's time budget either.
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
        self.timeout = timeout
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
        left = transcript.seconds_left
        budget_left = left is not None and left <= self.timeout
        wait = max(left, 0.001) if left is not None and budget_left else self.timeout
        try:
            response = self.client.chat.completions.create(**request, timeout=wait)
        except APITimeoutError:
            raise ProviderTimeout(
                f"the model did not answer within {wait:.3g}s", budget_left=budget_left
            ) from None
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

    def complete(self, system: str, user: str) -> str:
        """One answer without tools to ``system`` and ``user`` (the after-action review
        agent's draft); a timeout or an empty answer raises ``ProviderTimeout`` / gives ""."""
        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ],
                temperature=0,
                timeout=self.timeout,
            )
        except APITimeoutError:
            raise ProviderTimeout(
                f"the model did not answer within {self.timeout:.3g}s", budget_left=False
            ) from None
        if not response.choices:
            return ""
        return response.choices[0].message.content or ""
