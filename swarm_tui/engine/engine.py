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
import dataclasses
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.board import TaskBoard
from ..core.decide import Next
from ..core.errors import STRAGGLER_CODE, CallError, ErrorClass
from ..core.events import (
    AgentStepped,
    Attempt,
    AttemptEnded,
    AttemptStarted,
    ConcurrencyChanged,
    EndpointSwitched,
    EngineEvent,
    PhaseAttempt,
    PhaseChanged,
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
    TasksAdded,
    TaskState,
    TaskSucceeded,
    ToolCallEnded,
)
from ..core.lanes import LIVE
from ..core.stalls import StallWatch
from ..core.task import Task
from ..core.usage import Usage
from ..errors import JournalWriteError
from ..pricing import Price
from ..providers.answer import MAX_ANSWER_BYTES
from ..providers.client import CallResult, ProviderClient, StreamDeadlines
from ..tools.transcript import assistant_message, pending_tool_calls, steps_taken, tool_message
from .admission import AdmissionController
from .batch_lane import BatchLane, BatchLimits
from .deadlines import RECHECK_S, STRAGGLER_FACTOR, TailDeadlines
from .failover import CircuitBreaker
from .ledger import SpendLedger, answer_ceiling, worst_usage
from .observable import Listener, ObservableEngine
from .pacing import AdaptiveConcurrency, RateLimits
from .retry import RetryPolicy
from .stats import RunStats

if TYPE_CHECKING:
    from ..core.ports import JournalSink
    from ..tools.toolbox import Toolbox

log = logging.getLogger(__name__)

MAX_STEPS_CODE = "max_steps"
"""The code of a multi-step agent that still asked for tools after its last allowed step."""

Validator = Callable[[Task, CallResult], "str | None"]


Trimmer = Callable[[Task], "Task | None"]
"""Shortens a request that passed the model's context length (e.g. drops the rolling memory);
None when there is nothing to drop."""


class RunStopped(Exception):
    """Raised by `call_direct` when the run was stopped (abort, budget) before the call could go out."""


"""Checks a successful answer (e.g. that it is JSON); returns what is wrong with it, or None."""

CONGESTED_LATENCY_SHARE = 0.25
"""A timeout counts as congestion when the median answer takes over this share of the timeout."""


HEDGE_MAX_SHARE = 0.05
HEDGE_QUIET_AFTER_429_S = 5.0

DEFAULT_MAX_TOKENS = 1024
"""What a request without max_tokens is assumed to reserve against TPM."""

TRUNCATED_CODE = "length"
"""The code of an answer cut at its token limit before any content (`finish_reason: length`)."""

REFUSALS = frozenset({ErrorClass.AUTH, ErrorClass.PERMISSION, ErrorClass.NOT_FOUND, ErrorClass.QUOTA})
REFUSALS_TO_STOP = 3
"""Calls refused for good in a row (a key, permission or model the provider does not accept)
after which dispatch stops: every other task would be refused the same way, and paid for nothing."""


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
    hedge: bool = False
    """Send a backup when an attempt runs past the running p95 x `hedge_factor`."""
    hedge_factor: float = 3.0
    straggler_factor: float | None = STRAGGLER_FACTOR
    """Abandon (and send again) a call past this many times what it should take at its
    max_tokens (`deadlines`); None: no straggler deadline, only the hard timeout."""
    budget_usd: float | None = None
    """A ceiling: a call goes out only when what was spent, what calls in flight may still cost
    and its own worst case stay within it (`ledger`)."""
    fail_on_error: float | None = None
    """Stop dispatch when the share of finished tasks that failed passes it."""
    max_retry_after_s: float = 60.0
    """A provider's Retry-After is honoured up to this (the OpenAI SDK's own cap): a header of
    `999999` or `inf` must not hold a run for days."""
    lane: str = LIVE
    """How tasks are carried: `live` calls, provider batches (`batch`), or a live share first and
    the rest as batches (`auto`); see `batch_lane`."""
    live_share: float = 0.02
    live_share_min: int = 20
    """Lane auto: the share of the tasks sent live first (at least this many)."""
    batch_poll_s: float = 2.0
    batch_poll_max_s: float = 60.0
    """A batch is polled after `batch_poll_s`, then 1.5x as long each time, up to this."""
    batch_max_requests: int = 50_000
    batch_max_bytes: int = 200 * 1024 * 1024
    """The provider's limits on one batch's input file (OpenAI's)."""
    max_answer_bytes: int = MAX_ANSWER_BYTES
    """What one answer may hold (`--max-answer-bytes`): a larger body fails as `answer_too_large`."""


