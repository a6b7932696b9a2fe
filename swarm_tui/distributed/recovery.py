"""What the driver does when a shard ends badly: an actor lost (killed, node gone) or a shard
that broke on a live actor. Nothing the journal does not show as finished is lost: those tasks
are re-queued on a surviving actor (or a new one), the attempts that were in flight journaled as
cancelled (they may have been billed). Recovery is bounded: after `MAX_BROKEN_SHARDS` broken
shards, or more actors lost than the pool holds (and at least `MAX_BROKEN_SHARDS`), with no task
finished in between, the run stops, resumable, instead of re-queueing onto a cluster that keeps
losing them (nodes starved of CPU and declared dead, an actor killed by memory pressure).

`ShardRecovery` is the driver's part that does it: it keeps the counts that bound it, and re-queues
through the driver (`ShardDriver`)."""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import TYPE_CHECKING, Protocol

import ray

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.events import Attempt, EngineEvent, TaskCancelled, TaskQueued, TaskState
from swarm_tui.core.ports import JournalSink
from swarm_tui.engine.kernel.outbox import Outbox

if TYPE_CHECKING:
    from swarm_tui.distributed.actors import ActorPool, Shard

log = logging.getLogger("swarm_tui.distributed.driver")

MAX_BROKEN_SHARDS = 3


class ShardDriver(Protocol):
    """What recovery asks of the driver: whether it stops, to stop, and to hand tasks to shards."""

    @property
    def stopping(self) -> str | None: ...
    def stop_dispatch(self, reason: str) -> None: ...
    def dispatch(self, indices: list[int]) -> None: ...


class ShardRecovery:
    def __init__(
        self, driver: ShardDriver, pool: ActorPool, board: TaskBoard, journal: JournalSink, outbox: Outbox
    ) -> None:
        self._driver = driver
        self._pool = pool
        self._board = board
        self._journal = journal
        self._outbox = outbox
        self._broken_shards = 0
        """Shards that failed (actor alive) since the last success: see `lost`."""
        self._actors_lost_since_progress = 0
        """Actors found dead since the last success: see `lost`."""

    def progressed(self) -> None:
        """A task finished: the cluster does its work, the counts that bound recovery start over."""
        self._broken_shards = self._actors_lost_since_progress = 0

    def lost(self, shard: Shard, exc: BaseException) -> None:
        """An actor died (or its shard broke): nothing it had not reported as finished is lost."""
        actor_no = shard.actor_no
        dead = not isinstance(exc, ray.exceptions.RayTaskError)
        if dead:
            if self._pool.mark_dead(actor_no):  # once per actor, however many shards it held
                self._actors_lost_since_progress += 1
            bound = max(MAX_BROKEN_SHARDS, self._pool.size + 1)
            if self._actors_lost_since_progress >= bound and self._driver.stopping is None:
                self._driver.stop_dispatch(
                    f"{self._actors_lost_since_progress} Ray actors lost with no task finished in between "
                    f"(the last: {type(exc).__name__}); the cluster cannot keep them alive: fix it and resume"
                )
        else:
            # the actor lives but its shard broke (e.g. the limiter actor is gone): re-queueing on the
            # same actor would fail the same way, over and over; after a few failures with no
            # progress in between, stop and leave a resumable journal instead
            self._broken_shards += 1
            if self._broken_shards >= MAX_BROKEN_SHARDS:
                self._driver.stop_dispatch(
                    f"{self._broken_shards} shards failed in a row without progress "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                    "fix the cluster and resume"
                )
        left = [i for i in shard.indices if not self._board.states[i].is_final]
        log.warning(
            "ray shard %d on actor %d lost (%s): %d unfinished tasks re-queued",
            shard.shard_id,
            actor_no,
            type(exc).__name__,
            len(left),
        )
        self._journal.log_event(
            "actor_lost",
            {"shard": shard.shard_id, "actor": actor_no, "error": type(exc).__name__, "requeued": len(left)},
        )
        if self._driver.stopping is not None:
            self._cancel(left)
        else:
            self.requeue(left, "actor lost")

    def _cancel(self, indices: list[int]) -> None:
        """A lost shard's tasks after a stop: those it had started become unfinished (cancelled),
        with the calls it had in flight; those it never started stay queued."""
        attempts = self._lost_attempts(indices)
        chosen = [i for i in indices if i in attempts or not self._board.states[i].kept_by_a_stop]
        cancelled = [TaskCancelled(i, attempts.get(i)) for i in chosen]
        self._outbox.commit(partial(self._journal.record_cancelled, chosen, list(attempts.values())), events=cancelled)

    def requeue(self, indices: list[int], why: str) -> None:
        """Tasks a shard lost (`why`), to a surviving actor: unfinished on disk until done anew."""
        attempts = self._lost_attempts(indices)
        events: list[EngineEvent] = []
        for index in indices:
            if index in attempts or self._board.states[index] is not TaskState.CANCELLED:
                events.append(TaskCancelled(index, attempts.get(index)))
            events.append(TaskQueued(index, TaskState.CANCELLED))
        # unfinished on disk until done anew
        self._outbox.commit(partial(self._journal.record_cancelled, indices, list(attempts.values())), events=events)
        self._driver.dispatch(indices)

    def _lost_attempts(self, indices: list[int]) -> dict[int, Attempt]:
        """The calls in flight on a lost shard, as the board knows them: journaled as cancelled."""
        now = time.time()
        out: dict[int, Attempt] = {}
        for index in indices:
            flight = self._board.in_flight.get(index)
            if flight is not None:
                latency_ms = max(0.0, now - flight.started_at) * 1000
                out[index] = Attempt(index, flight.number, flight.endpoint, flight.started_at, latency_ms, "cancelled")
        return out
