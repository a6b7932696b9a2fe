"""Live run statistics, built from engine events: counts, tokens, cost, latency, rates.

Shared by the headless progress line and the TUI footer. Every update is O(log n) or O(1)
so that a listener never costs the engine more than a few microseconds per event.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..lanes import is_batch_endpoint
from ..pricing import cost_per_minute, projected_total
from ..providers.errors import ErrorClass
from ..providers.usage import Usage
from .events import (
    AgentStepped,
    Attempt,
    AttemptEnded,
    AttemptStarted,
    BatchSubmitted,
    EngineEvent,
    PhaseAttempt,
    RunFinished,
    RunStarted,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TasksAdded,
    TaskState,
    TaskSucceeded,
    ToolCallEnded,
)

RATE_WINDOW_S = 10.0


def nearest_rank(sorted_values: list[float], q: float) -> float | None:
    """The q-quantile of already sorted values (nearest rank); None when there are none."""
    if not sorted_values:
        return None
    return _rank(sorted_values, q)


def _rank(sorted_values: list[float], q: float) -> float:
    """`nearest_rank` of values known not to be empty."""
    return sorted_values[min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))]


def latency_summary(sorted_ms: list[float]) -> dict[str, float | None]:
    """p50/p95/p99/mean in ms, rounded to 0.1: the shape summary.json and shadow.json use."""
    if not sorted_ms:
        return {"p50": None, "p95": None, "p99": None, "mean": None}
    return {
        **{f"p{round(q * 100)}": round(_rank(sorted_ms, q), 1) for q in (0.5, 0.95, 0.99)},
        "mean": round(sum(sorted_ms) / len(sorted_ms), 1),
    }


@dataclass
class RunStats:
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    in_flight: int = 0
    sent: int = 0
    retried: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    timeouts: int = 0
    hedged: int = 0
    steps: int = 0
    """Model calls of multi-step agents that asked for tools."""
    tool_calls: int = 0
    tool_errors: int = 0
    critical_path: int = 0
    """The most steps any agent has needed so far (its final answer counts as a step)."""
    usage: Usage = Usage()
    cost_usd: float = 0.0
    batch_cost_usd: float = 0.0
    """The part of `cost_usd` billed for batch lines (`--lane batch|auto`)."""
    batch_sent: int = 0
    batch_waiting: int = 0
    """Batch lines submitted whose answer has not come back yet (not counted `in_flight`)."""
    unpriced_attempts: int = 0
    started_at: float = field(default_factory=time.monotonic)
    latencies_ms: list[float] = field(default_factory=list)
    """Sorted latencies of successful attempts."""
    _recent: deque[tuple[float, int]] = field(default_factory=deque)
    """(time, tokens) of recent completions, for req/s and tok/s."""
    clock: Callable[[], float] = time.monotonic
    _ended_at: float | None = None
    """When the last run ended (its clock), until another starts."""

    def observe(self, event: EngineEvent) -> None:
        match event:
            case AttemptStarted(hedge=hedge):
                self.sent += 1
                self.in_flight += 1
                self.hedged += hedge
            case BatchSubmitted(indices=indices):
                self.batch_sent += len(indices)
                self.batch_waiting += len(indices)
            case AttemptEnded(attempt=attempt):
                self._attempt_ended(attempt)
            case PhaseAttempt(attempt=attempt):
                self.sent += 1
                self.in_flight += 1  # balanced by _attempt_ended
                self._attempt_ended(attempt)
            case TasksAdded(total=total):
                self.total = total
            case TaskSucceeded(attempt=attempt):
                self._attempt_ended(attempt)
                self.succeeded += 1
                if not is_batch_endpoint(attempt.endpoint):  # a batch line's hours are no call latency
                    bisect.insort(self.latencies_ms, attempt.latency_ms)
            case AgentStepped(attempt=attempt, step=step):
                self._attempt_ended(attempt)
                self.steps += 1
                self.critical_path = max(self.critical_path, step + 1)  # at least one call follows
            case ToolCallEnded(ok=ok):
                self.tool_calls += 1
                self.tool_errors += not ok
            case TaskRetrying(attempt=attempt):
                self._attempt_ended(attempt)
                self.retried += 1
            case TaskFailed(attempt=attempt):
                self._attempt_ended(attempt)
                self.failed += 1
            case TaskCancelled(attempt=attempt):
                self.cancelled += 1
                if attempt is not None and is_batch_endpoint(attempt.endpoint):
                    self.batch_waiting = max(0, self.batch_waiting - 1)
                elif attempt is not None:
                    self.in_flight = max(0, self.in_flight - 1)
            case TaskQueued(previous=previous):
                if previous is TaskState.FAILED:
                    self.failed -= 1
                elif previous is TaskState.CANCELLED:
                    self.cancelled -= 1
            case RunStarted(total=total):
                if not self.total:
                    self.started_at = self.clock()
                elif self._ended_at is not None:  # started again (`r`, `p` after a stop): the idle gap is not run time
                    self.started_at += self.clock() - self._ended_at
                self._ended_at = None
                self.total = total
            case RunFinished():
                self._ended_at = self.clock()

    def _attempt_ended(self, attempt: Attempt) -> None:
        batch = is_batch_endpoint(attempt.endpoint)
        if batch:
            self.batch_waiting = max(0, self.batch_waiting - 1)
        else:
            self.in_flight = max(0, self.in_flight - 1)
        self.usage = self.usage + attempt.usage
        if attempt.cost_usd is not None:
            self.cost_usd += attempt.cost_usd
            if batch:
                self.batch_cost_usd += attempt.cost_usd
        elif attempt.usage.total:
            self.unpriced_attempts += 1
        if attempt.error is not None:
            kind = attempt.error.kind
            if kind is ErrorClass.RATE_LIMIT:
                self.rate_limited += 1
            elif kind is ErrorClass.SERVER:
                self.server_errors += 1
            elif kind is ErrorClass.TIMEOUT:
                self.timeouts += 1
        if batch:
            return  # a whole file of lines arrives at once: no rate of the live calls
        now = self.clock()
        self._recent.append((now, attempt.usage.total))
        while self._recent and now - self._recent[0][0] > RATE_WINDOW_S:
            self._recent.popleft()

    # ----------------------------------------------------------------- derived figures

    @property
    def done(self) -> int:
        return self.succeeded + self.failed

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self.started_at

    def percentile(self, q: float) -> float | None:
        return nearest_rank(self.latencies_ms, q)

    def rates(self) -> tuple[float, float]:
        """(requests/s, tokens/s) over the last few seconds."""
        if not self._recent:
            return 0.0, 0.0
        span = max(1.0, min(RATE_WINDOW_S, self.clock() - self._recent[0][0]))
        return len(self._recent) / span, sum(t for _, t in self._recent) / span

    def eta_s(self) -> float | None:
        remaining = self.total - self.done - self.cancelled
        if remaining <= 0:
            return 0.0
        if self.done == 0:
            return None
        return remaining * self.elapsed_s / self.done

    @property
    def cost_known(self) -> bool:
        return self.unpriced_attempts == 0

    @property
    def cost_per_min_usd(self) -> float | None:
        """Spend rate since the run started; None when a price is unknown."""
        return cost_per_minute(self.cost_usd if self.cost_known else None, self.elapsed_s)

    @property
    def projected_cost_usd(self) -> float | None:
        """What the whole run will cost if the remaining tasks cost what the finished ones did."""
        remaining = self.total - self.done - self.cancelled
        return projected_total(self.cost_usd if self.cost_known else None, self.done, remaining)
