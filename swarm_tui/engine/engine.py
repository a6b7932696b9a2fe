"""The swarm engine of one process (L1 orchestrator + L3 workers): a small object holding named parts.

* `queue` (`kernel.queue.TaskQueue`) — where each task is, and the handles of what is under way;
* `outbox` (`kernel.outbox.Outbox`) — the group commit: journal first, then the board and the
  listeners;
* `numbers` (`kernel.numbers.AttemptNumbers`) — attempt numbering and each round's budget;
* the pacing: `admission` (the in-flight limit, the RPM/TPM buckets, the Retry-After gate),
  `adaptive` (AIMD), the `ledger` (the budget) and the `retry_policy`;
* the lanes (`lanes.Lanes`): the **live lane** (`live.LiveLane`), to which the engine hands each
  task it admits; the **direct lane** (`direct.DirectLane`: planner, warm-up, aggregator and judge
  calls); the **other lanes** (`engine.ports.Lane`: the cache and batch lanes), which claim their
  tasks out of the queue when a run starts and carry them their own way.

What is the engine's own: running (`run`: one dispatcher takes ready tasks in order and waits for
admission, so thousands of queued tasks cost a byte and a deque entry each, not a coroutine each)
and steering (pause, resume, a new limit, abort, stop, retry, cancel, add). A failed attempt that
may be retried gives its slot back at once and comes back after its backoff (the queue's timer);
pause stops dispatch (calls in flight finish); abort stops it and cancels them.

It is assembled in one place (`builder.build_engine`): every part is whole when the constructor
returns, and none is replaced afterwards. Every lane reports through the engine's `LaneHost` side
(`engine.ports`), so every state change is journaled (one transaction) before any view hears of
it. It declares every capability (`core.ports.Capability`) and imports nothing from Textual.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import (
    Attempt,
    AttemptEnded,
    ConcurrencyChanged,
    DispatchWaiting,
    EngineEvent,
    PhaseChanged,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    Spawn,
    TaskCancelled,
    TaskQueued,
    TasksAdded,
    TaskState,
)
from swarm_tui.core.ports import Capability, RunJournal
from swarm_tui.core.stalls import StallWatch
from swarm_tui.core.task import JSONObject, Task
from swarm_tui.engine.calls import prompt_estimate
from swarm_tui.engine.kernel.guards import failure_rate_breach, outcome_of
from swarm_tui.engine.kernel.numbers import AttemptNumbers
from swarm_tui.engine.kernel.outbox import Listener, Outbox, Write
from swarm_tui.engine.kernel.queue import Place, TaskQueue
from swarm_tui.engine.ledger import SpendLedger, answer_ceiling
from swarm_tui.engine.pacing.admission import AdmissionController
from swarm_tui.engine.pacing.limits import AdaptiveConcurrency, RateLimits
from swarm_tui.engine.pacing.retry import RetryPolicy
from swarm_tui.engine.settings import DEFAULT_MAX_TOKENS, EngineSettings
from swarm_tui.engine.stats import RunStats
from swarm_tui.util.collection import collecting_less_often

if TYPE_CHECKING:
    from swarm_tui.engine.answers import AnswerChecks
    from swarm_tui.engine.lanes.direct import DirectLane
    from swarm_tui.engine.lanes.live import LiveLane
    from swarm_tui.engine.pacing.deadlines import TailDeadlines
    from swarm_tui.engine.pacing.suspension import Suspension
    from swarm_tui.engine.ports import Lane
    from swarm_tui.engine.routing.endpoints import Endpoints
    from swarm_tui.engine.routing.failover import CircuitBreaker
    from swarm_tui.pricing import Price
    from swarm_tui.providers.client import CallResult, ProviderClient

log = logging.getLogger(__name__)

WATCH_S = 0.5
"""How often the engine looks at what holds its dispatch and at its calls' liveness."""


@dataclass(frozen=True, slots=True)
class Kernel:
    """The kernel's parts: each task's state (the board, and the figures kept from its events),
    the outbox every event goes out through, attempt numbering, and the queue of where tasks are."""

    board: TaskBoard
    stats: RunStats
    outbox: Outbox
    numbers: AttemptNumbers
    queue: TaskQueue


