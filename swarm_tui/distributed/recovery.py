"""What the driver does when a shard ends badly: an actor lost (killed, node gone) or a shard
that broke on a live actor. Nothing the journal does not show as finished is lost: those tasks
are re-queued on a surviving actor (or a new one), the attempts that were in flight journaled as
cancelled (they may have been billed). Recovery is bounded: after `MAX_BROKEN_SHARDS` broken
shards, or more actors lost than the pool holds (and at least `MAX_BROKEN_SHARDS`), with no task
finished in between, the run stops, resumable, instead of re-queueing onto a cluster that keeps
losing them (nodes starved of CPU and declared dead, an actor killed by memory pressure).

A mixin of `driver.RayEngine`, apart so the driver stays one screenful of concerns."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import ray

from swarm_tui.core.events import Attempt, EngineEvent, TaskCancelled, TaskQueued
from swarm_tui.engine import TaskState
from swarm_tui.engine.observable import ObservableEngine

if TYPE_CHECKING:
    from swarm_tui.distributed.actors import ActorPool, Shard

log = logging.getLogger("swarm_tui.distributed.driver")

MAX_BROKEN_SHARDS = 3


class ShardRecovery(ObservableEngine):
    """The driver's part that recovers lost shards (`RayEngine` sets `pool` and `_broken_shards`,
    and dispatches)."""

    pool: ActorPool
    _broken_shards: int
    _actors_lost_since_progress: int

    def _dispatch(self, indices: list[int], *, spread: bool = False) -> None:  # pragma: no cover
        raise NotImplementedError

    def _lost(self, shard: Shard, exc: BaseException) -> None:
        """An actor died (or its shard broke): nothing it had not reported as finished is lost."""
        actor_no = shard.actor_no
        dead = not isinstance(exc, ray.exceptions.RayTaskError)
        if dead:
            if self.pool.mark_dead(actor_no):  # once per actor, however many shards it held
                self._actors_lost_since_progress += 1
            bound = max(MAX_BROKEN_SHARDS, self.pool.size + 1)
            if self._actors_lost_since_progress >= bound and self._stop_reason is None:
                self.stop_dispatch(
                    f"{self._actors_lost_since_progress} Ray actors lost with no task finished in between "
                    f"(the last: {type(exc).__name__}); the cluster cannot keep them alive: fix it and resume"
                )
        else:
            # the actor lives but its shard broke (e.g. the limiter actor is gone): re-queueing on the
            # same actor would fail the same way, over and over; after a few failures with no
            # progress in between, stop and leave a resumable journal instead
            self._broken_shards += 1
            if self._broken_shards >= MAX_BROKEN_SHARDS:
                self.stop_dispatch(
                    f"{self._broken_shards} shards failed in a row without progress "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                    "fix the cluster and resume"
                )
        left = [i for i in shard.indices if not self.states[i].is_final]
        log.warning(
            "ray shard %d on actor %d lost (%s): %d unfinished tasks re-queued",
            shard.shard_id,
            actor_no,
            type(exc).__name__,
            len(left),
        )
        self.journal.log_event(
            "actor_lost",
            {"shard": shard.shard_id, "actor": actor_no, "error": type(exc).__name__, "requeued": len(left)},
        )
        if self._stop_reason is not None:
            self._cancel(left)
        else:
            self._requeue(left, "actor lost")

    def _cancel(self, indices: list[int]) -> None:
        """A lost shard's tasks after a stop: those it had started become unfinished (cancelled),
        with the calls it had in flight; those it never started stay queued."""
        attempts = self._lost_attempts(indices)
        chosen = [i for i in indices if i in attempts or not self.states[i].kept_by_a_stop]
        cancelled = [TaskCancelled(i, attempts.get(i)) for i in chosen]
        self._commit(self.journal.record_cancelled, chosen, list(attempts.values()), events=cancelled)

    def _requeue(self, indices: list[int], why: str) -> None:
        attempts = self._lost_attempts(indices)
        events: list[EngineEvent] = []
        for index in indices:
            if index in attempts or self.states[index] is not TaskState.CANCELLED:
                events.append(TaskCancelled(index, attempts.get(index)))
            events.append(TaskQueued(index, TaskState.CANCELLED))
        # unfinished on disk until done anew
        self._commit(self.journal.record_cancelled, indices, list(attempts.values()), events=events)
        self._dispatch(indices)

    def _lost_attempts(self, indices: list[int]) -> dict[int, Attempt]:
        """The calls in flight on a lost shard, as the board knows them: journaled as cancelled."""
        now = time.time()
        out = {}
        for index in indices:
            flight = self.board.in_flight.get(index)
            if flight is not None:
                latency_ms = max(0.0, now - flight.started_at) * 1000
                out[index] = Attempt(index, flight.number, flight.endpoint, flight.started_at, latency_ms, "cancelled")
        return out