class SwarmEngine(ObservableEngine):
    def __init__(
        self,
        tasks: Sequence[Task],
        client: ProviderClient,
        journal: JournalSink,
        settings: EngineSettings = EngineSettings(),
        *,
        price: Price | None = None,
        states: dict[int, TaskState] | None = None,
        attempts_made: dict[int, int] | None = None,
        simulated: bool = False,
        fallback: ProviderClient | None = None,
        fallback_price: Price | None = None,
        validator: Validator | None = None,
        trimmer: Trimmer | None = None,
        admission: AdmissionController | None = None,
        toolbox: Toolbox | None = None,
    ) -> None:
        """`admission`: an admission controller to use instead of a private one (its
        `rate_limits` become the engine's); a distributed run injects one whose RPM/TPM budget and
        Retry-After gate are shared by every engine of the swarm (`swarm_tui.distributed`).
        `toolbox`: the run's tools; with one, every task is a multi-step agent (see `_on_tool_request`)."""
        self.tasks = {task.index: task for task in tasks}
        self.toolbox = toolbox
        self._tool_runs: dict[int, asyncio.Task[None]] = {}
        """Agents whose tool calls are running (they hold no concurrency slot meanwhile)."""
        self._held: set[int] = set()
        """Tasks the user cancelled (`x`): they wait, unfinished, until retried or the run resumed."""
        self.client = client
        self.fallback = fallback
        self.breaker = CircuitBreaker() if fallback is not None else None
        self._prices = {client.name: price}
        if fallback is not None:
            self._prices[fallback.name] = fallback_price
        self.journal = journal
        self.settings = settings
        self.price = price
        self.simulated = simulated
        self.retry_policy = RetryPolicy(max_attempts=settings.max_attempts)
        if admission is None:
            self.rate_limits = RateLimits(settings.rpm, settings.tpm)
            self.admission = AdmissionController(settings.concurrency, rate_limits=self.rate_limits)
        else:
            self.admission = admission
            self.rate_limits = admission.rate_limits
        self.adaptive = AdaptiveConcurrency(settings.concurrency) if settings.adaptive else None
        if self.adaptive is not None:
            self.admission.set_limit(self.adaptive.limit)
        self._reserved_tokens: dict[int, int] = {}
        self.ledger = SpendLedger(settings.budget_usd)
        """The run's one spend ledger (spent, every session, and the worst cases of calls in flight)."""
        if settings.budget_usd is not None and price is None:
            raise ValueError("a budget needs the model's price (none is known for it)")
        self.validator = validator
        self.trimmer = trimmer
        self._trimmed: set[int] = set()
        self._reasked: set[int] = set()
        self._hedges_sent = 0
        self._sends = 0
        self._last_rate_limited = -1e9
        self.stats = RunStats()
        self.board = TaskBoard({i: TaskState.QUEUED for i in self.tasks})
        if states:
            self.board.states.update(states)
        self.states = self.board.states
        self._attempt_numbers: dict[int, int] = dict(attempts_made or {})
        """Attempts ever made per task (journal numbering continues across resumes)."""
        self._round_attempts: dict[int, int] = {}
        """Attempts in the current round; `retry_failed` starts a new round."""
        self._listeners: list[Listener] = [self.stats.observe]
        self._outbox: list = []
        self._ready: deque[int] = deque()
        self._retry_timers: dict[int, asyncio.TimerHandle] = {}
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._running = False
        self._stop_reason: str | None = None
        self._aborted = False
        self.last_retry_after_asked_s: float | None = None
        """The last Retry-After that was capped: what the provider asked for (shown while waiting)."""
        self._fatal: str | None = None
        """Why the run cannot go on (the journal cannot be written, an internal error)."""
        self._stalls: StallWatch | None = None
        self._stalls_loop: asyncio.AbstractEventLoop | None = None
        self._direct_calls = 0
        """Direct calls (planner, aggregator, judge) on the wire now."""
        self._refusals: list[CallError] = []
        """Calls refused for good (auth, permission, no such model) since the last answer."""
        self._deadlines = StreamDeadlines(settings.first_token_timeout_s, settings.idle_timeout_s)
        self.tail = TailDeadlines(
            settings.timeout_s,
            hedge_factor=settings.hedge_factor if settings.hedge else None,
            straggler_factor=settings.straggler_factor,
        )
        on_write_failure = getattr(journal, "on_write_failure", None)
        if on_write_failure is not None:
            on_write_failure(self._journal_failed)
        open_batches = getattr(journal, "open_batches", None)  # a shard's forwarding journal has none
        follows_batches = open_batches is not None and bool(open_batches())
        self.lane = (
            BatchLane(self, settings.lane, price, BatchLimits(settings.batch_max_requests, settings.batch_max_bytes))
            if settings.lane != LIVE or follows_batches
            else None
        )
        """The batch lane (`--lane batch|auto`): the tasks it carries are submitted as provider batches.
        A live run that resumes a run with batches still open follows them (never sends their tasks again)."""
        self._lane_task: asyncio.Task[None] | None = None
        for index in sorted(self.tasks):
            if not self.states[index].is_final:
                self._ready.append(index)

    # ----------------------------------------------------------------- steering

    def pause(self) -> None:
        if not self.admission.paused:
            self.admission.pause()
            self._emit_now(RunPaused())

    def resume(self) -> None:
        if self.admission.paused:
            self.admission.resume()
            self._emit_now(RunResumed())

    def set_concurrency(self, limit: int, reason: str = "user") -> int:
        """The user's limit: the ceiling the adaptive controller works under, and the limit now."""
        limit = self.admission.set_limit(limit)
        if self.adaptive is not None:
            self.adaptive.set_ceiling(limit)
        self._emit_now(ConcurrencyChanged(limit, reason, ceiling=limit))
        return limit

    def abort(self, reason: str = "aborted by user", *, leave_batches: bool = False) -> None:
        """Stop dispatch and cancel every in-flight call; the journal stays resumable. Open provider
        batches are cancelled too (what they completed is kept), unless `leave_batches` (a quit:
        they run on at the provider, and `resume` collects them)."""
        if self._aborted:
            return
        self._aborted = True
        self._stop(reason)
        for task in self._in_flight.values():
            task.cancel()
        if self.lane is not None and not leave_batches:
            self.lane.abort()

    def stop_dispatch(self, reason: str) -> None:
        """Send nothing new; let in-flight calls finish (budget and error-rate guards)."""
        self._stop(reason)

    def fail_run(self, reason: str) -> None:
        """The run cannot go on (its journal cannot be written): stop dispatch and cancel every
        in-flight call at once, so that no more answers are paid for than can be kept. The run
        ends with `reason` and is resumable (exit 1)."""
        if self._fatal is not None:
            return
        self._fatal = reason
        self._stop(reason)
        for task in self._in_flight.values():
            task.cancel()

    @property
    def fatal(self) -> str | None:
        return self._fatal

    @property
    def stalls(self) -> StallWatch:
        """The running loop's watch of the time the process did not run (SIGSTOP and the like):
        kept off every deadline and latency (looked up once per loop the engine runs in)."""
        loop = asyncio.get_running_loop()
        if self._stalls is None or self._stalls_loop is not loop:
            self._stalls, self._stalls_loop = StallWatch.of_running_loop(), loop
        return self._stalls

    def _journal_failed(self, error: JournalWriteError) -> None:
        in_flight = len(self._in_flight)
        self.fail_run(
            f"journal write failed, nothing more was sent: {error.cause}"
            + (f"; {in_flight} call{'s' if in_flight != 1 else ''} in flight cancelled" if in_flight else "")
        )

    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]:
        """Queue finally-failed tasks again, with a fresh attempt budget; named ones the user
        cancelled too (an agent goes on from its last completed step). Returns what was queued.

        While the engine runs they are picked up at once; otherwise the caller runs it again.
        """
        chosen = [
            i
            for i in (self.tasks if indices is None else indices)
            if self.states.get(i) is TaskState.FAILED or (indices is not None and i in self._held)
        ]
        if not chosen or self._fatal is not None:
            return []
        if not self._running:
            self._stop_reason = None
            self._aborted = False
        queued = [TaskQueued(index, self.states[index]) for index in chosen]
        self._commit(self.journal.requeue, chosen, events=queued)
        self._ready.extendleft(reversed(chosen))  # the user asked for these now: ahead of untried work
        for index in chosen:
            self._held.discard(index)
            self._round_attempts.pop(index, None)
        self._wake.set()
        return chosen

    def cancel_tasks(self, indices: Iterable[int]) -> list[int]:
        """Stop these tasks now (the user's `x` on an agent): a call in flight is cancelled (and
        journaled: it may be billed), tool calls still running stop (finished ones are kept),
        and the task waits, cancelled, until it is retried or the run resumed. Returns them."""
        chosen = [i for i in indices if i in self.tasks and not self.states[i].is_final and i not in self._held]
        for index in chosen:
            self._held.add(index)
            running = self._in_flight.get(index) or self._tool_runs.get(index)
            if running is not None:
                running.cancel()  # its own cleanup journals the cancellation and says so
                continue
            timer = self._retry_timers.pop(index, None)
            if timer is not None:
                timer.cancel()
            if index in self._ready:
                self._ready.remove(index)
            self._cancel_now(index)
        self._wake.set()
        return chosen

    def _cancel_now(self, index: int) -> None:
        if self.states[index] is TaskState.CANCELLED:
            return
        cancelled = TaskCancelled(index)
        self._commit(self.journal.record_cancelled, [index], (), events=[cancelled], quiet=True)

    def add_tasks(self, tasks: Sequence[Task]) -> list[int]:
        """Add tasks to the run (a plan's sub-tasks, a later round); journaled first."""
        new = [t for t in tasks if t.index not in self.tasks]
        if not new:
            return []
        added = TasksAdded(tuple(t.index for t in new), len(self.tasks) + len(new))
        self._commit(self.journal.add_tasks, new, events=[added])
        for task in new:
            self.tasks[task.index] = task
            self._ready.append(task.index)
        self._wake.set()
        return [t.index for t in new]

    def fail_over(self, reason: str) -> bool:
        """Send new attempts to the fallback now (the judge saw quality drop on the primary);
        False when there is no fallback. Half-open probes bring the primary back as usual."""
        if self.fallback is None or self.breaker is None:
            return False
        self.breaker.force_open(reason)
        self._log("failover", {"to": self.fallback.name, "reason": reason, "from_primary": True})
        self._emit(EndpointSwitched(self.fallback.name, reason))
        return True

    def add_price(self, endpoint: str, price: Price | None) -> None:
        """Bill calls to another endpoint (a judge's) at its price."""
        self._prices.setdefault(endpoint, price)

    def note_congestion(self, reason: str) -> None:
        """Congestion the provider showed to someone else sharing its budget (another shard of a
        distributed swarm): back the adaptive limit off as for a 429 of our own."""
        if self.adaptive is not None:
            shrunk = self.adaptive.on_congestion()
            if shrunk is not None:
                self._adapt(shrunk, reason)

    def announce_phase(self, phase: str, detail: str = "") -> None:
        self._emit(PhaseChanged(phase, detail))

    async def call_direct(
        self,
        phase: str,
        index: int,
        body: dict,
        *,
        client: ProviderClient | None = None,
        admission: AdmissionController | None = None,
    ) -> CallResult:
        """One request outside the task grid (planner, warm-up, aggregator, judge): the same
        admission, budget, retry policy and journal as any task, under a negative `index`. Raises
        the last failure, or `RunStopped` when the run stopped (the budget included) before it
        could go out. `client` and `admission`: another endpoint (a judge's) and its own pacing.
        A backoff is waited out with the slot given back, as a task's is."""
        admission = admission or self.admission
        round_attempts = 0
        while True:
            if not await admission.acquire(self._token_estimate_of(body)):
                raise RunStopped(self._stop_reason or "stopped")
            endpoint = client or self._route()
            number = self._attempt_numbers.get(index, 0) + 1
            if not self._reserve(index, number, body, endpoint.name):
                admission.release()
                if self._stop_reason is not None:
                    raise RunStopped(self._stop_reason)
                await self.ledger.room()  # it fits once calls in flight settle
                continue
            self._next_number(index)
            round_attempts += 1
            started_at, t0 = time.time(), self.stalls.now()
            self._direct_calls += 1
            try:
                async with self.stalls.deadline(self.settings.timeout_s):
                    result = await endpoint.complete(
                        body, stream=self.settings.stream, deadlines=self._deadlines, bounded_by_caller=True
                    )
            except asyncio.CancelledError:  # an abort: the call went out and may be billed
                cut = self._cut_attempt(index, number, endpoint.name, started_at, t0, body, "cancelled")
                self._record_phase_attempt(phase, cut)
                raise
            except Exception as exc:
                failure, error = exc, endpoint.classify(exc)
            else:
                attempt = self._answered(index, number, endpoint.name, started_at, _ms_since(t0), result, "ok", body)
                self._record_phase_attempt(phase, attempt)
                return result
            finally:
                admission.release()
                self._direct_calls -= 1
            retry = self.retry_policy.should_retry(error, round_attempts) and self._stop_reason is None
            self.ledger.settle((index, number), None)
            attempt = Attempt(
                index,
                number,
                endpoint.name,
                started_at,
                _ms_since(t0),
                "retry" if retry else "failed",
                status=error.status,
                error=error,
            )
            self._record_phase_attempt(phase, attempt)
            if not retry:
                raise failure
            error = self._capped(error)
            if error.is_rate_limit and error.retry_after_s:
                admission.close_gate(error.retry_after_s)
            await asyncio.sleep(self.retry_policy.delay_s(error, round_attempts))

    def _record_phase_attempt(self, phase: str, attempt: Attempt) -> None:
        event = PhaseAttempt(phase, attempt)
        self._commit(self.journal.record_attempt, attempt, events=[event])

    # ----------------------------------------------------------------- running

    async def run(self) -> RunFinished:
        """Dispatch until every task is final (or dispatch is stopped); may be called again."""
        if self._running:
            raise RuntimeError("the engine is already running")
        if self._fatal is not None:
            return self.outcome()
        self._running = True
        self._aborted = False
        self._stop_reason = None
        self.admission.reopen()
        self._open_ledger()
        pending = len(self._ready)
        if self.lane is not None:  # the lane's tasks leave the live queue (those in open batches for good)
            self._ready = deque(self.lane.claim(list(self._ready)))
        ceiling = self.adaptive.ceiling if self.adaptive is not None else None
        self._emit(
            RunStarted(len(self.tasks), pending, self.admission.limit, self.client.name, self.simulated, ceiling)
        )
        for index in [*self._ready, *(self.lane.waiting if self.lane is not None else ())]:
            previous = self.states[index]
            if previous is not TaskState.QUEUED:  # left unfinished by an earlier stop (or process)
                self._emit(TaskQueued(index, previous))
        if self.rate_limits.rpm or self.rate_limits.tpm:
            self._emit(RateLimitsLearned(self.rate_limits.rpm, self.rate_limits.tpm))
        if self.lane is not None:
            self._lane_task = asyncio.create_task(self.lane.run(), name="batch-lane")
            self._lane_task.add_done_callback(self._lane_done)
        try:
            await self._dispatch()
        finally:
            if self._lane_task is not None:
                await asyncio.gather(self._lane_task, return_exceptions=True)
                self._lane_task = None
            if self._in_flight:
                await asyncio.gather(*self._in_flight.values(), return_exceptions=True)
            for tools in list(self._tool_runs.values()):  # a stop: tool calls still running end here
                tools.cancel()
            if self._tool_runs:
                await asyncio.gather(*self._tool_runs.values(), return_exceptions=True)
            self._running = False
        self._flush_outbox()  # the last answers (group commit) count in the outcome
        if self._stop_reason is not None:
            self._cancel_waiting()
        finished = self.outcome()
        self._emit(finished)
        self._flush_outbox()  # the run's last word is on disk and out before run() returns
        return finished

    async def _dispatch(self) -> None:
        while self._stop_reason is None:
            index = await self._next_ready()
            if index is None:
                return
            if self._owes_tool_calls(index):  # stopped mid-step (a crash, `x`): finish its tools first
                self._start_tools(index, steps_taken(self.tasks[index].body.get("messages", [])))
                continue
            tokens = self._token_estimate(index)
            if not await self.admission.acquire(tokens):
                if index not in self._held:
                    self._ready.appendleft(index)
                return
            if index in self._held:  # the user cancelled it (`x`) while it waited for a slot
                self.admission.release()
                continue
            client = self._route()
            if self.ledger.budget_usd is not None and not self._reserve(
                index, self._attempt_numbers.get(index, 0) + 1, self._request_body(index, client), client.name
            ):
                self.admission.release()
                self._ready.appendleft(index)
                if self._stop_reason is not None:  # the budget is spent
                    return
                await self.ledger.room()  # it fits once calls in flight settle
                continue
            self._reserved_tokens[index] = tokens
            self._launch(index, client)

    async def _next_ready(self) -> int | None:
        while self._stop_reason is None:
            if self._ready:
                return self._ready.popleft()
            if not self._in_flight and not self._retry_timers and not self._tool_runs and not self._lane_busy:
                return None
            self._wake.clear()
            await self._wake.wait()
        return None

    @property
    def _lane_busy(self) -> bool:
        """The batch lane still has batches to submit or follow (their lines may come back live)."""
        return self._lane_task is not None and not self._lane_task.done()

    def _lane_done(self, task: asyncio.Task[None]) -> None:
        self._wake.set()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("the batch lane crashed", exc_info=exc)
            self.fail_run(f"internal error in the batch lane: {type(exc).__name__}: {exc}")

    def _launch(self, index: int, client: ProviderClient) -> None:
        number = self._next_number(index)
        self._round_attempts[index] = self._round_attempts.get(index, 0) + 1
        self._emit(AttemptStarted(index, number, client.name))
        started_at = time.time()
        task = asyncio.create_task(self._attempt(index, number, client), name=f"attempt-{index}-{number}")
        task.add_done_callback(lambda done: self._attempt_done(done, index, number, client.name, started_at))
        self._in_flight[index] = task

    def _attempt_done(
        self, task: asyncio.Task[None], index: int, number: int, endpoint: str, started_at: float
    ) -> None:
        """An attempt's coroutine handles its own outcome and leaves `_in_flight` when it ends.

        Two things it cannot handle: being cancelled before its first step (an abort right after
        dispatch: the coroutine body never runs, so its cleanup is done here: no call went out),
        and raising (a bug, which must stop the run loudly rather than leave a task in limbo)."""
        if self._in_flight.get(index) is task:
            self._leave_flight(index)
            self.ledger.settle((index, number), None)  # nothing went out
            self._leave_unfinished(index, [Attempt(index, number, endpoint, started_at, 0.0, "cancelled")])
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("attempt %s crashed", task.get_name(), exc_info=exc)
        self.fail_run(f"internal error in {task.get_name()}: {type(exc).__name__}: {exc}")

    async def _attempt(self, index: int, number: int, client: ProviderClient) -> None:
        """Run one task's attempt to its outcome. A call past the tail deadlines (`deadlines.py`)
        gets a backup (`--hedge`, when the hedge budget allows) or is abandoned and sent again."""
        calls = [self._start_call(index, number, client)]
        hedged = False
        try:
            while True:
                running = [c.task for c in calls if not c.task.done()]
                wait_s = self._tail_check_s(calls[0], hedged)
                done, _ = await asyncio.wait(running, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    action = self._tail_action(calls, hedged)
                    if action == "hedge":
                        hedged = True  # one backup at most; none when the budget cannot hold its worst case
                        backup = self._route()
                        number = self._attempt_numbers.get(index, 0) + 1
                        if self._reserve(index, number, self._request_body(index, backup), backup.name, stop=False):
                            calls.append(self._start_call(index, self._next_number(index), backup, hedge=True))
                    elif action is not None:
                        self._abandon(index, calls, action)
                        return
                    continue
                # a success wins over a failure that ended in the same instant
                finished = next(
                    (c for c in calls if c.task in done and c.task.exception() is None),
                    next(c for c in calls if c.task in done),
                )
                others = [c for c in calls if c is not finished and not c.task.done()]
                failure = finished.task.exception()
                error = None if failure is None else finished.client.classify(failure)
                self._observe_endpoint(finished.client, error)
                if error is None:
                    for loser in (c for c in calls if c is not finished):
                        self._end_loser(loser)
                    self._learn(finished.task.result().rate_headers, finished)
                    self._on_success(index, finished, finished.task.result())
                    return
                if others:  # a sibling is still running: this one's failure is not the task's
                    self._end_side_attempt(finished, "hedge_failed", error)
                    calls = others
                    continue
                for sibling in calls:  # both failed in the same instant: the other one is journaled too
                    if (
                        sibling is not finished
                        and not sibling.task.cancelled()
                        and (sibling_failure := sibling.task.exception()) is not None
                    ):
                        self._end_side_attempt(sibling, "hedge_failed", sibling.client.classify(sibling_failure))
                self._on_failure(
                    index,
                    finished.number,
                    finished.started_at,
                    finished.latency_ms(),
                    error,
                    endpoint=finished.client.name,
                )
                return
        except (asyncio.CancelledError, JournalWriteError):  # abort, or a journal that cannot keep the outcome:
            for call in calls:  # every call of this task stops, the task stays unfinished
                call.task.cancel()
            self._leave_unfinished(index, [self._cut(c, "cancelled") for c in calls])
        finally:
            self._leave_flight(index)

    def _leave_flight(self, index: int) -> None:
        """An attempt is over, whatever its outcome: its slot and reservations go back (its calls'
        budget reservations were settled as each call's record was made)."""
        del self._in_flight[index]
        self._reserved_tokens.pop(index, None)
        self.admission.release()
        self._wake.set()

    def _leave_unfinished(self, index: int, attempts: list[Attempt]) -> None:
        """A task stopped mid-attempt (abort, a journal that cannot keep its outcome): its calls
        are journaled as cancelled (when the journal can), and it waits for the next run() or resume."""
        events: list[EngineEvent] = [
            *(AttemptEnded(extra) for extra in attempts[1:]),
            TaskCancelled(index, attempts[0]),
        ]
        if index not in self._held:
            self._ready.append(index)
        self._commit(self.journal.record_cancelled, [index], attempts, events=events, quiet=True)

    def _request_body(self, index: int, client: ProviderClient) -> dict[str, Any]:
        """What a task's call sends to `client`: its body, with the job's tools offered to every
        agent and the model renamed for a fallback that names it differently."""
        body = self.tasks[index].body
        if self.toolbox is not None and "tools" not in body:
            body = {**body, "tools": self.toolbox.openai_tools()}
        if client is not self.client and client.profile.model:
            body = {**body, "model": client.profile.model}
        return body

    def _start_call(self, index: int, number: int, client: ProviderClient, *, hedge: bool = False) -> _Call:
        body = self._request_body(index, client)
        if hedge:
            self._hedges_sent += 1
            self.rate_limits.take(self._token_estimate(index))
            self._emit(AttemptStarted(index, number, client.name, hedge=True))

        deadlines = self._deadlines
        if self.settings.stream:
            first_token_s = self.tail.first_token_s()
            if first_token_s is not None and (
                deadlines.first_token_s is None or first_token_s < deadlines.first_token_s
            ):
                deadlines = StreamDeadlines(first_token_s, deadlines.idle_s)

        async def call() -> CallResult:
            async with stalls.deadline(self.settings.timeout_s):
                return await client.complete(
                    body, stream=self.settings.stream, deadlines=deadlines, bounded_by_caller=True
                )

        self._sends += 1
        stalls = self.stalls
        return _Call(
            index,
            number,
            client,
            time.time(),
            stalls.now(),
            asyncio.create_task(call(), name=f"call-{index}-{number}"),
            body,
            stalls.now,
            self._sends,
        )

    def _next_number(self, index: int) -> int:
        self._attempt_numbers[index] = self._attempt_numbers.get(index, 0) + 1
        return self._attempt_numbers[index]

    def _tail_check_s(self, first: _Call, hedged: bool) -> float | None:
        """How long an attempt waits before it looks at its tail deadlines again."""
        if self.settings.stream:  # a streamed call's deadlines are its first token and idle gaps
            return None
        elapsed = self.stalls.now() - first.t0
        tail = self.tail
        hedge_s = None if hedged else tail.hedge_s(first.ceiling, first.work)
        due = [d for d in (tail.straggler_s(first.ceiling, first.work), hedge_s) if d is not None]
        if not due:
            return RECHECK_S  # no figures yet: a call that hangs now is judged once answers arrive
        return max(0.0, min(min(due) - elapsed, RECHECK_S * 2))

    def _tail_action(self, calls: list[_Call], hedged: bool) -> str | None:
        """'hedge', an abandon reason, or None (nothing due yet)."""
        first, newest = calls[0], calls[-1]
        now = self.stalls.now()
        elapsed = now - newest.t0  # the newest call: a backup gets its own time
        hedge_s = None if hedged else self.tail.hedge_s(first.ceiling, first.work)
        if hedge_s is not None and now - first.t0 >= hedge_s:
            if self._may_hedge():
                return "hedge"
            return (
                f"no answer after {hedge_s:.1f}s (--hedge: {self.settings.hedge_factor:g} x what a call allowed "
                f"{first.ceiling:,} tokens takes here); no backup while the provider pushes back or the hedge "
                f"budget is spent: abandoned and sent again"
            )
        straggler_s = self.tail.straggler_s(newest.ceiling, newest.work)
        if straggler_s is not None and elapsed >= straggler_s:
            return (
                f"straggler: no answer after {elapsed:.1f}s, past its deadline {straggler_s:.1f}s "
                f"({self.tail.straggler_factor:g} x what a call allowed {newest.ceiling:,} tokens takes at "
                f"{newest.client.name}); abandoned and sent again"
            )
        return None

    def _abandon(self, index: int, calls: list[_Call], reason: str) -> None:
        """Cancel a straggling attempt's calls and send the task again at once. Not a failure of
        the endpoint (no failover counts it) nor congestion: a timeout of the engine's own, whose
        calls may have been billed (their input at least, estimated)."""
        self.tail.abandoned += 1
        error = CallError(ErrorClass.TIMEOUT, reason, code=STRAGGLER_CODE)
        main = calls[0]
        for call in calls:
            call.task.cancel()
            if call is not main:
                self._end_side_attempt(call, "hedge_failed", error)
        self._on_failure(
            index, main.number, main.started_at, main.latency_ms(), error, endpoint=main.client.name, cut=main
        )

    def _may_hedge(self) -> bool:
        """Backups stay under 5% of requests and are never sent while the provider is pushing back
        (the straggler is then abandoned and sent again instead: one request either way)."""
        if self._hedges_sent + 1 > HEDGE_MAX_SHARE * max(self.stats.sent, 1):
            return False
        if self.admission.gate_remaining_s > 0 or self._stop_reason is not None:
            return False
        return time.monotonic() - self._last_rate_limited > HEDGE_QUIET_AFTER_429_S

    def _end_loser(self, call: _Call) -> None:
        """The other call of a hedged pair whose winner succeeded: cancelled if still running (and
        billed by estimate: it went out); if it had finished too, what it cost is journaled all the same."""
        if not call.task.done():
            call.task.cancel()
            self._commit_side(self._cut(call, "hedge_lost"))
        elif call.task.cancelled() or call.task.exception() is not None:
            return  # its failure was journaled when it happened (hedge_failed)
        else:
            result = call.task.result()
            usage, cost, estimated = self._billed(result, call.body, call.client.name)
            self.ledger.settle((call.index, call.number), cost)
            attempt = Attempt(
                call.index,
                call.number,
                call.client.name,
                call.started_at,
                call.latency_ms(),
                "hedge_lost",
                status=200,
                usage=usage,
                cost_usd=cost,
                estimated=estimated,
            )
            self._commit_side(attempt)

    def _end_side_attempt(self, call: _Call, outcome: str, error: CallError) -> None:
        """A hedged pair's other call that failed (or was cut with its sibling): journaled and
        billed (cut: its input, estimated), but the task's state is not its to decide."""
        attempt = self._cut(call, outcome) if not call.task.done() or call.task.cancelled() else None
        if attempt is None:
            self.ledger.settle((call.index, call.number), None)
            attempt = Attempt(
                call.index,
                call.number,
                call.client.name,
                call.started_at,
                call.latency_ms(),
                outcome,
                status=error.status,
            )
        self._commit_side(dataclasses.replace(attempt, error=error, status=error.status))

    def _commit_side(self, attempt: Attempt) -> None:
        ended = AttemptEnded(attempt)
        self._commit(self.journal.record_attempt, attempt, events=[ended])

    def _cut(self, call: _Call, outcome: str) -> Attempt:
        """The record of a call cut after it went out (abandoned, cancelled, a lost hedge)."""
        return self._cut_attempt(
            call.index, call.number, call.client.name, call.started_at, call.t0, call.body, outcome
        )

    def _cut_attempt(
        self, index: int, number: int, endpoint: str, started_at: float, t0: float, body: dict, outcome: str
    ) -> Attempt:
        """A call cut after it went out may have been billed all the same: its input at least is
        counted (estimated) in the totals and the budget, marked as an estimate."""
        usage = Usage(prompt=_prompt_estimate(body))
        price = self._prices.get(endpoint)
        cost = price.cost(usage) if price else None
        self.ledger.settle((index, number), cost)
        return Attempt(
            index, number, endpoint, started_at, _ms_since(t0), outcome, usage=usage, cost_usd=cost, estimated=True
        )

    def _on_success(self, index: int, call: _Call, result: CallResult) -> None:
        number, started_at, latency_ms, endpoint = call.number, call.started_at, call.latency_ms(), call.client.name
        asks_for_tools = self.toolbox is not None and bool(_answer_message(result).get("tool_calls"))
        finish_reason = _finish_reason(result)
        if not asks_for_tools and finish_reason == "length" and _cut_before_any_content(result):
            self._on_empty_answer(index, call, result)
            return
        problem = self.validator(self.tasks[index], result) if self.validator and not asks_for_tools else None
        if problem is not None:
            self._on_invalid_answer(index, number, started_at, latency_ms, result, endpoint, problem)
            return
        self._refusals.clear()
        self.rate_limits.settle(self._reserved_tokens.pop(index, 0), result.usage.total)
        self._announce_limits(self.rate_limits.note_answer())
        self.tail.observe(
            latency_ms / 1000,
            None if result.ttft_ms is None else result.ttft_ms / 1000,
            tokens=result.usage.completion,
            ceiling=call.ceiling,
            work=call.work,
        )
        if self.adaptive is not None:
            self.adaptive.observe_latency(latency_ms / 1000)
            busy = self.admission.in_flight >= self.admission.limit or bool(self._ready)  # work is waiting
            grown = self.adaptive.on_success(busy)
            if grown is not None:
                self._adapt(grown, "slow start: +1" if self.adaptive.slow_start else "clean and busy: +1")
        if asks_for_tools:
            self._on_tool_request(index, number, started_at, latency_ms, result, endpoint)
            return
        attempt = self._answered(index, number, endpoint, started_at, latency_ms, result, "ok")
        succeeded = TaskSucceeded(attempt, result.content)
        answer = result.raw if result.raw is not None else result.body  # kept as received
        self._commit_soon(self.journal.record_success, attempt, answer, events=[succeeded])

    # ----------------------------------------------------------------- multi-step agents

    def _on_tool_request(
        self, index: int, number: int, started_at: float, latency_ms: float, result: CallResult, endpoint: str
    ) -> None:
        """A model call asked for tools: journal it and the transcript that now holds it (so it is
        never sent again), then run its tool calls; the agent calls the model again after them.
        Past `max_steps` the agent fails as `max_steps`, its transcript kept."""
        assert self.toolbox is not None
        task = self.tasks[index]
        messages = list(task.body.get("messages", []))
        step = steps_taken(messages) + 1
        attempt = self._answered(index, number, endpoint, started_at, latency_ms, result, "step")
        if step > self.toolbox.max_steps:
            error = CallError(
                ErrorClass.BAD_RESPONSE,
                f"the agent still asked for tools after {self.toolbox.max_steps} steps (max_steps)",
                200,
                MAX_STEPS_CODE,
                request_id=result.request_id,
            )
            failed = TaskFailed(dataclasses.replace(attempt, outcome="failed", error=error))
            self._commit(self.journal.record_failure, failed.attempt, events=[failed])
            self._check_failure_rate()
            return
        asked = assistant_message(_answer_message(result))
        body = {**task.body, "messages": [*messages, asked]}
        stepped = AgentStepped(attempt, step, tuple(c["function"]["name"] for c in asked["tool_calls"]))
        self.tasks[index] = Task(task.index, task.custom_id, body)
        self._round_attempts.pop(index, None)  # each step's model call has its own retries
        self._commit(self.journal.record_step, attempt, body, events=[stepped])
        self._start_tools(index, step)

    def _start_tools(self, index: int, step: int) -> None:
        task = asyncio.create_task(self._run_tools(index, step), name=f"tools-{index}-{step}")
        task.add_done_callback(lambda done: self._tools_done(done, index))
        self._tool_runs[index] = task

    def _tools_done(self, task: asyncio.Task[None], index: int) -> None:
        """A step's tool calls are over, however (also when cancelled before they began, when the
        coroutine never runs): the agent goes back ahead of the queue for its next model call,
        or, cancelled by the user, waits unfinished with the tool results it has."""
        if self._tool_runs.get(index) is task:
            del self._tool_runs[index]
            if index in self._held:
                self._cancel_now(index)
            else:
                self._ready.appendleft(index)  # its next model call (or, after a stop, it waits unfinished)
            self._wake.set()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("tool run %s crashed", task.get_name(), exc_info=exc)
            self.fail_run(f"internal error in {task.get_name()}: {type(exc).__name__}: {exc}")

    async def _run_tools(self, index: int, step: int) -> None:
        """The tool calls of one step, in parallel; each result is journaled (with the transcript
        that carries it) as it arrives. What follows is `_tools_done`'s."""
        assert self.toolbox is not None
        toolbox = self.toolbox

        async def run_one(call: dict[str, Any]) -> None:
            function = call.get("function") or {}
            outcome = await toolbox.call(function.get("name", ""), function.get("arguments") or "{}")
            task = self.tasks[index]
            body = {**task.body, "messages": [*task.body["messages"], tool_message(call["id"], outcome.text)]}
            ended = ToolCallEnded(index, step, call["id"], function.get("name", ""), outcome.ok, outcome.latency_ms)
            self.tasks[index] = Task(task.index, task.custom_id, body)
            self._commit(
                self.journal.record_tool_call,
                *(index, step, call, outcome.text, outcome.ok, outcome.latency_ms, body),
                events=[ended],
            )

        try:
            calls = pending_tool_calls(self.tasks[index].body.get("messages", []))
            await asyncio.gather(*(run_one(call) for call in calls))
        except JournalWriteError:
            pass  # the journal told the engine, which is stopping the run; the agent stays unfinished

    def _owes_tool_calls(self, index: int) -> bool:
        """An agent stopped between a step's model call and the end of its tool calls (a crash, an
        abort, `x`): exactly the tool calls its transcript still owes run before the model is asked."""
        return self.toolbox is not None and bool(pending_tool_calls(self.tasks[index].body.get("messages", [])))

    def _on_invalid_answer(
        self,
        index: int,
        number: int,
        started_at: float,
        latency_ms: float,
        result: CallResult,
        endpoint: str,
        problem: str,
    ) -> None:
        """An answer that fails validation: asked once more with the problem, then a failure that
        keeps the raw text (the answer was billed either way)."""
        raw = result.content
        reask = index not in self._reasked and self._stop_reason is None
        error = CallError(
            ErrorClass.BAD_RESPONSE,
            f"{problem}; raw answer: {raw[:2000]}",
            200,
            "invalid_json",
            request_id=result.request_id,
        )
        attempt = self._answered(
            index, number, endpoint, started_at, latency_ms, result, "retry" if reask else "failed"
        )
        attempt = dataclasses.replace(attempt, error=error)
        if not reask:
            failed = TaskFailed(attempt)
            self._commit(self.journal.record_failure, attempt, events=[failed])
            self._check_failure_rate()
            return
        self._reasked.add(index)
        attempt = dataclasses.replace(attempt, retry_in_s=0.0)
        task = self.tasks[index]
        messages = [
            *task.body.get("messages", []),
            {"role": "assistant", "content": raw},
            {
                "role": "user",
                "content": f"That answer could not be used: {problem}. "
                "Answer again with valid JSON only, nothing else.",
            },
        ]
        self.tasks[index] = Task(task.index, task.custom_id, {**task.body, "messages": messages})
        retrying = TaskRetrying(attempt, 0.0)
        self._commit(self.journal.record_retry, attempt, events=[retrying])
        self._retry_timers[index] = asyncio.get_running_loop().call_later(0, self._requeue, index)

    def _on_failure(
        self,
        index: int,
        number: int,
        started_at: float,
        latency_ms: float,
        error: CallError,
        *,
        endpoint: str,
        cut: _Call | None = None,
    ) -> None:
        """A failed attempt: journaled, then retried (after its backoff) or the task's end.
        `cut`: the call was abandoned by the engine itself (a straggler), not failed by the
        endpoint: no congestion, and billed by estimate (it went out)."""
        error = self._capped(error)
        self._reserved_tokens.pop(index, None)  # a refused request used no tokens, but keep them: pace down
        self._learn(error.rate_headers)
        if error.is_rate_limit:
            self._last_rate_limited = time.monotonic()
            self._announce_limits(self.rate_limits.on_rate_limited(sent_at=time.monotonic() - latency_ms / 1000))
        if self.adaptive is not None and cut is None:
            self._adapt_to_failure(error)
        decision = self.retry_policy.after_failure(
            error,
            self._round_attempts.get(index, 1),
            stopping=self._stop_reason is not None,
            trimmed=self._trim_once(index, error),
            can_fail_over=self.fallback is not None and endpoint == self.client.name,
        )
        retry = decision.next is not Next.GIVE_UP
        outcome = "retry" if retry else "failed"
        if cut is not None:
            attempt = dataclasses.replace(self._cut(cut, outcome), latency_ms=latency_ms)
        else:
            self.ledger.settle((index, number), None)
            attempt = Attempt(index, number, endpoint, started_at, latency_ms, outcome)
        attempt = dataclasses.replace(attempt, status=error.status, error=error, request_id=error.request_id)
        if not retry:
            failed = TaskFailed(attempt)
            self._commit(self.journal.record_failure, attempt, events=[failed])
            self._check_failure_rate()
            self._check_refusals(error)
            return
        delay = decision.delay_s
        attempt = dataclasses.replace(attempt, retry_in_s=round(delay, 3))
        if error.is_rate_limit and error.retry_after_s and self.admission.close_gate(error.retry_after_s):
            self.last_retry_after_asked_s = error.retry_after_asked_s
            self._emit(RateGateClosed(error.retry_after_s, asked_s=error.retry_after_asked_s))
        retrying = TaskRetrying(attempt, delay)
        self._commit(self.journal.record_retry, attempt, events=[retrying])
        self._retry_timers[index] = asyncio.get_running_loop().call_later(delay, self._requeue, index)

    def _check_refusals(self, error: CallError) -> None:
        """The provider refuses calls for good (a key it does not take, a model it does not have,
        an empty account): after a few in a row, with no answer between, stop dispatch saying
        why, instead of sending every other task to the same refusal."""
        if error.kind not in REFUSALS:
            return
        self._refusals.append(error)
        if len(self._refusals) >= REFUSALS_TO_STOP:
            status = f" {error.status}" if error.status else ""
            code = f" {error.code}" if error.code else ""
            self.stop_dispatch(
                f"the provider refused {len(self._refusals)} calls in a row ({error.kind}{status}{code}: "
                f"{error.message[:160]}): nothing more is sent; check the key, the model name and the base "
                f"URL, then `swarm-tui resume` the run"
            )

    def _trim_once(self, index: int, error: CallError) -> bool:
        """Context length exceeded: never retried as is, but shortened once when a trimmer can."""
        if error.kind is not ErrorClass.CONTEXT_LENGTH or self.trimmer is None or index in self._trimmed:
            return False
        shorter = self.trimmer(self.tasks[index])
        if shorter is None:
            return False
        self._trimmed.add(index)
        self.tasks[index] = shorter
        self._log("trimmed", {"index": index, "custom_id": shorter.custom_id})
        return True

    def _adapt_to_failure(self, error: CallError) -> None:
        """A rate limit backs the limit off; overload does when sustained; other failures (a 500,
        a 502, a lone hung call among fast answers) leave it alone: they say nothing about load."""
        assert self.adaptive is not None
        if error.is_rate_limited:
            shrunk = self.adaptive.on_congestion()
        elif error.is_overload or (
            error.kind is ErrorClass.TIMEOUT and error.code != STRAGGLER_CODE and self._latency_congested()
        ):
            shrunk = self.adaptive.on_overload()
        else:
            self.adaptive.on_other_failure()
            return
        if shrunk is not None:
            self._adapt(shrunk, f"{error.kind}{f' {error.status}' if error.status else ''}: decrease")

    def _latency_congested(self) -> bool:
        """A timeout is congestion only when answers have been slowing down overall: shrinking the
        limit for a lone hung call would leave the slots to the hung calls."""
        p50 = self.stats.percentile(0.5)
        return p50 is None or p50 / 1000 > CONGESTED_LATENCY_SHARE * self.settings.timeout_s

    @property
    def spent_usd(self) -> float:
        """The run's one spend ledger: what the journal held when this session started (earlier
        sessions of a resumed run) plus what this session has spent since."""
        return self.ledger.spent_usd

    def _open_ledger(self) -> None:
        spent = getattr(self.journal, "spent_usd", None)  # a shard's forwarding journal has no ledger
        self.ledger.open(spent() if spent is not None else 0.0)

    def _log(self, kind: str, data: dict | None = None) -> None:
        """A journal event that changes no task: when the journal cannot take it, the failure
        has already stopped the run (`_journal_failed`), so it is not raised again here."""
        self._journal_quietly(self.journal.log_event, kind, data)

    @staticmethod
    def _journal_quietly(write, *args) -> None:
        try:
            write(*args)
        except JournalWriteError:
            pass

    def _capped(self, error: CallError) -> CallError:
        """A Retry-After longer than `max_retry_after_s` (or not finite) is honoured up to it."""
        wait = error.retry_after_s
        cap = self.settings.max_retry_after_s
        if wait is None or wait <= cap:
            return error
        return dataclasses.replace(error, retry_after_s=cap, retry_after_asked_s=wait)

    def _learn(self, headers, call: _Call | None = None) -> None:
        """Limits and what is left of them, from a response's headers (`call`: the request they answer)."""
        sent_since = self._sends - call.send_seq if call is not None else 0
        self._announce_limits(self.rate_limits.learn(headers, sent_since=sent_since))

    def _announce_limits(self, learned) -> None:
        if learned is not None:
            self._emit(RateLimitsLearned(learned.rpm, learned.tpm, estimated=learned.estimated))

    def _adapt(self, limit: int, reason: str) -> None:
        self.admission.set_limit(limit)
        self._emit(ConcurrencyChanged(limit, reason))

    def _token_estimate(self, index: int) -> int:
        return self._token_estimate_of(self.tasks[index].body)

    def _token_estimate_of(self, body: dict) -> int:
        """TPM reservation: prompt estimate + the answer's ceiling (0 when no TPM limit is known)."""
        if self.rate_limits.tokens is None:
            return 0
        return _prompt_estimate(body) + _tpm_ceiling(body)

    def _requeue(self, index: int) -> None:
        """A backoff has ended: the task goes ahead of tasks never tried (its wait was its turn),
        and stays `retrying` until it is in flight again."""
        self._retry_timers.pop(index, None)
        self._ready.appendleft(index)
        self._wake.set()

    def _stop(self, reason: str) -> None:
        if self._stop_reason is not None:
            return
        self._stop_reason = reason
        self._emit(RunStopping(reason))
        self._wake.set()
        self.ledger.settled.set()  # a call waiting for the budget's room waits no more
        self.admission.close()
        if self.lane is not None:
            self.lane.wake()

    def _cancel_waiting(self) -> None:
        """After a stop: tasks queued or waiting out a backoff become unfinished (cancelled) work,
        kept in the queue for the next run() or a resume."""
        for timer in self._retry_timers.values():
            timer.cancel()
        waiting = sorted(set(self._retry_timers) | set(self._ready))
        self._retry_timers.clear()
        self._ready = deque(waiting)
        cancelled = [TaskCancelled(i) for i in waiting if self.states[i] is not TaskState.CANCELLED]
        if cancelled:
            self._commit(self.journal.record_cancelled, [e.index for e in cancelled], (), events=cancelled, quiet=True)

    def _answered(
        self,
        index: int,
        number: int,
        endpoint: str,
        started_at: float,
        latency_ms: float,
        result: CallResult,
        outcome: str,
        body: dict | None = None,
    ) -> Attempt:
        """The attempt record of a call the provider answered (200): billed as its usage says, or
        by estimate when it says nothing (`body`: what was sent; a task's own body by default)."""
        usage, cost, estimated = self._billed(result, body if body is not None else self.tasks[index].body, endpoint)
        self.ledger.settle((index, number), cost)
        return Attempt(
            index,
            number,
            endpoint,
            started_at,
            latency_ms,
            outcome,
            status=200,
            request_id=result.request_id,
            usage=usage,
            cost_usd=cost,
            ttft_ms=result.ttft_ms,
            estimated=estimated,
            finish_reason=_finish_reason(result),
        )

    def _billed(self, result: CallResult, body: dict, endpoint: str) -> tuple[Usage, float | None, bool]:
        """What an answered call is billed: its usage, or, when the provider sent none, an
        estimate (the prompt's tokens counted, the answer's from its text), marked as such."""
        usage, estimated = result.usage, False
        if usage.total == 0:
            usage, estimated = Usage(prompt=_prompt_estimate(body), completion=_answer_estimate(result)), True
        price = self._prices.get(endpoint)
        return usage, (price.cost(usage) if price else None), estimated

    def _reserve(self, index: int, number: int, body: dict, endpoint: str, *, stop: bool = True) -> bool:
        """Hold the worst case of call (index, number) against the budget (`ledger`); False when
        it would pass it. With nothing else in flight to wait for, dispatch is then stopped saying
        why (unless `stop` is False: a hedge that does not fit is simply not sent). Without a
        budget nothing is held."""
        ledger = self.ledger
        if ledger.budget_usd is None:
            return True
        price = self._prices.get(endpoint)
        usage = worst_usage(body, price.max_output) if price is not None else None
        worst = price.cost(usage) if price is not None and usage is not None else None
        if worst is not None and ledger.reserve((index, number), worst):
            return True
        if stop and (worst is None or not self._calls_out()):
            self.stop_dispatch(self._budget_refusal(worst, usage, endpoint))
        return False

    def _calls_out(self) -> bool:
        """Calls whose reservations will settle: task calls in flight, direct calls, the batch lane's."""
        return bool(self._in_flight) or self._direct_calls > 0 or self._lane_busy

    def _budget_refusal(self, worst: float | None, usage: Usage | None, endpoint: str) -> str:
        ledger = self.ledger
        if worst is None or usage is None:
            why = (
                "no price is known"
                if usage is not None or endpoint not in self._prices
                else "nothing bounds its answer"
            )
            return f"budget: the next call to {endpoint} cannot be bounded ({why}): nothing more is sent"
        return (
            f"budget: ${ledger.spent_usd:.4f} spent (this run, all sessions); the next call could cost up to "
            f"${worst:.4f} ({usage.completion:,} output tokens at most); budget ${ledger.budget_usd:.2f}: "
            f"nothing more is sent"
        )

    def _on_empty_answer(self, index: int, call: _Call, result: CallResult) -> None:
        """An answer cut at its token limit before any content (`finish_reason: length`, no text,
        no tool call: a reasoning model that spent its tokens thinking): billed, and a failure
        of its own that another attempt of the same body would repeat."""
        self.rate_limits.settle(self._reserved_tokens.pop(index, 0), result.usage.total)
        error = CallError(
            ErrorClass.BAD_RESPONSE,
            "the answer was cut at its token limit before any content (finish_reason length): raise max_tokens",
            200,
            TRUNCATED_CODE,
            request_id=result.request_id,
            should_retry=False,
        )
        attempt = self._answered(
            index, call.number, call.client.name, call.started_at, call.latency_ms(), result, "failed"
        )
        failed = TaskFailed(dataclasses.replace(attempt, error=error))
        self._commit(self.journal.record_failure, failed.attempt, events=[failed])
        self._check_failure_rate()

    def _route(self) -> ProviderClient:
        # a breaker exists exactly when there is a fallback
        if self.fallback is None or self.breaker is None or self.breaker.use_primary():
            return self.client
        return self.fallback

    def _observe_endpoint(self, client: ProviderClient, error: CallError | None) -> None:
        if self.breaker is None or self.fallback is None or client is not self.client:
            return
        was_primary = self.breaker.state == "closed"
        reason = self.breaker.on_primary_result(error)
        if reason is not None:
            target = self.client.name if self.breaker.state == "closed" else self.fallback.name
            self._log("failover", {"to": target, "reason": reason, "from_primary": was_primary})
            self._emit(EndpointSwitched(target, reason))


def _prompt_estimate(body: dict) -> int:
    """About 4 bytes of UTF-8 a token: the TPM reservation, and the bill of a call whose
    provider reported no usage (marked estimated)."""
    return len(json.dumps(body.get("messages", ()), ensure_ascii=False).encode()) // 4


def _answer_estimate(result: CallResult) -> int:
    """The tokens an answer wrote, from its text (reasoning and tool calls included), when the
    provider did not say: about 4 bytes of UTF-8 a token."""
    message = _answer_message(result)
    text = json.dumps(
        [message.get("content"), message.get("reasoning_content"), message.get("tool_calls")], ensure_ascii=False
    )
    return max(1, len(text.encode()) // 4)


def _finish_reason(result: CallResult) -> str | None:
    choices = result.body.get("choices") or [{}]
    reason = choices[0].get("finish_reason") if isinstance(choices[0], dict) else None
    return reason if isinstance(reason, str) else None


def _cut_before_any_content(result: CallResult) -> bool:
    """An answer cut at its token limit (`finish_reason: length`, checked by the caller) with neither
    text nor a tool call: nothing of it is usable."""
    message = _answer_message(result)
    return not message.get("content") and not message.get("tool_calls")


def _tpm_ceiling(body: dict) -> int:
    """The answer's ceiling a TPM limit charges: the body's, else what providers assume."""
    return answer_ceiling(body) or DEFAULT_MAX_TOKENS


def _ms_since(t0: float) -> float:
    """Milliseconds the process ran since `t0` (a `StallWatch.now()` of the running loop)."""
    return (StallWatch.of_running_loop().now() - t0) * 1000.0


@dataclass
class _Call:
    """One HTTP call in flight for a task (two when a backup was hedged)."""

    index: int
    number: int
    client: ProviderClient
    started_at: float
    t0: float
    task: asyncio.Task[CallResult]
    body: dict[str, Any]
    """What was sent."""
    clock: Callable[[], float]
    """The clock `t0` is on (the running loop's stall-aware `StallWatch.now`)."""
    send_seq: int = 0
    """The engine's count of requests sent, this one included: the ones sent after it are
    not in the rate-limit headers of its answer."""
    ceiling: int | None = field(init=False)
    """The most tokens it may write (its max_tokens); None when its body sets none."""
    work: str = field(init=False)
    """Its endpoint and model: what its deadlines are learned from."""

    def __post_init__(self) -> None:
        self.ceiling = answer_ceiling(self.body)
        self.work = f"{self.client.name} {self.body.get('model') or ''}"

    def latency_ms(self) -> float:
        return (self.clock() - self.t0) * 1000.0


def _answer_message(result: CallResult) -> dict[str, Any]:
    """The assistant message of a chat completion ({} when it has none)."""
    choices = result.body.get("choices") or [{}]
    return choices[0].get("message") or {}
