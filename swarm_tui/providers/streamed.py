"""A streamed answer put back together: the chat.completion its chunks add up to.

The engine, the journal and results.jsonl know one shape of answer, a non-streamed
chat.completion; a streamed call is assembled into it chunk by chunk (content, Kimi's and
DeepSeek's `reasoning_content`, tool calls whose arguments arrive in pieces, the usage of the
last chunk, the tier that served it as its chunks say), and its time to first token is taken
at the first chunk that carries any of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["StreamProgress", "StreamedAnswer"]


class StreamProgress:
    """How a streamed call goes, as its chunks arrive: when its headers came, its first token, its
    last chunk, how many chunks carried something, and the longest silence between two of them.
    The engine reads it while the call runs (an agent's liveness: connecting, waiting for the first
    token, streaming, silent) and when it ends (its time to first token, tokens a second and mean
    gap between chunks). `clock`: the caller's (the engine's is stall-aware); `on_first`: called
    once, at the first chunk that carries anything."""

    __slots__ = ("clock", "started", "opened_at", "first_at", "last_at", "chunks", "max_gap_s", "on_first")

    def __init__(self, clock: Callable[[], float] = time.monotonic, on_first: Callable[[], None] | None = None) -> None:
        self.clock = clock
        self.started = clock()
        self.opened_at: float | None = None
        """When the answer's headers came (the call is connected, its first token not yet come)."""
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.chunks = 0
        """Chunks that carried content, reasoning or a piece of a tool call (about a token each)."""
        self.max_gap_s = 0.0
        self.on_first = on_first

    def opened(self) -> None:
        self.opened_at = self.clock()

    def chunk(self) -> None:
        now = self.clock()
        last = self.last_at
        if last is None:
            self.first_at = now
            if self.on_first is not None:
                self.on_first()
        elif now - last > self.max_gap_s:
            self.max_gap_s = now - last
        self.last_at = now
        self.chunks += 1

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_at is None else self.first_at - self.started

    def gap_s(self) -> float | None:
        """The mean time between two chunks (`time per output chunk`); None before a second one."""
        if self.chunks < 2 or self.first_at is None or self.last_at is None:
            return None
        return (self.last_at - self.first_at) / (self.chunks - 1)

    def tokens_per_s(self, tokens: int | None = None) -> float | None:
        """Tokens written a second once the first came (`tokens`: the usage's, else the chunks)."""
        if self.first_at is None or self.last_at is None or self.last_at <= self.first_at:
            return None
        return max(0, (tokens if tokens else self.chunks) - 1) / (self.last_at - self.first_at)

    def silent_s(self, now: float | None = None) -> float:
        """How long nothing has come: since the last chunk, or since the call went out."""
        now = self.clock() if now is None else now
        return now - (self.last_at if self.last_at is not None else self.started)


class StreamedAnswer:
    """The chunks of one streamed answer so far (`add` each, then `body`)."""

    __slots__ = (
        "started",
        "pieces",
        "reasoning",
        "refusal",
        "calls",
        "finish_reason",
        "usage",
        "first",
        "ttft_ms",
        "size",
    )

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
        self.size = 0
        """The characters of text the chunks added so far (content, reasoning, tool calls' names and
        arguments): what the answer will hold, bounded by the caller (`--max-answer-bytes`)."""

    def add(self, data: dict[str, Any]) -> bool:
        """One chunk, as a dict; True when it carried anything (text, thinking, a tool call's piece)."""
        self.first = self.first or data
        if data.get("usage"):
            self.usage = data["usage"]
        carried = False
        choices = data.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            text, thought, call_deltas = delta.get("content"), delta.get("reasoning_content"), delta.get("tool_calls")
            refused = delta.get("refusal")
            if refused:
                refused = str(refused)
                self.refusal.append(refused)
                self.size += len(refused)
            if text or thought or call_deltas or refused:
                carried = True
                if self.ttft_ms is None:
                    self.ttft_ms = (time.monotonic() - self.started) * 1000
            if text:
                text = str(text)
                self.pieces.append(text)
                self.size += len(text)
            if thought:  # Kimi's and DeepSeek's thinking, before the answer
                thought = str(thought)
                self.reasoning.append(thought)
                self.size += len(thought)
            for call_delta in call_deltas if isinstance(call_deltas, list) else ():
                if isinstance(call_delta, dict):
                    self._merge_tool_call(call_delta)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return carried

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
            call["function"]["name"] += str(function["name"])
            self.size += len(str(function["name"]))
        if function.get("arguments"):
            call["function"]["arguments"] += str(function["arguments"])
            self.size += len(str(function["arguments"]))

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
