"""The swarm engine (L1 orchestrator + L3 workers): one coroutine that dispatches every task.

Design:

* One dispatcher takes ready tasks in order, waits for admission (pause, Retry-After gate,
  in-flight limit), then starts one asyncio task per attempt. Thousands of queued tasks cost
  a deque entry each, not a coroutine each.
* A failed attempt that may be retried releases its slot at once and comes back after its
  backoff via `loop.call_later`; a 429's Retry-After also closes the provider-wide gate.
* Every outcome is journaled (one transaction) *before* listeners hear of it, so whatever the
  screen or the progress line shows as done is on disk.
* Pause stops dispatch (in-flight calls finish); abort stops dispatch and cancels in-flight
  calls; `retry_failed` puts finally-failed tasks back in the queue.

The engine imports nothing from Textual: the TUI subscribes to its events like anyone else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from ..jobs import Task
from ..pricing import Price
from ..providers.client import CallResult, ProviderClient, StreamDeadlines
from ..providers.errors import CallError
from .admission import AdmissionController
from .pacing import AdaptiveConcurrency, RateLimits
from .events import (
    Attempt,
    AttemptStarted,
    ConcurrencyChanged,
    EngineEvent,
    RateGateClosed,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TaskState,
    TaskSucceeded,
)
from .retry import RetryPolicy
from .stats import RunStats

if TYPE_CHECKING:
    from ..journal import Journal

log = logging.getLogger(__name__)

Listener = Callable[[EngineEvent], None]

DEFAULT_MAX_TOKENS = 1024
"""What a request without max_tokens is assumed to reserve against TPM."""


@dataclass(frozen=True)
class EngineSettings:
    concurrency: int = 50
    max_attempts: int = 4
    timeout_s: float = 60.0
    """Hard wall-clock limit of one attempt (the SDK's read timeout is per read, not per call)."""
    stream: bool = False
    first_token_timeout_s: float | None = None
    idle_timeout_s: float | None = None
    rpm: int | None = None
    tpm: int | None = None
    adaptive: bool = True
    """AIMD on the in-flight limit; `concurrency` is then the ceiling."""


class SwarmEngine:
    def __init__(
        self,
        tasks: Sequence[Task],
        client: ProviderClient,
        journal: "Journal",
        settings: EngineSettings = EngineSettings(),
        *,
        price: Price | None = None,
        states: dict[int, TaskState] | None = None,
        attempts_made: dict[int, int] | None = None,
        simulated: bool = False,
    ) -> None:
        self.tasks = {task.index: task for task in tasks}
        self.client = client
        self.journal = journal
        self.settings = settings
        self.price = price
        self.simulated = simulated
        self.retry_policy = RetryPolicy(max_attempts=settings.max_attempts)
        self.rate_limits = RateLimits(settings.rpm, settings.tpm)
        self.admission = AdmissionController(settings.concurrency, rate_limits=self.rate_limits)
        self.adaptive = AdaptiveConcurrency(settings.concurrency) if settings.adaptive else None
        self._reserved_tokens: dict[int, int] = {}
        self.stats = RunStats()
        self.states: dict[int, TaskState] = {i: TaskState.QUEUED for i in self.tasks}
        if states:
            self.states.update(states)
        self._attempt_numbers: dict[int, int] = dict(attempts_made or {})
        """Attempts ever made per task (journal numbering continues across resumes)."""
        self._round_attempts: dict[int, int] = {}
        """Attempts in the current round; `retry_failed` starts a new round."""
        self._listeners: list[Listener] = [self.stats.observe]
        self._ready: deque[int] = deque()
        self._retry_timers: dict[int, asyncio.TimerHandle] = {}
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._running = False
        self._stop_reason: str | None = None
        self._aborted = False
        self._deadlines = StreamDeadlines(settings.first_token_timeout_s, settings.idle_timeout_s)
        for index in sorted(self.tasks):
            state = self.states[index]
            if not state.is_final:
                self.states[index] = TaskState.QUEUED
                self._ready.append(index)

    # ----------------------------------------------------------------- observing

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _emit(self, event: EngineEvent) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # a broken listener must not stop the swarm
                log.exception("engine listener %r failed on %r", listener, event)

    @property
    def running(self) -> bool:
        return self._running

    @property
    def paused(self) -> bool:
        return self.admission.paused

    @property
    def aborted(self) -> bool:
        return self._aborted

    def count(self, state: TaskState) -> int:
        return sum(1 for s in self.states.values() if s is state)

    # ----------------------------------------------------------------- steering

    def pause(self) -> None:
        if not self.admission.paused:
            self.admission.pause()
            self.journal.log_event("paused")
            self._emit(RunPaused())

    def resume(self) -> None:
        if self.admission.paused:
            self.admission.resume()
            self.journal.log_event("resumed")
            self._emit(RunResumed())

    def set_concurrency(self, limit: int, reason: str = "user") -> int:
        """The user's limit: the ceiling the adaptive controller works under, and the limit now."""
        limit = self.admission.set_limit(limit)
        if self.adaptive is not None:
            self.adaptive.set_ceiling(limit)
        self.journal.log_event("concurrency", {"limit": limit, "reason": reason})
        self._emit(ConcurrencyChanged(limit, reason))
        return limit

    def abort(self, reason: str = "aborted by user") -> None:
        """Stop dispatch and cancel every in-flight call; the journal stays resumable."""
        if self._aborted:
            return
        self._aborted = True
        self._stop(reason)
        for task in self._in_flight.values():
            task.cancel()

    def stop_dispatch(self, reason: str) -> None:
        """Send nothing new; let in-flight calls finish (budget and error-rate guards)."""
        self._stop(reason)

    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]:
        """Queue finally-failed tasks again, with a fresh attempt budget. Returns what was queued.

        While the engine runs they are picked up at once; otherwise the caller runs it again.
        """
        chosen = [i for i in (self.tasks if indices is None else indices) if self.states.get(i) is TaskState.FAILED]
        if not chosen:
            return []
        if not self._running:
            self._stop_reason = None
            self._aborted = False
        self.journal.requeue(chosen)
        for index in chosen:
            self.states[index] = TaskState.QUEUED
            self._round_attempts.pop(index, None)
            self._ready.append(index)
            self._emit(TaskQueued(index, TaskState.FAILED))
        self._wake.set()
        return chosen

    # ----------------------------------------------------------------- running

    async def run(self) -> RunFinished:
        """Dispatch until every task is final (or dispatch is stopped); may be called again."""
        if self._running:
            raise RuntimeError("the engine is already running")
        self._running = True
        self._aborted = False
        self._stop_reason = None
        self.admission.reopen()
        for index in self._ready:
            if self.states[index] is TaskState.CANCELLED:  # left unfinished by an earlier stop
                self.states[index] = TaskState.QUEUED
                self._emit(TaskQueued(index, TaskState.CANCELLED))
        pending = len(self._ready)
        self.journal.log_event("run", {"pending": pending, "concurrency": self.admission.limit})
        self._emit(RunStarted(len(self.tasks), pending, self.admission.limit, self.client.name, self.simulated))
        if self.rate_limits.rpm or self.rate_limits.tpm:
            self._emit(RateLimitsLearned(self.rate_limits.rpm, self.rate_limits.tpm))
        try:
            await self._dispatch()
        finally:
            if self._in_flight:
                await asyncio.gather(*self._in_flight.values(), return_exceptions=True)
            self._running = False
        if self._stop_reason is not None:
            self._cancel_waiting()
        finished = RunFinished(
            succeeded=self.count(TaskState.SUCCEEDED),
            failed=self.count(TaskState.FAILED),
            cancelled=len(self.tasks) - self.count(TaskState.SUCCEEDED) - self.count(TaskState.FAILED),
            aborted=self._aborted,
            stop_reason=self._stop_reason,
        )
        self.journal.log_event("finished", {"succeeded": finished.succeeded, "failed": finished.failed,
                                            "unfinished": finished.cancelled, "reason": self._stop_reason})
        self._emit(finished)
        return finished

    async def _dispatch(self) -> None:
        while self._stop_reason is None:
            index = await self._next_ready()
            if index is None:
                return
            tokens = self._token_estimate(index)
            if not await self.admission.acquire(tokens):
                self._ready.appendleft(index)
                return
            self._reserved_tokens[index] = tokens
            self._launch(index)

    async def _next_ready(self) -> int | None:
        while self._stop_reason is None:
            if self._ready:
                return self._ready.popleft()
            if not self._in_flight and not self._retry_timers:
                return None
            self._wake.clear()
            await self._wake.wait()
        return None

    def _launch(self, index: int) -> None:
        number = self._attempt_numbers.get(index, 0) + 1
        self._attempt_numbers[index] = number
        self._round_attempts[index] = self._round_attempts.get(index, 0) + 1
        self.states[index] = TaskState.RUNNING
        self._emit(AttemptStarted(index, number, self.client.name))
        task = asyncio.create_task(self._attempt(index, number), name=f"attempt-{index}-{number}")
        self._in_flight[index] = task

    async def _attempt(self, index: int, number: int) -> None:
        started_at = time.time()
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                result = await self.client.complete(self.tasks[index].body, stream=self.settings.stream,
                                                    deadlines=self._deadlines)
        except asyncio.CancelledError:
            attempt = Attempt(index, number, self.client.name, started_at, _ms_since(t0), "cancelled")
            self.journal.record_cancelled([index], [attempt])
            self.states[index] = TaskState.CANCELLED
            self._ready.append(index)  # unfinished work for the next run() or resume
            self._emit(TaskCancelled(index, attempt))
        except Exception as exc:  # every failure is classified, none escapes the engine
            self._on_failure(index, number, started_at, _ms_since(t0), self.client.classify(exc))
        else:
            self._on_success(index, number, started_at, _ms_since(t0), result)
        finally:
            del self._in_flight[index]
            self.admission.release()
            self._wake.set()

    def _on_success(self, index: int, number: int, started_at: float, latency_ms: float, result: CallResult) -> None:
        self.rate_limits.settle(self._reserved_tokens.pop(index, 0), result.usage.total)
        self._learn(result.rate_headers)
        if self.adaptive is not None:
            self.adaptive.observe_latency(latency_ms / 1000)
            busy = self.admission.in_flight >= self.admission.limit
            grown = self.adaptive.on_success(busy)
            if grown is not None:
                self._adapt(grown, "clean and busy: +1")
        attempt = Attempt(
            index, number, self.client.name, started_at, latency_ms, "ok", status=200,
            request_id=result.request_id, usage=result.usage, cost_usd=self._cost(result), ttft_ms=result.ttft_ms,
        )
        self.journal.record_success(attempt, result.body)
        self.states[index] = TaskState.SUCCEEDED
        self._emit(TaskSucceeded(attempt, result.content))

    def _on_failure(self, index: int, number: int, started_at: float, latency_ms: float, error: CallError) -> None:
        self._reserved_tokens.pop(index, None)  # a refused request used no tokens, but keep them: pace down
        self._learn(error.rate_headers)
        if self.adaptive is not None:
            if error.is_congestion:
                shrunk = self.adaptive.on_congestion()
                if shrunk is not None:
                    self._adapt(shrunk, f"{error.kind}{f' {error.status}' if error.status else ''}: decrease")
            elif error.status and error.status >= 500:
                self.adaptive.on_server_error()
        round_attempts = self._round_attempts.get(index, 1)
        retry = self._stop_reason is None and self.retry_policy.should_retry(error, round_attempts)
        attempt = Attempt(
            index, number, self.client.name, started_at, latency_ms, "retry" if retry else "failed",
            status=error.status, error=error, request_id=error.request_id,
        )
        if not retry:
            self.journal.record_failure(attempt)
            self.states[index] = TaskState.FAILED
            self._emit(TaskFailed(attempt))
            return
        delay = self.retry_policy.delay_s(error, round_attempts)
        if error.is_rate_limit and error.retry_after_s and self.admission.close_gate(error.retry_after_s):
            self._emit(RateGateClosed(error.retry_after_s))
        self.journal.record_retry(attempt)
        self.states[index] = TaskState.RETRYING
        self._retry_timers[index] = asyncio.get_running_loop().call_later(delay, self._requeue, index)
        self._emit(TaskRetrying(attempt, delay))

    def _learn(self, headers) -> None:
        learned = self.rate_limits.learn(headers)
        if learned is not None:
            self.journal.log_event("rate_limits", {"rpm": learned.rpm, "tpm": learned.tpm})
            self._emit(RateLimitsLearned(learned.rpm, learned.tpm))

    def _adapt(self, limit: int, reason: str) -> None:
        self.admission.set_limit(limit)
        self.journal.log_event("concurrency", {"limit": limit, "reason": reason})
        self._emit(ConcurrencyChanged(limit, reason))

    def _token_estimate(self, index: int) -> int:
        """TPM reservation: prompt estimate (~4 bytes a token) + the answer's ceiling."""
        body = self.tasks[index].body
        if self.rate_limits.tokens is None:
            return 0
        prompt = len(json.dumps(body.get("messages", ()), ensure_ascii=False).encode()) // 4
        return prompt + int(body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_TOKENS)

    def _requeue(self, index: int) -> None:
        self._retry_timers.pop(index, None)
        self.states[index] = TaskState.QUEUED
        self._ready.append(index)
        self._wake.set()

    def _stop(self, reason: str) -> None:
        if self._stop_reason is not None:
            return
        self._stop_reason = reason
        self.journal.log_event("stopping", {"reason": reason})
        self._emit(RunStopping(reason))
        self._wake.set()
        self.admission.close()

    def _cancel_waiting(self) -> None:
        """After a stop: tasks queued or waiting out a backoff become unfinished (cancelled) work,
        kept in the queue for the next run() or a resume."""
        for timer in self._retry_timers.values():
            timer.cancel()
        waiting = sorted(set(self._retry_timers) | set(self._ready))
        self._retry_timers.clear()
        self._ready = deque(waiting)
        newly = [i for i in waiting if self.states[i] is not TaskState.CANCELLED]
        if newly:
            self.journal.record_cancelled(newly)
        for index in newly:
            self.states[index] = TaskState.CANCELLED
            self._emit(TaskCancelled(index))

    def _cost(self, result: CallResult) -> float | None:
        return self.price.cost(result.usage) if self.price else None


def _ms_since(t0: float) -> float:
    return (time.monotonic() - t0) * 1000.0
