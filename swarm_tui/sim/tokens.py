"""Tokens as the simulator counts them: pure functions, no state.

``estimate_tokens``: about one token per 4 bytes of UTF-8, at least 1. A prompt costs 3 tokens
plus, per message, 4 tokens plus its text (``prompt_tokens``), a crude copy of OpenAI's chat
accounting. Answers are counted with the same estimate, so a response's ``completion_tokens``
always equals ``estimate_tokens(content)``. Every other part of the simulator (rate limits,
the prefix cache, answers, tool calls) counts with these, so their figures agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["estimate_tokens", "content_text", "message_tokens", "prefix_tokens", "prompt_tokens", "last_user_text"]


def estimate_tokens(text: str) -> int:
    """About one token per 4 bytes of UTF-8, and at least 1."""
    n = len(text)
    if text.isascii():
        return max(1, (n + 3) // 4)
    return max(1, (len(text.encode("utf-8")) + 3) // 4)


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text parts of a parts list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                t = part.get("text")
                if isinstance(t, str):
                    out.append(t)
            elif isinstance(part, str):
                out.append(part)
        return "".join(out)
    return str(content)


def message_tokens(msg: Any) -> int:
    """One message's share of a prompt: 4 tokens, its text, and its tool calls' JSON."""
    if not isinstance(msg, dict):
        return 4
    n = 4 + estimate_tokens(content_text(msg.get("content")))
    calls = msg.get("tool_calls")
    if calls:
        n += estimate_tokens(json.dumps(calls, separators=(",", ":")))
    return n


def prefix_tokens(messages: Sequence[Any]) -> int:
    """Tokens of every message but the last (what a prefix cache could hold)."""
    return sum(message_tokens(m) for m in messages[:-1])


def prompt_tokens(messages: Sequence[Any]) -> int:
    """Estimated prompt tokens: 3 + per message (4 + its text)."""
    return 3 + sum(message_tokens(m) for m in messages)


def last_user_text(messages: Sequence[Any]) -> str:
    """The text of the last ``user`` message (or of the last message when none is)."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return content_text(m.get("content"))
    if messages and isinstance(messages[-1], dict):
        return content_text(messages[-1].get("content"))
    return ""