@dataclass(frozen=True, slots=True)
class Pacing:
    """How calls are paced: admission (whose `rate_limits` are the run's), the adaptive limit (None:
    fixed, or each route door has its own), the budget's ledger and the retry policy."""

    admission: AdmissionController
    rate_limits: RateLimits
    adaptive: AdaptiveConcurrency | None
    ledger: SpendLedger
    retry_policy: RetryPolicy


@dataclass(frozen=True, slots=True)
class Lanes:
    """The engine's lanes and what they share: where calls go (`endpoints`) and their tail deadlines."""

    live: LiveLane
    direct: DirectLane
    others: list[Lane]
    """The cache and batch lanes, in the order they claim their tasks."""
    endpoints: Endpoints
    tail: TailDeadlines
    suspension: Suspension
    """What holds every lane while the provider cannot serve the account (quota, a long Retry-After)."""


LaneMaker = Callable[["SwarmEngine"], Lanes]
"""Makes the lanes with the engine as their host (they and the engine refer to each other)."""


class SwarmEngine:
    """Queue, outbox, numbering, pacing and lanes of one swarm; its run and its steering."""

    capabilities: frozenset[Capability] = frozenset(Capability)

    def __init__(
        self,
        tasks: MutableMapping[int, Task],
        journal: RunJournal,
        settings: EngineSettings,
        *,
        kernel: Kernel,
        pacing: Pacing,
        lanes: LaneMaker,
        endpoint: str,
        simulated: bool,
    ) -> None:
        """`endpoint`: the name the run announces (its primary's). Made by `builder.build_engine`."""
        self.tasks = tasks
        self.journal = journal
        self.settings = settings
        self.board = kernel.board
        self.states = kernel.board.states
        """Each task's state (read-only: events move it)."""
        self.stats = kernel.stats
        self.outbox = kernel.outbox
        self.numbers = kernel.numbers
        self.queue = kernel.queue
        self.admission = pacing.admission
        self.rate_limits = pacing.rate_limits
        self.adaptive = pacing.adaptive
        self.ledger = pacing.ledger
        """The run's one spend ledger (spent, every session, and the worst cases of calls in flight)."""
        self.retry_policy = pacing.retry_policy
        self.endpoint = endpoint
        self.simulated = simulated
        self._running = False
        self._stop_reason: str | None = None
        self._aborted = False
        self._fatal: str | None = None
        """Why the run cannot go on (the journal cannot be written, an internal error)."""
        self._suspended_stop: str | None = None
        """Why a stop was a suspension's (`quota`, `retry_after`): the run ends resumable, exit 75."""
        self._holding: int | None = None
        """The token estimate of the task the dispatcher waits to admit (None: it waits for none)."""
        self._budget_wait = False
        """The dispatcher waits for the budget's room."""
        self._told_waiting: tuple[str, str] = ("", "")
        self._stalls: StallWatch | None = None
        self._stalls_loop: asyncio.AbstractEventLoop | None = None
        self._lane_runs: list[asyncio.Task[None]] = []
        journal.on_write_failure(self._journal_failed)
        made = lanes(self)
        self.live = made.live
        self.direct = made.direct
        self.lanes = made.others
        self.endpoints = made.endpoints
        self.tail = made.tail
        self.suspension = made.suspension

    # ----------------------------------------------------------------- steering

    def pause(self, *, now: bool = False) -> list[int]:
        """Send nothing new; the calls in flight finish, or with `now` they are held too: each is
        cut (journaled cancelled, as it may be billed) and its task waits first in line, its
        retries' budget whole, until `resume`. Returns the tasks whose calls were held."""
        if not self.admission.paused:
            self.admission.pause()
            self.outbox.emit_now(RunPaused())
        if not now:
            return []
        held = self.queue.recall_flights()
        for index in held:
            self.numbers.new_round(index)  # a call the user cut is no failed attempt
        return held

    def resume(self) -> None:
        if self.admission.paused:
            self.admission.resume()
            self.outbox.emit_now(RunResumed())

    def set_concurrency(self, limit: int, reason: str = "user") -> int:
        """The user's limit: the ceiling the adaptive controller works under, and the limit now."""
        limit = self.admission.set_limit(limit)
        if self.adaptive is not None:
            self.adaptive.set_ceiling(limit)
        self.outbox.emit_now(ConcurrencyChanged(limit, reason, ceiling=limit))
        return limit

    def adapt(self, limit: int, reason: str) -> None:
        """The adaptive controller moved the limit."""
        self.admission.set_limit(limit)
        self.outbox.emit(ConcurrencyChanged(limit, reason))

    def note_congestion(self, reason: str) -> None:
        """Congestion the provider showed to someone else sharing its budget (another shard of a
        distributed swarm): back the adaptive limit off as for a 429 of our own."""
        if self.adaptive is not None:
            shrunk = self.adaptive.on_congestion()
            if shrunk is not None:
                self.adapt(shrunk, reason)

    def abort(self, reason: str = "aborted by user", *, leave_batches: bool = False) -> None:
        """Stop dispatch and cancel every call in flight; the journal stays resumable. What other
        lanes carry is cancelled too (a batch's completed lines are kept), unless `leave_batches`
        (a quit: open batches run on at the provider, and `resume` collects them)."""
        if self._aborted:
            return
        self._aborted = True
        self._stop(reason)
        self.live.cancel_all()
        for lane in self.lanes:
            lane.abort(leave_open=leave_batches)

    def stop_dispatch(self, reason: str) -> None:
        """Send nothing new; let the calls in flight finish (budget and error-rate guards)."""
        self._stop(reason)

    def stop_suspended(self, kind: str, reason: str) -> None:
        """A suspension ends the run (`--on-quota stop`, past `--max-suspend`): send nothing new, the
        calls in flight finish; the run ends resumable, exit 75 (`RunFinished.suspended`)."""
        if self._stop_reason is None:
            self._suspended_stop = kind
        self._stop(reason)

    def fail_run(self, reason: str) -> None:
        """The run cannot go on (its journal cannot be written, an internal error): stop dispatch
        and cancel every call in flight at once, so that no more answers are paid for than can be
        kept. The run ends with `reason` and is resumable (exit 1)."""
        if self._fatal is not None:
            return
        self._fatal = reason
        self._stop(reason)
        self.queue.cancel_flights()

    def check_failure_rate(self) -> None:
        """`--fail-on-error`: stop dispatch once the share of finished tasks that failed passes it."""
        breach = failure_rate_breach(self.board, len(self.tasks), self.settings.guards.fail_on_error)
        if breach is not None:
            self.stop_dispatch(breach)

    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]:
        """Queue finally-failed tasks again, with a fresh attempt budget; named ones the user
        cancelled too (an agent goes on from its last completed step). Returns what was queued.
        While the engine runs they are picked up at once; otherwise the caller runs it again."""
        queue = self.queue
        chosen = [
            i
            for i in (self.tasks if indices is None else indices)
            if self.states.get(i) is TaskState.FAILED or (indices is not None and queue.is_held(i))
        ]
        if not chosen or self._fatal is not None:
            return []
        if not self._running:
            self.go_on()
        queued = [TaskQueued(index, self.states[index]) for index in chosen]
        self.outbox.commit(partial(self.journal.requeue, chosen), events=queued)
        queue.release(chosen)  # the user asked for these now: ahead of untried work
        for index in chosen:
            self.numbers.new_round(index)
        return chosen

    def cancel_tasks(self, indices: Iterable[int]) -> list[int]:
        """Stop these tasks now (the user's `x` on an agent): a call in flight is cancelled (and
        journaled: it may be billed), tool calls still running stop (finished ones are kept),
        and the task waits, cancelled, until it is retried or the run resumed. Returns them."""
        queue = self.queue
        chosen = [i for i in indices if i in self.tasks and not self.states[i].is_final and not queue.is_held(i)]
        for index in chosen:
            if not queue.hold(index):  # a call or a tool run's own cleanup journals it and says so
                self.cancel_now(index)
        queue.wake()
        return chosen

    def add_tasks(self, tasks: Sequence[Task], spawn: Spawn | None = None) -> list[int]:
        """Add tasks to the run (a plan's sub-tasks, a later round, the agents an agent's `spawn`
        asked for); journaled first."""
        new = [t for t in tasks if t.index not in self.tasks]
        if not new:
            return []
        added = TasksAdded(tuple(t.index for t in new), len(self.tasks) + len(new), spawn=spawn)
        self.outbox.commit(partial(self.journal.add_tasks, new), events=[added])
        for task in new:
            self.tasks[task.index] = task
        self.queue.extend(task.index for task in new)
        return [t.index for t in new]

    def announce_phase(self, phase: str, detail: str = "") -> None:
        self.outbox.emit(PhaseChanged(phase, detail))

    def fail_over(self, reason: str) -> bool:
        """Send new attempts to the fallback now; False when there is none (`routing.Endpoints`)."""
        return self.endpoints.fail_over(reason)

    def add_price(self, endpoint: str, price: Price | None, tier: str | None = None) -> None:
        """Bill calls to another endpoint (a judge's) at its price, asking for `tier`."""
        self.live.billing.add_price(endpoint, price, tier)

    # ----------------------------------------------------------------- what the lanes see (`LaneHost`)

    @property
    def stopping(self) -> str | None:
        """Why the run is stopping, or None while it goes on."""
        return self._stop_reason

    def give_back(self, indices: Iterable[int]) -> None:
        """Tasks a lane will not carry: back in the live line (left unfinished by a stop)."""
        self.queue.extend(indices)

    def retry_soon(self, index: int, delay_s: float = 0.0) -> None:
        """A task whose attempt failed and may be tried again: ahead of the line after `delay_s`."""
        self.queue.retry_after(index, delay_s)

    def wake(self) -> None:
        self.queue.wake()

    def ask_again(self, index: int, body: JSONObject) -> None:
        """The task's next attempt sends `body` (its answer asked for again: the conversation so far),
        with a round of transport retries of its own (a re-ask is not one of them)."""
        task = self.tasks[index]
        self.tasks[index] = Task(task.index, task.custom_id, body)
        self.numbers.new_round(index)

    def leave_unfinished(self, index: int, attempts: list[Attempt]) -> None:
        """A task stopped mid-attempt (abort, a journal that cannot keep its outcome, a call that
        failed while the run stops, with attempts left): its calls are journaled (cancelled, or
        failed and to be retried; when the journal can), and it waits for the next run() or resume."""
        events: list[EngineEvent] = [
            *(AttemptEnded(extra) for extra in attempts[1:]),
            TaskCancelled(index, attempts[0]),
        ]
        self.queue.rest(index)
        self.outbox.commit(partial(self.journal.record_cancelled, [index], attempts), events=events, quiet=True)

    def cancel_now(self, index: int) -> None:
        """A task the user stopped that had nothing under way: journaled cancelled (once)."""
        if self.states[index] is TaskState.CANCELLED:
            return
        self.outbox.commit(
            partial(self.journal.record_cancelled, [index], ()), events=[TaskCancelled(index)], quiet=True
        )

    # ----------------------------------------------------------------- the judge's side

    def subscribe(self, listener: Listener) -> None:
        self.outbox.subscribe(listener)

    def record(self, write: Write, *, events: Sequence[EngineEvent]) -> None:
        """A journal write from outside the engine (the judge's verdict) and the events that report
        it, in one transaction, then out to the views; a journal that cannot be written has
        already stopped the run, and the events still go out."""
        self.outbox.commit(write, events=events, quiet=True)

    def emit_now(self, event: EngineEvent) -> None:
        self.outbox.emit_now(event)

    def log(self, kind: str, data: JSONObject | None = None) -> None:
        """A note in the journal that changes no task."""
        self.outbox.note(kind, data)

    # ----------------------------------------------------------------- running

    def go_on(self) -> None:
        """Forget the stop that ended the last run (the user asked to go on: failed tasks retried,
        the unfinished ones resumed), so that the next `run()` dispatches again. `run()` itself
        forgets no stop: one asked before it began (an abort as the run opens, between a swarm's
        rounds) holds."""
        if self._running:
            return
        self._stop_reason = None
        self._aborted = False
        self._suspended_stop = None
        self.admission.reopen()

    async def run(self) -> RunFinished:
        """Dispatch until every task is final (or dispatch is stopped); may be called again
        (after `go_on`, when a stop ended it)."""
        if self._running:
            raise RuntimeError("the engine is already running")
        if self._fatal is not None:
            return self.outcome()
        self._running = True
        self.ledger.open(self.journal.spent_usd())
        queue, outbox = self.queue, self.outbox
        pending = queue.waiting
        if self.lanes:  # each lane takes its tasks out of the line (those in open batches for good)
            queue.share(self._claim)
        outbox.emit(
            RunStarted(
                len(self.tasks),
                pending,
                self.admission.limit,
                self.endpoint,
                self.simulated,
                self.ceiling_now(),
                stream=self.settings.calls.stream,
            )
        )
        for index in [*queue.queued, *(i for lane in self.lanes for i in lane.waiting)]:
            previous = self.states[index]
            if previous is not TaskState.QUEUED:  # left unfinished by an earlier stop (or process)
                outbox.emit(TaskQueued(index, previous))
        if self.rate_limits.rpm or self.rate_limits.tpm:
            outbox.emit(RateLimitsLearned(self.rate_limits.rpm, self.rate_limits.tpm))
        self.endpoints.announce()
        self._lane_runs = [asyncio.create_task(lane.run(), name=f"lane-{lane.name}") for lane in self.lanes]
        for lane_run in self._lane_runs:
            lane_run.add_done_callback(self._lane_done)
        watch = asyncio.create_task(self._watch(), name="engine-watch")
        with collecting_less_often():  # a tenth of the engine's CPU went to the collector (see its module)
            try:
                await self._dispatch()
            finally:
                if self._lane_runs:
                    await asyncio.gather(*self._lane_runs, return_exceptions=True)
                    self._lane_runs = []
                await self.live.settle()
                watch.cancel()
                self.suspension.close()
                self._tell_waiting("", None, "")
                self._running = False
        outbox.flush()  # the last answers (group commit) count in the outcome
        if self._stop_reason is not None:
            self._cancel_waiting()
        finished = self.outcome()
        outbox.emit(finished)
        outbox.flush()  # the run's last word is on disk and out before run() returns
        return finished

    def _claim(self, line: list[int]) -> list[int]:
        for lane in self.lanes:
            line = lane.claim(line)
        return line

    async def _dispatch(self) -> None:
        live, queue, admission = self.live, self.queue, self.admission
        while self._stop_reason is None:
            index = await self._next_ready()
            if index is None:
                return
            if live.resumes_itself(index):
                queue.carried(index)
                continue
            tokens = self._token_estimate(index)
            self._holding = tokens
            try:
                admitted = await admission.acquire(tokens)
            finally:
                self._holding = None
            if not admitted:
                queue.put_back(index)
                return
            if queue.where(index) is not Place.NEXT:  # the user cancelled it (`x`) while it waited for a slot
                admission.release()
                continue
            if not live.dispatch(index, tokens):
                admission.release()
                queue.put_back(index)
                if self._stop_reason is not None:  # the budget is spent
                    return
                self._budget_wait = True
                try:
                    await self.ledger.room()  # it fits once calls in flight settle
                finally:
                    self._budget_wait = False

    async def _next_ready(self) -> int | None:
        queue = self.queue
        while self._stop_reason is None:
            index = queue.pop()
            if index is not None:
                return index
            if not queue.busy and not self.lanes_busy:
                return None
            await queue.changed()
        return None

    async def _watch(self) -> None:
        """A few times a second: what the next task in line waits for (told when it changes), and
        the live calls' liveness (streams' progress, calls silent far too long)."""
        stalls = self.stalls
        while True:
            await asyncio.sleep(WATCH_S)
            self.live.liveness.tick(stalls.now())
            if self._budget_wait:
                self._tell_waiting("budget", None, self.ledger.describe_wait())
            elif self._holding is not None:
                self._tell_waiting(*self.admission.waiting_for(self._holding))
            else:
                self._tell_waiting("", None, "")

    def _tell_waiting(self, reason: str, wait_s: float | None, detail: str) -> None:
        if (reason, detail) == self._told_waiting:
            return
        self._told_waiting = (reason, detail)
        self.outbox.emit(DispatchWaiting(reason, None if wait_s is None else round(wait_s, 3), detail))

    @property
    def lanes_busy(self) -> bool:
        """A lane still carries or follows work (a batch's lines may come back to be run live)."""
        return any(not lane_run.done() for lane_run in self._lane_runs)

    def calls_out(self) -> bool:
        """Calls whose reservations will settle: task calls in flight, direct calls, other lanes'."""
        return self.queue.in_flight > 0 or self.direct.on_wire > 0 or self.lanes_busy

    def _lane_done(self, task: asyncio.Task[None]) -> None:
        self.queue.wake()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("the lane %s crashed", task.get_name(), exc_info=exc)
            self.fail_run(f"internal error in the {task.get_name()}: {type(exc).__name__}: {exc}")

    def _token_estimate(self, index: int) -> int:
        if not self.admission.paces_tokens:  # no body to read (from the journal) for nothing
            return 0
        return self.token_estimate_of(self.tasks[index].body)

    def token_estimate_of(self, body: JSONObject) -> int:
        """TPM reservation: prompt estimate + the answer's ceiling (0 when no TPM limit is known)."""
        if not self.admission.paces_tokens:
            return 0
        return prompt_estimate(body) + (answer_ceiling(body) or DEFAULT_MAX_TOKENS)

    def _stop(self, reason: str) -> None:
        if self._stop_reason is not None:
            return
        self._stop_reason = reason
        self.outbox.emit(RunStopping(reason))
        self.queue.wake()
        self.ledger.settled.set()  # a call waiting for the budget's room waits no more
        self.admission.close()
        for lane in self.lanes:
            lane.wake()

    def _cancel_waiting(self) -> None:
        """After a stop: tasks waiting out a backoff (or queued again after one) become unfinished
        (cancelled) work, kept in the queue for the next run() or a resume. A task never started
        stays queued, as it is on disk: unfinished already, so a stop costs nothing per task it
        never sent (a million-task job stopped early wrote a million events, for minutes)."""
        waiting = self.queue.stop_waiting()
        cancelled = [TaskCancelled(i) for i in waiting if not self.states[i].kept_by_a_stop]
        if cancelled:
            indices = [e.index for e in cancelled]
            self.outbox.commit(partial(self.journal.record_cancelled, indices, ()), events=cancelled, quiet=True)

    def _journal_failed(self, error: JournalWriteError) -> None:
        in_flight = self.queue.in_flight
        self.fail_run(
            f"journal write failed, nothing more was sent: {error.cause}"
            + (f"; {in_flight} call{'s' if in_flight != 1 else ''} in flight cancelled" if in_flight else "")
        )

    # ----------------------------------------------------------------- read-outs

    def outcome(self) -> RunFinished:
        """Where the run stands now, as the event `run()` ends with."""
        return outcome_of(
            self.board,
            len(self.tasks),
            aborted=self._aborted,
            stop_reason=self._stop_reason,
            suspended=self._suspended_stop,
        )

    @property
    def running(self) -> bool:
        return self._running

    @property
    def paused(self) -> bool:
        return self.admission.paused

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def fatal(self) -> str | None:
        return self._fatal

    @property
    def client(self) -> ProviderClient:
        """The primary endpoint."""
        return self.endpoints.client

    @property
    def checks(self) -> AnswerChecks | None:
        """The run's answer checks (what makes an answer usable, and what an unusable one leads to)."""
        return self.live.outcomes.checks

    @property
    def breaker(self) -> CircuitBreaker | None:
        return self.endpoints.breaker

    @property
    def lane(self) -> Lane | None:
        """The batch lane (`--lane batch|auto`, or a live run following open batches); None without."""
        return next((lane for lane in self.lanes if lane.name == "batch"), None)

    @property
    def last_retry_after_asked_s(self) -> float | None:
        """The last Retry-After that was capped: what the provider asked for (shown while waiting)."""
        return self.live.last_retry_after_asked_s

    @property
    def hedges_sent(self) -> int:
        return self.live.hedges_sent

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

    def ceiling_now(self) -> int | None:
        """The adaptive limit's ceiling (None: the limit is fixed); a routed run's: the sum of its
        endpoints' ceilings (each adaptive on its own)."""
        if self.endpoints.routed:
            doors = self.endpoints.doors
            return sum(d.adaptive.ceiling if d.adaptive is not None else d.admission.limit for d in doors)
        return self.adaptive.ceiling if self.adaptive is not None else None

    async def call_direct(
        self,
        phase: str,
        index: int,
        body: JSONObject,
        *,
        client: ProviderClient | None = None,
        admission: AdmissionController | None = None,
    ) -> CallResult:
        """One request outside the task grid (`direct.DirectLane.call`)."""
        return await self.direct.call(phase, index, body, client=client, admission=admission)

    async def aclose(self) -> None:
        """Nothing outside this process to let go of."""
