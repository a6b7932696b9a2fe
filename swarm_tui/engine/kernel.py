"""The kernel: the one home of a run's task lifecycle.

It alone owns the queue of tasks waiting to be sent, admission (the in-flight limit, the RPM/TPM
buckets, the Retry-After gate), the map of calls in flight, the steering (pause, abort, retry,
cancel, a new limit) and `run`. How an attempt is carried is a lane's business:

* the **live lane** (`live.LiveLane`) is the kernel's dispatcher: each task the kernel admits, it
  sends as a live call and follows to its outcome;
* other lanes (`core.ports.Lane`, registered in `lanes.py`: the cache and batch lanes) claim their
  tasks out of the queue when a run starts and carry them their own way;
* the **direct lane** (`direct.DirectLane`) carries the calls outside the task grid (planner,
  warm-up, aggregator, judge) through the same admission, budget and journal.

Every lane reports through the kernel's `LaneHost` side (its public methods below), so every
state change is journaled (one transaction) before any view hears of it.

Design that the numbers asked for:
* one dispatcher takes ready tasks in order and waits for admission, so thousands of queued
  tasks cost a deque entry each, not a coroutine each;
* a failed attempt that may be retried gives its slot back at once and comes back after its
  backoff via `loop.call_later`; a 429's Retry-After also closes the provider-wide gate;
* pause stops dispatch (calls in flight finish); abort stops it and cancels them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import (
    ConcurrencyChanged,
    PhaseChanged,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    TaskCancelled,
    TaskQueued,
    TasksAdded,
    TaskState,
)
from swarm_tui.core.ports import Capability, Lane
from swarm_tui.core.stalls import StallWatch
from swarm_tui.core.task import RunTasks, Task, by_index
from swarm_tui.engine.calls import prompt_estimate
from swarm_tui.engine.host import KernelSide
from swarm_tui.engine.ledger import SpendLedger, answer_ceiling
from swarm_tui.engine.observable import Listener
from swarm_tui.engine.pacing.admission import AdmissionController
from swarm_tui.engine.pacing.limits import AdaptiveConcurrency, RateLimits
from swarm_tui.engine.pacing.retry import RetryPolicy
from swarm_tui.engine.settings import DEFAULT_MAX_TOKENS, EngineSettings
from swarm_tui.engine.stats import RunStats

if TYPE_CHECKING:
    from swarm_tui.core.ports import JournalSink

log = logging.getLogger(__name__)


class Dispatcher(Protocol):
    """The lane the kernel hands each admitted task to (the live lane)."""

    def resumes_itself(self, index: int) -> bool:
        """The task goes on by itself, without a call now (an agent that owes tool calls)."""

    def dispatch(self, index: int, tokens: int) -> bool:
        """Send the task's next attempt (its slot and `tokens` of TPM are taken); False when the
        budget had no room for its worst case (the kernel gives the slot back and waits)."""

    def cancel_all(self) -> None:
        """An abort: every call in flight and every tool run stops."""

    async def settle(self) -> None:
        """The run is ending: wait for what is still under way (calls, tool runs) to end."""


class Kernel(KernelSide):
    """Queue, admission, calls in flight, steering and `run` of one swarm (see the module doc)."""

    capabilities: frozenset[Capability] = frozenset()

    def __init__(
        self,
        tasks: RunTasks,
        journal: JournalSink,
        settings: EngineSettings,
        *,
        states: dict[int, TaskState] | None = None,
        attempts_made: dict[int, int] | None = None,
        admission: AdmissionController | None = None,
        simulated: bool = False,
        endpoint: str = "",
    ) -> None:
        """`admission`: an admission controller to use instead of a private one (its `rate_limits`
        become the engine's); a distributed run injects one whose RPM/TPM budget and Retry-After
        gate are shared by every engine of the swarm (`swarm_tui.distributed`). `endpoint`: the
        name the run announces (its primary's)."""
        self.tasks = by_index(tasks)
        self.journal = journal
        self.settings = settings
        self.simulated = simulated
        self.endpoint = endpoint
        self.retry_policy = RetryPolicy(max_attempts=settings.guards.max_attempts)
        if admission is None:
            self.rate_limits = RateLimits(settings.pacing.rpm, settings.pacing.tpm)
            self.admission = AdmissionController(settings.pacing.concurrency, rate_limits=self.rate_limits)
        else:
            self.admission = admission
            self.rate_limits = admission.rate_limits
        self.adaptive = AdaptiveConcurrency(settings.pacing.concurrency) if settings.pacing.adaptive else None
        if self.adaptive is not None:
            self.admission.set_limit(self.adaptive.limit)
        self.ledger = SpendLedger(settings.guards.budget_usd)
        """The run's one spend ledger (spent, every session, and the worst cases of calls in flight)."""
        self.stats = RunStats()
        self.board = TaskBoard.of(self.tasks, states)
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
        """Tasks whose attempt is on the wire (each holds a slot)."""
        self._working: dict[int, asyncio.Task[None]] = {}
        """Tasks busy without a call (an agent's tool calls): no slot held."""
        self._held: set[int] = set()
        """Tasks the user cancelled (`x`): they wait, unfinished, until retried or the run resumed."""
        self._reserved_tokens: dict[int, int] = {}
        self._wake = asyncio.Event()
        self._running = False
        self._stop_reason: str | None = None
        self._aborted = False
        self._fatal: str | None = None
        """Why the run cannot go on (the journal cannot be written, an internal error)."""
        self._stalls: StallWatch | None = None
        self._stalls_loop: asyncio.AbstractEventLoop | None = None
        self.direct_calls = 0
        """Direct calls (planner, aggregator, judge) on the wire now."""
        self.dispatcher: Dispatcher | None = None
        self.lanes: list[Lane] = []
        """The lanes besides the live one (`lanes.py` registers them)."""
        self._lane_runs: list[asyncio.Task[None]] = []
        on_write_failure = getattr(journal, "on_write_failure", None)  # a shard's forwarding journal has none
        if on_write_failure is not None:
            on_write_failure(self._journal_failed)
        for index in sorted(self.states):  # the board's own keys: a million ints made once, not twice
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
        """Stop dispatch and cancel every call in flight; the journal stays resumable. What other
        lanes carry is cancelled too (a batch's completed lines are kept), unless `leave_batches`
        (a quit: open batches run on at the provider, and `resume` collects them)."""
        if self._aborted:
            return
        self._aborted = True
        self._stop(reason)
        if self.dispatcher is not None:
            self.dispatcher.cancel_all()
        for lane in self.lanes:
            lane.abort(leave_open=leave_batches)

    def stop_dispatch(self, reason: str) -> None:
        """Send nothing new; let the calls in flight finish (budget and error-rate guards)."""
        self._stop(reason)

    def fail_run(self, reason: str) -> None:
        """The run cannot go on (its journal cannot be written): stop dispatch and cancel every
        call in flight at once, so that no more answers are paid for than can be kept. The run
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

    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]:
        """Queue finally-failed tasks again, with a fresh attempt budget; named ones the user
        cancelled too (an agent goes on from its last completed step). Returns what was queued.
        While the engine runs they are picked up at once; otherwise the caller runs it again."""
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
            running = self._in_flight.get(index) or self._working.get(index)
            if running is not None:
                running.cancel()  # its own cleanup journals the cancellation and says so
                continue
            timer = self._retry_timers.pop(index, None)
            if timer is not None:
                timer.cancel()
            if index in self._ready:
                self._ready.remove(index)
            self.cancel_now(index)
        self._wake.set()
        return chosen

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

    def note_congestion(self, reason: str) -> None:
        """Congestion the provider showed to someone else sharing its budget (another shard of a
        distributed swarm): back the adaptive limit off as for a 429 of our own."""
        if self.adaptive is not None:
            shrunk = self.adaptive.on_congestion()
            if shrunk is not None:
                self.adapt(shrunk, reason)

    def ceiling_now(self) -> int | None:
        """The adaptive limit's ceiling (None: the limit is fixed)."""
        return self.adaptive.ceiling if self.adaptive is not None else None

    def announce_endpoints(self) -> None:
        """What a run's endpoints say at its start (a routed engine's doors, `routing.Endpoints`)."""

    def announce_phase(self, phase: str, detail: str = "") -> None:
        self._emit(PhaseChanged(phase, detail))

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
        spent = getattr(self.journal, "spent_usd", None)  # a shard's forwarding journal has no ledger
        self.ledger.open(spent() if spent is not None else 0.0)
        pending = len(self._ready)
        ready = list(self._ready)
        for lane in self.lanes:  # each lane takes its tasks out of the live queue (those in open batches for good)
            ready = lane.claim(ready)
        self._ready = deque(ready)
        ceiling = self.ceiling_now()
        self._emit(RunStarted(len(self.tasks), pending, self.admission.limit, self.endpoint, self.simulated, ceiling))
        for index in [*self._ready, *(i for lane in self.lanes for i in lane.waiting)]:
            previous = self.states[index]
            if previous is not TaskState.QUEUED:  # left unfinished by an earlier stop (or process)
                self._emit(TaskQueued(index, previous))
        if self.rate_limits.rpm or self.rate_limits.tpm:
            self._emit(RateLimitsLearned(self.rate_limits.rpm, self.rate_limits.tpm))
        self.announce_endpoints()
        self._lane_runs = [asyncio.create_task(lane.run(), name=f"lane-{lane.name}") for lane in self.lanes]
        for lane_run in self._lane_runs:
            lane_run.add_done_callback(self._lane_done)
        try:
            await self._dispatch()
        finally:
            if self._lane_runs:
                await asyncio.gather(*self._lane_runs, return_exceptions=True)
                self._lane_runs = []
            if self.dispatcher is not None:
                await self.dispatcher.settle()
            self._running = False
        self._flush_outbox()  # the last answers (group commit) count in the outcome
        if self._stop_reason is not None:
            self._cancel_waiting()
        finished = self.outcome()
        self._emit(finished)
        self._flush_outbox()  # the run's last word is on disk and out before run() returns
        return finished

    async def _dispatch(self) -> None:
        dispatcher = self.dispatcher
        assert dispatcher is not None, "an engine runs with its live lane"
        while self._stop_reason is None:
            index = await self._next_ready()
            if index is None:
                return
            if dispatcher.resumes_itself(index):
                continue
            tokens = self._token_estimate(index)
            if not await self.admission.acquire(tokens):
                if index not in self._held:
                    self._ready.appendleft(index)
                return
            if index in self._held:  # the user cancelled it (`x`) while it waited for a slot
                self.admission.release()
                continue
            if not dispatcher.dispatch(index, tokens):
                self.admission.release()
                self._ready.appendleft(index)
                if self._stop_reason is not None:  # the budget is spent
                    return
                await self.ledger.room()  # it fits once calls in flight settle

    async def _next_ready(self) -> int | None:
        while self._stop_reason is None:
            if self._ready:
                return self._ready.popleft()
            if not self._in_flight and not self._retry_timers and not self._working and not self.lanes_busy:
                return None
            self._wake.clear()
            await self._wake.wait()
        return None

    @property
    def lanes_busy(self) -> bool:
        """A lane still carries or follows work (a batch's lines may come back to be run live)."""
        return any(not lane_run.done() for lane_run in self._lane_runs)

    def calls_out(self) -> bool:
        """Calls whose reservations will settle: task calls in flight, direct calls, other lanes'."""
        return bool(self._in_flight) or self.direct_calls > 0 or self.lanes_busy

    def _lane_done(self, task: asyncio.Task[None]) -> None:
        self._wake.set()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("the lane %s crashed", task.get_name(), exc_info=exc)
            self.fail_run(f"internal error in the {task.get_name()}: {type(exc).__name__}: {exc}")

    def _token_estimate(self, index: int) -> int:
        if not self.admission.paces_tokens:  # no body to read (from the journal) for nothing
            return 0
        return self.token_estimate_of(self.tasks[index].body)

    def token_estimate_of(self, body: dict) -> int:
        """TPM reservation: prompt estimate + the answer's ceiling (0 when no TPM limit is known)."""
        if not self.admission.paces_tokens:
            return 0
        return prompt_estimate(body) + (answer_ceiling(body) or DEFAULT_MAX_TOKENS)

    def _stop(self, reason: str) -> None:
        if self._stop_reason is not None:
            return
        self._stop_reason = reason
        self._emit(RunStopping(reason))
        self._wake.set()
        self.ledger.settled.set()  # a call waiting for the budget's room waits no more
        self.admission.close()
        for lane in self.lanes:
            lane.wake()

    def _cancel_waiting(self) -> None:
        """After a stop: tasks waiting out a backoff (or queued again after one) become unfinished
        (cancelled) work, kept in the queue for the next run() or a resume. A task never started
        stays queued, as it is on disk: unfinished already, so a stop costs nothing per task it
        never sent (a million-task job stopped early wrote a million events, for minutes)."""
        for timer in self._retry_timers.values():
            timer.cancel()
        retrying = set(self._retry_timers)  # a few; the queue may hold a million: no set of it
        self._retry_timers.clear()
        waiting = sorted([*retrying, *(i for i in self._ready if i not in retrying)])
        self._ready = deque(waiting)
        cancelled = [TaskCancelled(i) for i in waiting if not self.states[i].kept_by_a_stop]
        if cancelled:
            self._commit(self.journal.record_cancelled, [e.index for e in cancelled], (), events=cancelled, quiet=True)

    def _journal_failed(self, error: JournalWriteError) -> None:
        in_flight = len(self._in_flight)
        self.fail_run(
            f"journal write failed, nothing more was sent: {error.cause}"
            + (f"; {in_flight} call{'s' if in_flight != 1 else ''} in flight cancelled" if in_flight else "")
        )

    # ----------------------------------------------------------------- read-outs

    @property
    def spent_usd(self) -> float:
        """The run's one spend ledger: what the journal held when this session started (earlier
        sessions of a resumed run) plus what this session has spent since."""
        return self.ledger.spent_usd

    @property
    def stalls(self) -> StallWatch:
        """The running loop's watch of the time the process did not run (SIGSTOP and the like):
        kept off every deadline and latency (looked up once per loop the engine runs in)."""
        loop = asyncio.get_running_loop()
        if self._stalls is None or self._stalls_loop is not loop:
            self._stalls, self._stalls_loop = StallWatch.of_running_loop(), loop
        return self._stalls

    @property
    def has_ready(self) -> bool:
        """Tasks wait for a slot (work is waiting: the adaptive limit may grow)."""
        return bool(self._ready)

    @property
    def queued(self) -> Sequence[int]:
        """The tasks waiting for a slot, in the order they will go (read-only)."""
        return tuple(self._ready)

    def whereabouts(self, index: int) -> str:
        """Where a task is now: 'in flight', 'tools', 'ready', 'backoff', 'held' or 'idle'."""
        if index in self._in_flight:
            return "in flight"
        if index in self._working:
            return "tools"
        if index in self._ready:
            return "ready"
        if index in self._retry_timers:
            return "backoff"
        return "held" if index in self._held else "idle"
