"""The driver of a distributed swarm: `RayEngine`, driven by the TUI and headless runs as `SwarmEngine` is.

It shards the unfinished tasks over `SwarmWorker` actors, each running the project's own
engine, and consumes their streams of journal records and events in order: each record is
committed to the run's `Journal` first, then the events that followed it go to the listeners
(RunStats, the progress line, the TUI). So the driver's journal stays the one source of truth,
and `resume` after a driver crash sends only what it does not show as finished. The judge
listens to the driver as it would to a local engine: it sees the answers as they are committed,
and its calls, like the planner's and the aggregator's, are made here (`driver_calls`).

An actor lost mid-run (killed, node gone) ends its stream with a Ray error: its tasks the
journal does not show as finished are put back in the queue and handed to a surviving actor
(or a new one), with their attempt numbering continued; attempts that were in flight on it
are journaled as cancelled (they may have been billed).

The driver is a small object holding named parts, as the local engine is: the same outbox
(`engine.kernel.outbox`: journal first, then the board and the listeners) and attempt numbering
(`engine.kernel.numbers`), the shards' steering (`steering.ShardSteering`), their recovery
(`recovery.ShardRecovery`), its lanes (`lane_host.DriverLanes`: the batch lane runs here, with
the driver as its `engine.ports.LaneHost`) and its own calls (`driver_calls.DriverCalls`).

Keys: the profile carries only the *name* of the key's env var. The actor reads the key from
its own environment; when the driver has the variable set, it passes it to the actors through
Ray's `runtime_env` (`forward_keys=False` leaves it to the nodes' environment). Never in a
shard's payload.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ray.exceptions import RayError

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.events import (
    Attempt,
    AttemptStarted,
    ConcurrencyChanged,
    EngineEvent,
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
from swarm_tui.core.lanes import LIVE
from swarm_tui.core.ports import Capability, RunJournal
from swarm_tui.core.task import JSONObject, RunTasks, Task, by_index
from swarm_tui.distributed import CAPABILITIES
from swarm_tui.distributed.actors import ActorPool, Shard, connect
from swarm_tui.distributed.admission import SwarmAdmission
from swarm_tui.distributed.cache import DriverCache
from swarm_tui.distributed.driver_calls import DriverCalls
from swarm_tui.distributed.lane_host import DriverLanes
from swarm_tui.distributed.recovery import ShardRecovery
from swarm_tui.distributed.sink import EVENT, JOURNAL
from swarm_tui.distributed.steering import ShardSteering
from swarm_tui.distributed.worker import DONE, ShardSpec
from swarm_tui.engine import AnswerRules, Doors, EngineSettings, Resumed
from swarm_tui.engine.kernel.guards import failure_rate_breach, outcome_of
from swarm_tui.engine.kernel.numbers import AttemptNumbers
from swarm_tui.engine.kernel.outbox import Listener, Outbox, Write
from swarm_tui.engine.lanes.registry import batch_lane_of
from swarm_tui.engine.ledger import SpendLedger
from swarm_tui.engine.pacing.retry import RetryPolicy
from swarm_tui.engine.stats import RunStats
from swarm_tui.pricing import Price
from swarm_tui.providers.client import CallResult, ProviderClient
from swarm_tui.providers.profile import ProviderProfile

if TYPE_CHECKING:
    from swarm_tui.cache import ResponseCache
    from swarm_tui.engine.pacing.admission import AdmissionController
    from swarm_tui.engine.ports import Lane
    from swarm_tui.tools import ToolsSpec

log = logging.getLogger(__name__)

_SKIPPED_EVENTS = (RunStarted, RunFinished, TasksAdded, RunStopping, RunPaused, RunResumed)
"""A shard's own run-level events: the driver announces the swarm's instead."""


class RayEngine:
    """`SwarmEngine`'s interface (`engine.ports.Engine`), with the work done by engines on Ray actors."""

    capabilities: frozenset[Capability] = CAPABILITIES
    tail = None
    """The tail deadlines live on the shards' engines."""
    adaptive = None
    fatal: str | None = None
    last_retry_after_asked_s: float | None = None

    def __init__(
        self,
        tasks: RunTasks,
        journal: RunJournal,
        settings: EngineSettings,
        doors: Doors,
        *,
        profile: ProviderProfile,
        base_url: str,
        resumed: Resumed | None = None,
        answers: AnswerRules | None = None,
        simulated: bool = False,
        address: str | None = None,
        actors: int | None = None,
        forward_keys: bool = True,
        response_cache: ResponseCache | None = None,
        tools: ToolsSpec | None = None,
    ) -> None:
        """`doors`: the primary endpoint and the prices (each actor makes its own clients from
        `profile`, its fallback's included); `tools`: the job's tools, run on the actors (every
        task a multi-step agent)."""
        connect(address)
        resumed = resumed or Resumed()
        checks = (answers or AnswerRules()).checks
        self.tools = tools
        self.tasks = by_index(tasks)
        self.client = doors.client
        self.journal = journal
        self.settings = settings
        self.price = doors.price
        self.fallback_price = doors.fallback_price
        self.simulated = simulated
        self.checks = checks
        self.cache = DriverCache(response_cache, doors.client, checks) if response_cache is not None else None
        self.stats = RunStats()
        self.board = TaskBoard.of(self.tasks, resumed.states)
        self.states = self.board.states
        self.outbox = Outbox(journal, self.board, [self.stats.observe])
        self.numbers = AttemptNumbers(resumed.attempts_made)
        self.admission = SwarmAdmission(settings.pacing.concurrency, self.board)
        self.retry_policy = RetryPolicy(max_attempts=settings.guards.max_attempts)
        self.ledger = SpendLedger(None)
        """Holds no budget: a Ray run's budget is split into the shards' allowances (`_free_budget`),
        each its engine's ledger, and the CLI refuses the batch lane with a budget on Ray."""
        self.pool = ActorPool(
            profile,
            base_url,
            timeout_s=settings.calls.timeout_s,
            rpm=settings.pacing.rpm,
            tpm=settings.pacing.tpm,
            size=actors,
            forward_keys=forward_keys,
        )
        self.shards: dict[int, Shard] = {}
        """Every shard of this session so far, by id (the running ones hold tasks)."""
        self.steering = ShardSteering(self.pool, self.admission, self.shards, self.states, self.outbox)
        self.recovery = ShardRecovery(self, self.pool, self.board, journal, self.outbox)
        self.driver_calls = DriverCalls(
            doors.client, journal, settings, self.pool, self.outbox.deliver, price=doors.price, simulated=simulated
        )
        """The planner's, aggregator's and judge's calls, made here (`driver_calls`)."""
        self._failed_over: str | None = None
        self._next_shard = 0
        self._running = False
        self._aborted = False
        self._stop_reason: str | None = None
        self._learned: tuple[int | None, int | None] = (settings.pacing.rpm, settings.pacing.tpm)
        self._wake = asyncio.Event()
        self._spent_before_usd = 0.0
        self._stats_cost_at_start = 0.0
        batch = batch_lane_of(self, doors.client, doors.price, checks)
        self.lanes = DriverLanes([batch] if batch is not None else [], wake=self.wake, stop=self.stop_dispatch)

    # ----------------------------------------------------------------- steering

    def pause(self, *, now: bool = False) -> list[int]:
        """The shards send nothing new; their calls in flight finish (`now` is not this engine's:
        it has no `Capability.HOLD_CALLS`)."""
        self.steering.pause()
        return []

    def resume(self) -> None:
        self.steering.resume()

    def set_concurrency(self, limit: int, reason: str = "user") -> int:
        return self.steering.set_concurrency(limit, reason)

    def cancel_tasks(self, indices: Iterable[int]) -> list[int]:
        return self.steering.cancel_tasks(indices)

    def abort(self, reason: str = "aborted by user", *, leave_batches: bool = False) -> None:
        """`leave_batches` (a quit): the open batches run on at the provider; `resume` collects them."""
        if self._aborted:
            return
        self._aborted = True
        self.lanes.abort(leave_open=leave_batches)
        self._stop(reason)
        self.pool.broadcast("abort", reason)
        self.driver_calls.abort(reason)

    def stop_dispatch(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop(reason)
            self.pool.broadcast("stop_dispatch", reason)

    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]:
        held = self.steering.is_held
        chosen = [
            i
            for i in (self.tasks if indices is None else indices)
            if self.states.get(i) is TaskState.FAILED
            or (indices is not None and held(i) and self.states[i] is TaskState.CANCELLED)
        ]
        if not chosen:
            return []
        self.steering.release(chosen)
        if not self._running:
            self.go_on()
        queued = [TaskQueued(index, TaskState.FAILED) for index in chosen]
        self.outbox.commit(partial(self.journal.requeue, chosen), events=queued)
        if self._running and self._stop_reason is None:
            self.dispatch(chosen)
        return chosen

    def add_tasks(self, tasks: Sequence[Task]) -> list[int]:
        new = [t for t in tasks if t.index not in self.tasks]
        if not new:
            return []
        added = TasksAdded(tuple(t.index for t in new), len(self.tasks) + len(new))
        self.outbox.commit(partial(self.journal.add_tasks, new), events=[added])
        for task in new:
            self.tasks[task.index] = task
        if self._running and self._stop_reason is None:
            self.dispatch([t.index for t in new])
        return [t.index for t in new]

    def announce_phase(self, phase: str, detail: str = "") -> None:
        self.outbox.emit(PhaseChanged(phase, detail))

    async def call_direct(
        self,
        phase: str,
        index: int,
        body: JSONObject,
        *,
        client: ProviderClient | None = None,
        admission: AdmissionController | None = None,
    ) -> CallResult:
        """The planner, warm-up, aggregator and judge calls run here, on the driver (`driver_calls`)."""
        return await self.driver_calls.call(phase, index, body, client=client, admission=admission)

    def add_price(self, endpoint: str, price: Price | None, tier: str | None = None) -> None:
        """Bill the driver's calls to another endpoint (a judge's) at its price."""
        self.driver_calls.add_price(endpoint, price, tier)

    def fail_over(self, reason: str) -> bool:
        """Every shard's new attempts go to the fallback from now on (and every later shard's);
        False when the run has none."""
        if self.pool.profile.fallback() is None:
            return False
        if self._failed_over is None:
            self._failed_over = reason
            self.pool.broadcast("fail_over", reason)
        return True

    # ----------------------------------------------------------------- the judge's side

    def subscribe(self, listener: Listener) -> None:
        self.outbox.subscribe(listener)

    def record(self, write: Write, *, events: Sequence[EngineEvent]) -> None:
        """A journal write from outside the engine (the judge's verdict) and the events that report
        it, in one transaction, then out to the views."""
        self.outbox.commit(write, events=events, quiet=True)

    def emit_now(self, event: EngineEvent) -> None:
        self.outbox.emit_now(event)

    def log(self, kind: str, data: JSONObject | None = None) -> None:
        self.outbox.note(kind, data)

    # ----------------------------------------------------------------- what the batch lane sees (`LaneHost`)

    @property
    def stopping(self) -> str | None:
        return self._stop_reason

    def give_back(self, indices: Iterable[int]) -> None:
        """Tasks the lane will not carry go to the shards (after a stop they stay unfinished)."""
        indices = list(indices)
        if indices and self._running and self._stop_reason is None:
            self.dispatch(indices)
        self.wake()

    def retry_soon(self, index: int, delay_s: float = 0.0) -> None:
        """A batch line to try again, live: to a shard after its backoff."""
        self.lanes.retry_after(index, delay_s, self.give_back)

    def ask_again(self, index: int, body: JSONObject) -> None:
        """A batch line's answer asked for again: the task's next attempt (a shard's) sends `body`."""
        self._transcript_grew(index, body)
        self.numbers.new_round(index)

    def wake(self) -> None:
        """Something the run's loop waits for may have changed."""
        self._wake.set()

    def check_failure_rate(self) -> None:
        """`--fail-on-error`: the swarm's guard (the shards run without it)."""
        breach = failure_rate_breach(self.board, len(self.tasks), self.settings.guards.fail_on_error)
        if breach is not None:
            self.stop_dispatch(breach)

    # ----------------------------------------------------------------- running

    def go_on(self) -> None:
        """Forget the stop that ended the last run (as `SwarmEngine.go_on`): `run()` forgets none."""
        if self._running:
            return
        self._stop_reason = None
        self._aborted = False
        self.admission.closed = False
        self.driver_calls.restart()

    async def run(self) -> RunFinished:
        if self._running:
            raise RuntimeError("the engine is already running")
        self._running = True
        self._spent_before_usd = self.journal.spent_usd()  # the one ledger: every session of the run
        self._stats_cost_at_start = self.stats.cost_usd
        pending = [i for i in sorted(self.tasks) if not self.states[i].is_final]
        outbox = self.outbox
        self.pool.ensure(paused=self.admission.paused)
        self.journal.log_event("ray", {"actors": len(self.pool.alive())})
        outbox.emit(RunStarted(len(self.tasks), len(pending), self.admission.limit, self.client.name, self.simulated))
        for index in pending:
            previous = self.states[index]
            if previous is not TaskState.QUEUED:  # left unfinished by an earlier stop (or process)
                outbox.emit(TaskQueued(index, previous))
        if self.settings.pacing.rpm or self.settings.pacing.tpm:
            outbox.emit(RateLimitsLearned(self.settings.pacing.rpm, self.settings.pacing.tpm))
        if self.cache is not None:  # hits before any shard: they reach no actor
            pending = self.cache.replay(pending, self.tasks, self.numbers.peek, outbox, self.journal)
            outbox.flush()
        pending = self.lanes.claim(pending)  # the batch lane's tasks (and those in open batches) stay here
        try:
            self.lanes.start()
            if pending and self._stop_reason is None:  # a stop asked before the run began holds
                self.dispatch(pending, spread=True)
            while True:
                running = [s.task for s in self.shards.values() if s.task is not None and s.running]
                if not running and not self.lanes.busy:
                    break
                self._wake.clear()
                wake = asyncio.create_task(self._wake.wait())
                await asyncio.wait({*running, wake}, return_when=asyncio.FIRST_COMPLETED)
                wake.cancel()
        finally:
            await self.lanes.settle()
            self._running = False
        # stopped (or a shard ended oddly): unfinished work, kept for resume. A task never started
        # stays queued, as it is on disk: a stop costs nothing per task it never sent
        left = [i for i in sorted(self.tasks) if not (self.states[i].is_final or self.states[i].kept_by_a_stop)]
        if left:
            cancelled = [TaskCancelled(index) for index in left]
            outbox.commit(partial(self.journal.record_cancelled, left, ()), events=cancelled)
        finished = self.outcome()
        outbox.emit(finished)
        outbox.flush()  # the run's last word is on disk and out before run() returns
        return finished

    async def aclose(self) -> None:
        """Stop the actors (their tool servers first) and the limiter (the run's journal is untouched)."""
        await self.pool.aclose()

    # ----------------------------------------------------------------- read-outs

    def outcome(self) -> RunFinished:
        """Where the run stands now, as the event `run()` ends with."""
        return outcome_of(self.board, len(self.tasks), aborted=self._aborted, stop_reason=self._stop_reason)

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
    def lane(self) -> Lane | None:
        """The batch lane, which runs here; None without."""
        return self.lanes.lane

    @property
    def actors(self) -> list[object]:
        """The worker actors made so far (a dead one stays in its place)."""
        return self.pool.actors

    @property
    def actors_lost(self) -> int:
        return self.pool.lost

    def limiter_stats(self) -> dict[str, object]:
        return self.pool.limiter_stats()

    @property
    def spent_usd(self) -> float:
        """What the run has spent, all sessions: the journal's ledger when this session started
        plus what the shards reported since."""
        return self._spent_before_usd + self.stats.cost_usd - self._stats_cost_at_start

    # ----------------------------------------------------------------- the shards

    def dispatch(self, indices: list[int], *, spread: bool = False) -> None:
        """Hand tasks to actors: over all of them at the start, else to the least busy one."""
        if not indices:
            return
        alive = self.pool.alive()
        if not alive:
            alive = [self.pool.new_actor(paused=self.admission.paused)]
        free = self._free_budget()
        if spread:
            n = len(alive)
            share = max(1, math.ceil(self.admission.limit / n))
            for k, actor_no in enumerate(alive):
                chunk = indices[k::n]
                if chunk:
                    self._start_shard(
                        actor_no, chunk, share, None if free is None else free * len(chunk) / len(indices)
                    )
            return
        load = {a: 0 for a in alive}
        for shard in self.shards.values():
            if shard.running and shard.actor_no in load:
                load[shard.actor_no] += len(shard.indices)
        actor_no = min(load, key=load.__getitem__)
        share = max(1, math.ceil(self.admission.limit / len(alive)))
        self._start_shard(actor_no, indices, share, free)

    def _start_shard(self, actor_no: int, indices: list[int], concurrency: int, allowance_usd: float | None) -> None:
        shard_id = self._next_shard
        self._next_shard += 1
        shard = Shard(shard_id, actor_no, self.pool.actors[actor_no], list(indices), concurrency)
        self.shards[shard_id] = shard
        shard.allowance_usd = allowance_usd
        settings = self.settings.but(  # a shard's calls are live: the driver owns the batch lane
            concurrency=concurrency, budget_usd=shard.allowance_usd, fail_on_error=None, lane=LIVE
        )
        spec = ShardSpec(
            shard_id,
            [self.tasks[i] for i in indices],
            settings,
            self.numbers.made(indices),
            self.price,
            self.fallback_price,
            self.simulated,
            self.checks.spec if self.checks is not None else None,
            self._failed_over,
            self.tools,
        )
        shard.task = asyncio.create_task(self._consume(shard, spec), name=f"shard-{shard_id}")
        self._wake.set()

    async def _consume(self, shard: Shard, spec: ShardSpec) -> None:
        try:
            async for ref in shard.actor.run_shard.remote(spec):
                self._apply(shard, await ref)
        except RayError as exc:
            self.recovery.lost(shard, exc)
            return
        except asyncio.CancelledError:
            raise
        leftover = [
            i for i in shard.indices if not self.states[i].is_final and self.states[i] is not TaskState.CANCELLED
        ]
        if leftover and self._stop_reason is None:  # should not happen; never lose a task
            self.recovery.requeue(leftover, "shard ended without them")

    def _apply(self, shard: Shard, batch: list[tuple[object, ...]]) -> None:
        for item in batch:
            kind = item[0]
            if kind == JOURNAL and isinstance(item[2], tuple):
                self._replay(item[1], item[2])
            elif kind == EVENT and isinstance(item[1], EngineEvent):
                self._relay(shard, item[1])
            elif kind == DONE and isinstance(item[2], int):
                shard.lease_calls = item[2]
        self.outbox.flush()  # the batch's events: one commit, then out (the guards read what they did)
        self._check_guards()

    def _replay(self, method: object, args: tuple[object, ...]) -> None:
        """A shard's journal write (`sink.ForwardingJournal`), applied to the run's journal."""
        journal = self.journal
        match method, *args:
            case "log_event", str(kind), (dict() | None) as data:  # a shard's notes (a failover, a trimmed request)
                journal.log_event(kind, data)
            case "record_cancelled", list(indices), list(attempts):
                journal.record_cancelled(indices, attempts)
            case "record_step", Attempt() as attempt, dict(body):  # an agent's transcript grew
                journal.record_step(attempt, body)
                self._transcript_grew(attempt.index, body)
            case "record_tool_calls", int(index), int(step), list(results), dict(body):
                journal.record_tool_calls(index, step, results, body)
                self._transcript_grew(index, body)
            case "record_success", Attempt() as attempt, (dict() | bytes()) as response, (str() | None) as parsed:
                journal.record_success(attempt, response, parsed=parsed)
                self.numbers.take(attempt.index, attempt.number)
                self.recovery.progressed()
                if self.cache is not None:
                    self.cache.kept(self.tasks[attempt.index], attempt, response)
            case "record_failure", Attempt() as attempt, (dict() | None) as body:
                journal.record_failure(attempt, body=body)
                self.numbers.take(attempt.index, attempt.number)
                if body is not None:  # a retry asks the failed answer again, with its error
                    self._transcript_grew(attempt.index, body)
            case "record_retry", Attempt() as attempt, (dict() | None) as body:
                journal.record_retry(attempt, body=body)
                self.numbers.take(attempt.index, attempt.number)
                if body is not None:  # an answer asked for again: the conversation goes on from here
                    self._transcript_grew(attempt.index, body)
            case "record_attempt", Attempt() as attempt:
                journal.record_attempt(attempt)
                self.numbers.take(attempt.index, attempt.number)
            # requeue: the driver journals retries itself

    def _transcript_grew(self, index: int, body: JSONObject) -> None:
        """An agent's body is its transcript so far: a shard handed it later (a lost actor's
        re-queue, a resume) goes on from there, never re-sending a step or a tool call."""
        task = self.tasks[index]
        self.tasks[index] = Task(task.index, task.custom_id, body)

    def _relay(self, shard: Shard, event: EngineEvent) -> None:
        if isinstance(event, RunStopping) and event.reason.startswith("budget"):
            self.stop_dispatch(f"{event.reason} (a shard's part of the run's budget)")  # the swarm's guard
        if isinstance(event, _SKIPPED_EVENTS):
            return
        if isinstance(event, AttemptStarted):
            self.numbers.take(event.index, event.number)
        elif isinstance(event, ConcurrencyChanged):
            shard.limit = event.limit
            running = [s for s in self.shards.values() if s.running]
            total = sum(s.limit for s in running) or event.limit
            event = ConcurrencyChanged(total, event.reason, ceiling=self.admission.limit)
        elif isinstance(event, RateLimitsLearned):
            if (event.rpm, event.tpm) == self._learned:
                return
            self._learned = (event.rpm, event.tpm)
        self.outbox.emit(event)

    def _free_budget(self) -> float | None:
        """The part of the budget no running shard holds, for new shards (by task count).

        Each shard's engine reserves every attempt's worst case against its allowance before it
        sends, so the shards together never pass the budget (a running shard's spend counts both
        in the ledger and in its allowance until it ends: on the safe side)."""
        budget = self.settings.guards.budget_usd
        if budget is None:
            return None
        held = sum(s.allowance_usd or 0.0 for s in self.shards.values() if s.running)
        return max(0.0, budget - self.spent_usd - held)

    def _check_guards(self) -> None:
        budget = self.settings.guards.budget_usd
        if budget is not None and self.spent_usd >= budget:
            self.stop_dispatch(f"budget: ${self.spent_usd:.4f} spent (this run, all sessions), budget ${budget:.2f}")
        self.check_failure_rate()

    def _stop(self, reason: str) -> None:
        if self._stop_reason is not None:
            return
        self._stop_reason = reason
        self.admission.closed = True
        self.driver_calls.stop(reason)
        self.outbox.emit(RunStopping(reason))
        self.lanes.wake()
