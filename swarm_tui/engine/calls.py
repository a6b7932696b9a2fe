"""One live call of a task's attempt (`Call`), and what can be read off a call's body and answer
without asking anyone: the estimates and the answer's parts the lanes bill and judge by."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from swarm_tui.core.events import Attempt
from swarm_tui.core.lanes import CACHE
from swarm_tui.core.stalls import StallWatch
from swarm_tui.core.task import JSONObject
from swarm_tui.core.usage import Usage
from swarm_tui.engine.ledger import answer_ceiling
from swarm_tui.providers.client import CallResult, ProviderClient
from swarm_tui.providers.streamed import StreamProgress
from swarm_tui.util.clock import run_time


@dataclass
class Call:
    """One HTTP call in flight for a task (two when a backup was hedged)."""

    index: int
    number: int
    client: ProviderClient
    started_at: float
    t0: float
    task: asyncio.Task[CallResult]
    body: dict[str, Any]
    """What was sent."""
    watch: StallWatch
    """The running loop's stall watch: the clock `t0` is on, and whether the process was stopped
    while the call was out."""
    send_seq: int = 0
    """The engine's count of requests sent, this one included: the ones sent after it are
    not in the rate-limit headers of its answer."""
    progress: StreamProgress | None = None
    """A streamed call's headers and chunks as they come (None: not streamed)."""
    hedge: bool = False
    """A backup of a slow first call: never counted toward the attempts or a failover."""
    ceiling: int | None = field(init=False)
    """The most tokens it may write (its max_tokens); None when its body sets none."""
    work: str = field(init=False)
    """Its endpoint and model: what its deadlines are learned from."""
    stalls_before: int = field(init=False)
    """The stalls the watch had counted when the call went out."""

    def __post_init__(self) -> None:
        self.ceiling = answer_ceiling(self.body)
        self.work = f"{self.client.name} {self.body.get('model') or ''}"
        self.stalls_before = self.watch.stalls

    def latency_ms(self) -> float:
        return (self.watch.now() - self.t0) * 1000.0

    @property
    def timed(self) -> bool:
        """Its latency says how long the provider took: the process was not stopped while the call
        was out. An answer that came during a stop is read on waking, at an unknown moment of the
        stop: its time with the stop is too long, without it too short (a call sent just before a
        stop of 20 s and read on waking took "0.1 s"); such a call teaches no deadline."""
        return self.watch.stalls == self.stalls_before


def prompt_estimate(body: JSONObject) -> int:
    """About 4 bytes of UTF-8 a token: the TPM reservation, and the bill of a call whose
    provider reported no usage (marked estimated)."""
    return len(json.dumps(body.get("messages", ()), ensure_ascii=False).encode()) // 4


def first_choice(result: CallResult) -> dict[str, Any]:
    """A chat completion's first choice ({} when it has none): its message and finish reason."""
    choices = result.body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    return choice if isinstance(choice, dict) else {}


def answer_message(result: CallResult) -> dict[str, Any]:
    """The assistant message of a chat completion ({} when it has none)."""
    message = first_choice(result).get("message")
    return message if isinstance(message, dict) else {}


def answer_estimate(result: CallResult) -> int:
    """The tokens an answer wrote, from its text (reasoning and tool calls included), when the
    provider did not say: about 4 bytes of UTF-8 a token."""
    message = answer_message(result)
    text = json.dumps(
        [message.get("content"), message.get("reasoning_content"), message.get("tool_calls")], ensure_ascii=False
    )
    return max(1, len(text.encode()) // 4)


def finish_reason(result: CallResult) -> str | None:
    reason = first_choice(result).get("finish_reason")
    return reason if isinstance(reason, str) else None


def cut_before_any_content(result: CallResult) -> bool:
    """An answer cut at its token limit (`finish_reason: length`, checked by the caller) with neither
    text nor a tool call: nothing of it is usable."""
    message = answer_message(result)
    return not message.get("content") and not message.get("tool_calls")


def cached_attempt(
    index: int, number: int, result: CallResult, saved_usd: float | None, finish_reason: str | None
) -> Attempt:
    """The journal's record of an answer replayed from the response cache: lane `cache`, no call, cost 0."""
    return Attempt(
        index,
        number,
        CACHE,
        run_time(),
        0.0,
        "ok",
        status=200,
        request_id=result.request_id,
        usage=Usage(),
        cost_usd=0.0,
        finish_reason=finish_reason,
        saved_usd=saved_usd,
    )
