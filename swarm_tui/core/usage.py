"""Token usage in one shape, whatever the provider calls its fields.

`prompt` is every prompt token the call was billed for: the uncached ones, those read from the
provider's prompt cache (`cached`) and those written to it (`cache_write`, and `cache_write_1h`
where the provider has a one-hour cache beside the default five minutes). `completion` is every
output token, the reasoning ones included (`reasoning` says how many of them were reasoning:
shown apart, billed once). Each kind has its own rate (`pricing`), so they are kept apart.

How each provider reports them (`from_response` reads what is there and invents nothing):
- OpenAI, Kimi, vLLM, llama.cpp: `prompt_tokens_details.cached_tokens`;
  `completion_tokens_details.reasoning_tokens`; OpenAI's newer models (and OpenRouter) add
  `prompt_tokens_details.cache_write_tokens`. `prompt_tokens` counts the cached and written ones,
  `completion_tokens` the reasoning ones; a provider whose `total_tokens` is prompt + completion
  + reasoning counts reasoning apart, and it is added to `completion`. vLLM and llama.cpp send
  only the counts (llama.cpp may send no usage at all: the engine then estimates, marked so).
- DeepSeek: `prompt_cache_hit_tokens` and `prompt_cache_miss_tokens` (hit + miss = the prompt).
- Older Moonshot: a top-level `cached_tokens`.
- Anthropic through an OpenAI-compatible relay: `cache_read_input_tokens`,
  `cache_creation_input_tokens` (split by TTL in `cache_creation.ephemeral_5m_input_tokens` /
  `ephemeral_1h_input_tokens` when the relay passes it on). Anthropic's own `input_tokens` leaves
  the cache's tokens out, so a relay may send a `prompt_tokens` that does too: one smaller than the
  cache's tokens, or equal to an `input_tokens` sent beside it, counts them apart and they are
  added.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    prompt: int = 0
    completion: int = 0
    cached: int = 0
    """Prompt tokens read from the provider's cache (part of `prompt`)."""
    reasoning: int = 0
    """Output tokens spent reasoning (part of `completion`, unless a provider counts them apart:
    `pricing.billable_output`)."""
    cache_write: int = 0
    """Prompt tokens written to the cache for its default lifetime (Anthropic: 5 minutes)."""
    cache_write_1h: int = 0
    """Prompt tokens written to a one-hour cache (Anthropic's longer TTL, billed higher)."""

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    @property
    def written(self) -> int:
        """Prompt tokens written to the cache, whatever their lifetime."""
        return self.cache_write + self.cache_write_1h

    @property
    def uncached(self) -> int:
        """Prompt tokens neither read from the cache nor written to it: billed at the input rate."""
        return max(0, self.prompt - self.cached - self.written)

    @classmethod
    def from_response(cls, usage: dict[str, Any] | None) -> Usage:
        """The usage an answer reports, whatever its provider's shape (the module says which)."""
        if not usage or not isinstance(usage, dict):
            return cls()
        if _OTHER_SHAPES.isdisjoint(usage):  # OpenAI's shape (and vLLM's, llama.cpp's): every answer's path
            return cls._openai(usage)
        details = _table(usage.get("prompt_tokens_details"))
        read = (
            _int(details.get("cached_tokens"))
            or _int(usage.get("prompt_cache_hit_tokens"))
            or _int(usage.get("cache_read_input_tokens"))
            or _int(details.get("cache_read_tokens"))
            or _int(usage.get("cached_tokens"))
        )
        write, write_1h = _cache_writes(usage, details)
        prompt = _prompt_tokens(usage, read + write + write_1h)
        completion = _int(usage.get("completion_tokens")) or _int(usage.get("output_tokens"))
        reasoning = _int(_table(usage.get("completion_tokens_details")).get("reasoning_tokens"))
        if reasoning and _int(usage.get("total_tokens")) == _int(usage.get("prompt_tokens")) + completion + reasoning:
            completion += reasoning  # counted apart (the total says so): completion is every output token
        read = min(read, prompt)
        write = min(write, prompt - read)
        write_1h = min(write_1h, prompt - read - write)
        return cls(prompt, completion, read, reasoning, write, write_1h)

    @classmethod
    def _openai(cls, usage: dict[str, Any]) -> Usage:
        """OpenAI's usage object: the counts, and their details where it sends them."""
        prompt = _int(usage.get("prompt_tokens"))
        completion = _int(usage.get("completion_tokens"))
        details = usage.get("prompt_tokens_details")
        read = write = reasoning = 0
        if details.__class__ is dict:
            read = _int(details.get("cached_tokens")) or _int(details.get("cache_read_tokens"))
            write = _int(details.get("cache_write_tokens")) or _int(details.get("cache_creation_tokens"))
        output = usage.get("completion_tokens_details")
        if output.__class__ is dict:
            reasoning = _int(output.get("reasoning_tokens"))
            if reasoning and _int(usage.get("total_tokens")) == prompt + completion + reasoning:
                completion += reasoning  # counted apart (the total says so)
        if read > prompt:
            read = prompt
        if write > prompt - read:
            write = prompt - read
        return cls(prompt, completion, read, reasoning, write)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt + other.prompt,
            self.completion + other.completion,
            self.cached + other.cached,
            self.reasoning + other.reasoning,
            self.cache_write + other.cache_write,
            self.cache_write_1h + other.cache_write_1h,
        )


def _cache_writes(usage: dict[str, Any], details: dict[str, Any]) -> tuple[int, int]:
    """(default-lifetime, one-hour) cache writes: Anthropic's TTL split when given, else its total
    (or OpenAI's `cache_write_tokens`) as default-lifetime writes."""
    total = (
        _int(usage.get("cache_creation_input_tokens"))
        or _int(details.get("cache_write_tokens"))
        or _int(details.get("cache_creation_tokens"))
        or _int(usage.get("cache_write_tokens"))
    )
    split = _table(usage.get("cache_creation"))
    five_minutes, one_hour = _int(split.get("ephemeral_5m_input_tokens")), _int(split.get("ephemeral_1h_input_tokens"))
    if five_minutes + one_hour == 0:
        return total, 0
    return max(five_minutes, total - one_hour), one_hour


def _prompt_tokens(usage: dict[str, Any], cache_tokens: int) -> int:
    """Every prompt token, the cache's included, however the provider counts them."""
    prompt = _int(usage.get("prompt_tokens"))
    anthropic_input = _int(usage.get("input_tokens"))
    if not prompt:
        if anthropic_input or cache_tokens and "cache_read_input_tokens" in usage:
            return anthropic_input + cache_tokens  # Anthropic's input_tokens: the cache's tokens apart
        return _int(usage.get("prompt_cache_hit_tokens")) + _int(usage.get("prompt_cache_miss_tokens"))
    anthropic = "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage
    if anthropic and cache_tokens and (prompt < cache_tokens or prompt == anthropic_input):
        return prompt + cache_tokens  # a relay passed Anthropic's input_tokens on as prompt_tokens
    return prompt


_OTHER_SHAPES = frozenset(
    {
        "prompt_cache_hit_tokens",
        "prompt_cache_miss_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "cache_creation",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "cache_write_tokens",
    }
)
"""Keys only the other providers' usage objects carry (DeepSeek, Anthropic through a relay, older
Moonshot): without any of them an answer's usage is OpenAI's shape."""


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


MAX_TOKENS = 2**53 - 1
"""A count past this is no count (and past what SQLite or a JSON reader holds exactly): taken as none."""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_TOKENS else 0
