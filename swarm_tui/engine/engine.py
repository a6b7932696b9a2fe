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
from .events import (
    Attempt,
    AttemptStarted,
    ConcurrencyChanged,
    EngineEvent,
    RateGateClosed,
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


@dataclass(frozen=True)
class EngineSettings:
    concurrency: int = 50
    max_attempts: int = 4
    timeout_s: float = 60.0
    """Hard wall-clock limit of one attempt (the SDK's read timeout is per read, not per call)."""
    stream: bool = False
    first_token_timeout_s: float | None = None
    idle_timeout_s: float | None = None


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
        self.admission = AdmissionController(settings.concurrency)
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
        limit = self.admission.set_limit(limit)
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
            if not await self.admission.acquire():
                self._ready.appendleft(index)
                return
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
        attempt = Attempt(
            index, number, self.client.name, started_at, latency_ms, "ok", status=200,
            request_id=result.request_id, usage=result.usage, cost_usd=self._cost(result), ttft_ms=result.ttft_ms,
        )
        self.journal.record_success(attempt, result.body)
        self.states[index] = TaskState.SUCCEEDED
        self._emit(TaskSucceeded(attempt, result.content))

    def _on_failure(self, index: int, number: int, started_at: float, latency_ms: float, error: CallError) -> None:
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
