"""Token usage in one shape, whatever the provider calls its fields.

Cached prompt tokens arrive as `prompt_tokens_details.cached_tokens` (OpenAI, Kimi, vLLM,
llama.cpp), `prompt_cache_hit_tokens` (DeepSeek) or a top-level `cached_tokens` (older
Moonshot); reasoning tokens as `completion_tokens_details.reasoning_tokens`. They are billed
differently (cached at the cached rate, reasoning as output), so they are kept apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    prompt: int = 0
    completion: int = 0
    cached: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    @classmethod
    def from_response(cls, usage: dict[str, Any] | None) -> Usage:
        if not usage:
            return cls()
        prompt = _int(usage.get("prompt_tokens"))
        completion = _int(usage.get("completion_tokens"))
        details = usage.get("prompt_tokens_details") or {}
        cached = (
            _int(details.get("cached_tokens"))
            or _int(usage.get("prompt_cache_hit_tokens"))
            or _int(usage.get("cached_tokens"))
        )
        reasoning = _int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens"))
        return cls(prompt=prompt, completion=completion, cached=min(cached, prompt), reasoning=reasoning)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt + other.prompt,
            self.completion + other.completion,
            self.cached + other.cached,
            self.reasoning + other.reasoning,
        )


MAX_TOKENS = 2**53 - 1
"""A count past this is no count (and past what SQLite or a JSON reader holds exactly): taken as none."""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_TOKENS else 0
