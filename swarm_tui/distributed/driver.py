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
from typing import TYPE_CHECKING, Any

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
)
from swarm_tui.core.lanes import LIVE
from swarm_tui.core.task import RunTasks, Task, by_index
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
from swarm_tui.engine import EngineSettings, TaskState
from swarm_tui.engine.observable import Listener
from swarm_tui.engine.stats import RunStats
from swarm_tui.pricing import Price
from swarm_tui.providers.client import CallResult, ProviderClient
from swarm_tui.providers.profile import ProviderProfile

if TYPE_CHECKING:
    from swarm_tui.cache import ResponseCache
    from swarm_tui.engine.pacing.admission import AdmissionController
    from swarm_tui.tools import ToolsSpec

log = logging.getLogger(__name__)

_SKIPPED_EVENTS = (RunStarted, RunFinished, TasksAdded, RunStopping, RunPaused, RunResumed)
"""A shard's own run-level events: the driver announces the swarm's instead."""


class RayEngine(ShardSteering, ShardRecovery, DriverLanes):
    """`SwarmEngine`'s interface (`core.ports.Engine`), with the work done by engines on Ray actors."""

    capabilities = CAPABILITIES
    tail = None
    """The tail deadlines live on the shards' engines."""
    adaptive = None
    fatal: str | None = None
    last_retry_after_asked_s: float | None = None

    def __init__(
        self,
        tasks: RunTasks,
        client: ProviderClient,
        journal,
        settings: EngineSettings,
        *,
        profile: ProviderProfile,
        base_url: str,
        address: str | None = None,
        actors: int | None = None,
        price: Price | None = None,
        states: dict[int, TaskState] | None = None,
        attempts_made: dict[int, int] | None = None,
        simulated: bool = False,
        fallback_price: Price | None = None,
        validator=None,
        forward_keys: bool = True,
        response_cache: ResponseCache | None = None,
        tools: ToolsSpec | None = None,
    ) -> None:
        """`tools`: the job's tools, run on the actors (every task a multi-step agent)."""
        connect(address)
        self.tools = tools
        self.tasks = by_index(tasks)
        self.client = client
        self.journal = journal
        self.settings = settings
        self.price = price
        self.fallback_price = fallback_price
        self.simulated = simulated
        self.validator = validator
        self.cache = DriverCache(response_cache, client, validator) if response_cache is not None else None
        self.stats = RunStats()
        self.board = TaskBoard.of(self.tasks, states)
        self.states = self.board.states
        self._attempt_numbers: dict[int, int] = dict(attempts_made or {})
        self._round_attempts: dict[int, int] = {}
        self._listeners: list[Listener] = [self.stats.observe]
        self._outbox: list = []
        self.admission = SwarmAdmission(settings.pacing.concurrency, self.board)
        self.pool = ActorPool(
            profile,
            base_url,
            timeout_s=settings.calls.timeout_s,
            rpm=settings.pacing.rpm,
            tpm=settings.pacing.tpm,
            size=actors,
            forward_keys=forward_keys,
        )
        self._broken_shards = 0
        """Shards that failed (actor alive) since the last success: see `_lost`."""
        self._actors_lost_since_progress = 0
        """Actors found dead since the last success: see `_lost`."""
        self.driver_calls = DriverCalls(
            client, journal, settings, self.pool, self._deliver, price=price, simulated=simulated
        )
        """The planner's, aggregator's and judge's calls, made here (`driver_calls`)."""
        self._failed_over: str | None = None
        self.shards: dict[int, Shard] = {}
        """Every shard of this session so far, by id (the running ones hold tasks)."""
        self._next_shard = 0
        self._held: set[int] = set()
        """Tasks the user cancelled (`x`): they wait, unfinished, until retried by name or the run resumed."""
        self._running = False
        self._aborted = False
        self._stop_reason: str | None = None
        self._learned: tuple[int | None, int | None] = (settings.pacing.rpm, settings.pacing.tpm)
        self._wake = asyncio.Event()
        self._spent_before_usd = 0.0
        self._stats_cost_at_start = 0.0
        self._open_lanes(client, price, validator)

    # ----------------------------------------------------------------- steering

    def abort(self, reason: str = "aborted by user", *, leave_batches: bool = False) -> None:
        """`leave_batches` (a quit): the open batches run on at the provider; `resume` collects them."""
        if self._aborted:
            return
        self._aborted = True
        self._abort_lanes(leave_batches)
        self._stop(reason)
        self.pool.broadcast("abort", reason)
        self.driver_calls.abort(reason)

    def stop_dispatch(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop(reason)
            self.pool.broadcast("stop_dispatch", reason)

    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]:
        chosen = [
            i
            for i in (self.tasks if indices is None else indices)
            if self.states.get(i) is TaskState.FAILED
            or (indices is not None and i in self._held and self.states[i] is TaskState.CANCELLED)
        ]
        if not chosen:
            return []
        self._held.difference_update(chosen)
        if not self._running:
            self._stop_reason = None
            self._aborted = False
            self.driver_calls.restart()
        queued = [TaskQueued(index, TaskState.FAILED) for index in chosen]
        self._commit(self.journal.requeue, chosen, events=queued)
        if self._running and self._stop_reason is None:
            self._dispatch(chosen)
        return chosen

    def add_tasks(self, tasks: Sequence[Task]) -> list[int]:
        new = [t for t in tasks if t.index not in self.tasks]
        if not new:
            return []
        added = TasksAdded(tuple(t.index for t in new), len(self.tasks) + len(new))
        self._commit(self.journal.add_tasks, new, events=[added])
        for task in new:
            self.tasks[task.index] = task
        if self._running and self._stop_reason is None:
            self._dispatch([t.index for t in new])
        return [t.index for t in new]

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

    # ----------------------------------------------------------------- running

    async def run(self) -> RunFinished:
        if self._running:
            raise RuntimeError("the engine is already running")
        self._running = True
        self._aborted = False
        self._stop_reason = None
        self.admission.closed = False
        self._spent_before_usd = self.journal.spent_usd()  # the one ledger: every session of the run
        self._stats_cost_at_start = self.stats.cost_usd
        pending = [i for i in sorted(self.tasks) if not self.states[i].is_final]
        self.pool.ensure(paused=self.admission.paused)
        self.journal.log_event("ray", {"actors": len(self.pool.alive())})
        self._emit(RunStarted(len(self.tasks), len(pending), self.admission.limit, self.client.name, self.simulated))
        for index in pending:
            previous = self.states[index]
            if previous is not TaskState.QUEUED:  # left unfinished by an earlier stop (or process)
                self._emit(TaskQueued(index, previous))
        if self.settings.pacing.rpm or self.settings.pacing.tpm:
            self._emit(RateLimitsLearned(self.settings.pacing.rpm, self.settings.pacing.tpm))
        if self.cache is not None:  # hits before any shard: they reach no actor
            pending = self.cache.replay(
                pending, self.tasks, self.peek_number, self._commit_soon, self.journal.record_success
            )
            self._flush_outbox()
        pending = self._claim(pending)  # the batch lane's tasks (and those in open batches) stay here
        try:
            self._start_lanes()
            if pending:
                self._dispatch(pending, spread=True)
            while True:
                running = [s.task for s in self.shards.values() if s.task is not None and s.running]
                if not running and not self.lanes_busy:
                    break
                self._wake.clear()
                wake = asyncio.create_task(self._wake.wait())
                await asyncio.wait({*running, wake}, return_when=asyncio.FIRST_COMPLETED)
                wake.cancel()
        finally:
            await self._settle_lanes()
            self._running = False
        # stopped (or a shard ended oddly): unfinished work, kept for resume. A task never started
        # stays queued, as it is on disk: a stop costs nothing per task it never sent
        left = [i for i in sorted(self.tasks) if not (self.states[i].is_final or self.states[i].kept_by_a_stop)]
        if left:
            cancelled = [TaskCancelled(index) for index in left]
            self._commit(self.journal.record_cancelled, left, (), events=cancelled)
        finished = self.outcome()
        self._emit(finished)
        self._flush_outbox()  # the run's last word is on disk and out before run() returns
        return finished

    async def aclose(self) -> None:
        """Stop the actors (their tool servers first) and the limiter (the run's journal is untouched)."""
        await self.pool.aclose()

    @property
    def actors(self) -> list:
        """The worker actors made so far (a dead one stays in its place)."""
        return self.pool.actors

    @property
    def actors_lost(self) -> int:
        return self.pool.lost

    def limiter_stats(self) -> dict[str, Any]:
        return self.pool.limiter_stats()

    # ----------------------------------------------------------------- internals

    def _dispatch(self, indices: list[int], *, spread: bool = False) -> None:
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
            {i: self._attempt_numbers[i] for i in indices if i in self._attempt_numbers},
            self.price,
            self.fallback_price,
            self.simulated,
            self.validator,
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
            self._lost(shard, exc)
            return
        except asyncio.CancelledError:
            raise
        leftover = [
            i for i in shard.indices if not self.states[i].is_final and self.states[i] is not TaskState.CANCELLED
        ]
        if leftover and self._stop_reason is None:  # should not happen; never lose a task
            self._requeue(leftover, "shard ended without them")

    def _apply(self, shard: Shard, batch: list[tuple]) -> None:
        journal = self.journal
        for item in batch:
            kind = item[0]
            if kind == JOURNAL:
                _, method, args = item
                if method == "log_event":  # a shard's notes (a failover, a trimmed request)
                    journal.log_event(args[0], args[1])
                elif method == "record_cancelled":
                    journal.record_cancelled(*args)
                elif method in ("record_step", "record_tool_calls"):  # an agent's transcript grew
                    getattr(journal, method)(*args)
                    self._transcript_grew(args[0] if method == "record_tool_calls" else args[0].index, args[-1])
                elif method in ("record_success", "record_failure", "record_retry", "record_attempt"):
                    attempt: Attempt = args[0]
                    getattr(journal, method)(*args)
                    self.take_numbers(attempt.index, attempt.number)
                    if method == "record_success":
                        self._broken_shards = self._actors_lost_since_progress = 0
                        if self.cache is not None:
                            self.cache.kept(self.tasks[attempt.index], attempt, args[1])
                # requeue: the driver journals retries itself
            elif kind == EVENT:
                self._relay(shard, item[1])
            elif kind == DONE:
                shard.lease_calls = item[2]
        self._flush_outbox()  # the batch's events: one commit, then out (the guards read what they did)
        self._check_guards()

    def _transcript_grew(self, index: int, body: dict[str, Any]) -> None:
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
            self.take_numbers(event.index, event.number)
        elif isinstance(event, ConcurrencyChanged):
            shard.limit = event.limit
            running = [s for s in self.shards.values() if s.running]
            total = sum(s.limit for s in running) or event.limit
            event = ConcurrencyChanged(total, event.reason, ceiling=self.admission.limit)
        elif isinstance(event, RateLimitsLearned):
            if (event.rpm, event.tpm) == self._learned:
                return
            self._learned = (event.rpm, event.tpm)
        self._emit(event)

    @property
    def spent_usd(self) -> float:
        """What the run has spent, all sessions: the journal's ledger when this session started
        plus what the shards reported since."""
        return self._spent_before_usd + self.stats.cost_usd - self._stats_cost_at_start

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
        self._check_failure_rate()

    def _stop(self, reason: str) -> None:
        if self._stop_reason is not None:
            return
        self._stop_reason = reason
        self.admission.closed = True
        self.driver_calls.stop(reason)
        self._emit(RunStopping(reason))
        self._wake_lanes()
