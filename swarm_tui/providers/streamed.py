"""A streamed answer put back together: the chat.completion its chunks add up to.

The engine, the journal and results.jsonl know one shape of answer, a non-streamed
chat.completion; a streamed call is assembled into it chunk by chunk (content, Kimi's and
DeepSeek's `reasoning_content`, tool calls whose arguments arrive in pieces, the usage of the
last chunk, the tier that served it as its chunks say), and its time to first token is taken
at the first chunk that carries any of them.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["StreamedAnswer"]


class StreamedAnswer:
    """The chunks of one streamed answer so far (`add` each, then `body`)."""

    __slots__ = ("started", "pieces", "reasoning", "refusal", "calls", "finish_reason", "usage", "first", "ttft_ms")

    def __init__(self, started: float) -> None:
        self.started = started
        """`time.monotonic()` when the request was sent: the time to first token counts from it."""
        self.pieces: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        """The model's refusal, streamed in `refusal` deltas (OpenAI), when it refused."""
        self.calls: dict[int, dict[str, Any]] = {}
        """Tool calls by their index, assembled from their deltas (name once, arguments in pieces)."""
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.first: dict[str, Any] = {}
        """The first chunk: its id, created and model are the answer's."""
        self.ttft_ms: float | None = None

    def add(self, data: dict[str, Any]) -> None:
        """One chunk, as a dict."""
        self.first = self.first or data
        if data.get("usage"):
            self.usage = data["usage"]
        for choice in data.get("choices", []):
            delta = choice.get("delta") or {}
            text, thought, call_deltas = delta.get("content"), delta.get("reasoning_content"), delta.get("tool_calls")
            refused = delta.get("refusal")
            if refused:
                self.refusal.append(refused)
            if (text or thought or call_deltas or refused) and self.ttft_ms is None:
                self.ttft_ms = (time.monotonic() - self.started) * 1000
            if text:
                self.pieces.append(text)
            if thought:  # Kimi's and DeepSeek's thinking, before the answer
                self.reasoning.append(thought)
            for call_delta in call_deltas or ():
                self._merge_tool_call(call_delta)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def body(self) -> dict[str, Any]:
        """The chat.completion the chunks add up to, as a non-streamed answer carries it."""
        first = self.first
        return {
            "id": first.get("id"),
            "object": "chat.completion",
            "created": first.get("created"),
            "model": first.get("model"),
            "choices": [{"index": 0, "message": self._message(), "finish_reason": self.finish_reason}],
            "usage": self.usage,
            **({"service_tier": first["service_tier"]} if "service_tier" in first else {}),
        }

    def _merge_tool_call(self, delta: dict[str, Any]) -> None:
        """One streamed piece of a tool call: its first piece names it, later ones extend its arguments."""
        calls = self.calls
        call = calls.setdefault(
            delta.get("index", len(calls)), {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if delta.get("id"):
            call["id"] = delta["id"]
        function = delta.get("function") or {}
        if function.get("name"):
            call["function"]["name"] += function["name"]
        if function.get("arguments"):
            call["function"]["arguments"] += function["arguments"]

    def _message(self) -> dict[str, Any]:
        calls = self.calls
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.pieces) or (None if calls or self.refusal else ""),
        }
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return message
