"""What the simulator counts: the responses it really sent, for ``GET /sim/stats``.

The server reports back each response once it is out (``Simulator.finish``), so the counters
describe what a client received: a hung request that the client abandoned is counted as a hang,
not as a 504. The live requests and the Batch API's lines each have a ``ChatCounters`` of their
own, so a test can tell the two lanes' traffic apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swarm_tui.sim.reply import Reply

__all__ = ["ChatCounters"]


@dataclass
class ChatCounters:
    requests: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    successes: int = 0
    rate_limited: int = 0
    quota_errors: int = 0
    server_errors: int = 0
    client_errors: int = 0
    hangs: int = 0
    stream_stalls: int = 0
    streams: int = 0
    scripted: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    duplicate_successes: int = 0
    successes_by_prompt: dict[str, int] = field(default_factory=dict)
    succeeded_keys: set[str] = field(default_factory=set)
    tool_steps: int = 0
    tool_calls: int = 0
    judge_requests: int = 0
    judge_pointwise: int = 0
    judge_pairwise: int = 0
    judge_prose: int = 0
    quality_answers: int = 0
    quality_sum: int = 0
    flex_unavailable: int = 0
    """Flex requests answered 429 resource unavailable (counted in `rate_limited` too)."""
    successes_by_tier: dict[str, int] = field(default_factory=dict)

    def count(self, reply: Reply, status: int | None = None) -> None:
        """Count a response that was actually sent (``status`` overrides reply.status)."""
        st = reply.status if status is None else status
        k = str(st)
        self.by_status[k] = self.by_status.get(k, 0) + 1
        if st == 200:
            self._count_success(reply)
        elif st >= 500:
            self.server_errors += 1
        elif reply.category == "rate_limited":
            self.rate_limited += 1
        elif reply.category == "flex_unavailable":
            self.rate_limited += 1
            self.flex_unavailable += 1
        elif reply.category == "quota":
            self.quota_errors += 1
        else:
            self.client_errors += 1

    def _count_success(self, reply: Reply) -> None:
        self.successes += 1
        tier = reply.meta[3]
        self.successes_by_tier[tier] = self.successes_by_tier.get(tier, 0) + 1
        usage = reply.stream.usage if reply.stream is not None else reply.body["usage"]  # type: ignore[index]
        self.prompt_tokens += usage["prompt_tokens"]
        self.completion_tokens += usage["completion_tokens"]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        self.cached_tokens += cached
        if cached:
            self.cache_hits += 1
        self.successes_by_prompt[reply.prompt] = self.successes_by_prompt.get(reply.prompt, 0) + 1
        if reply.tool_calls:
            self.tool_steps += 1
            self.tool_calls += reply.tool_calls
        if reply.judge == "pointwise":
            self.judge_pointwise += 1
        elif reply.judge == "pairwise":
            self.judge_pairwise += 1
        if reply.judge_prose:
            self.judge_prose += 1
        if reply.quality is not None:
            self.quality_answers += 1
            self.quality_sum += reply.quality
        if reply.key in self.succeeded_keys:
            self.duplicate_successes += 1
        else:
            self.succeeded_keys.add(reply.key)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of one set of chat counters (the live ones, or the batch lines')."""
        return {
            "requests": self.requests,
            "by_status": dict(sorted(self.by_status.items())),
            "successes": self.successes,
            "rate_limited": self.rate_limited,
            "quota_errors": self.quota_errors,
            "server_errors": self.server_errors,
            "client_errors": self.client_errors,
            "hangs": self.hangs,
            "stream_stalls": self.stream_stalls,
            "streams": self.streams,
            "scripted": self.scripted,
            "flex_unavailable": self.flex_unavailable,
            "successes_by_tier": dict(sorted(self.successes_by_tier.items())),
            "cache_hits": self.cache_hits,
            "tokens": {
                "prompt": self.prompt_tokens,
                "completion": self.completion_tokens,
                "cached": self.cached_tokens,
            },
            "duplicate_successes": self.duplicate_successes,
            "tool_steps": self.tool_steps,
            "tool_calls": self.tool_calls,
            "judge": {
                "requests": self.judge_requests,
                "pointwise": self.judge_pointwise,
                "pairwise": self.judge_pairwise,
                "prose": self.judge_prose,
            },
            "quality": {
                "answers": self.quality_answers,
                "mean": round(self.quality_sum / self.quality_answers, 2) if self.quality_answers else None,
            },
            "successes_by_prompt": dict(self.successes_by_prompt),
        }
