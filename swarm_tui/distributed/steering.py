"""How the Ray driver steers the shards as one swarm: pause, resume, a new limit split over the
running shards, and the user's `x` on agents (each cancelled by the shard that holds it, and held
here until it is retried by name or the run resumed).

`ShardSteering` is the driver's part that does it; the driver's `pause`, `resume`,
`set_concurrency` and `cancel_tasks` are its."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from swarm_tui.core.events import ConcurrencyChanged, RunPaused, RunResumed, TaskState
from swarm_tui.engine.kernel.outbox import Outbox

if TYPE_CHECKING:
    from swarm_tui.distributed.actors import ActorPool, Shard
    from swarm_tui.distributed.admission import SwarmAdmission


class ShardSteering:
    def __init__(
        self,
        pool: ActorPool,
        admission: SwarmAdmission,
        shards: Mapping[int, Shard],
        states: Mapping[int, TaskState],
        outbox: Outbox,
    ) -> None:
        """`shards`: every shard of the session so far, by id (the driver's, read)."""
        self._pool = pool
        self._admission = admission
        self._shards = shards
        self._states = states
        self._outbox = outbox
        self._held: set[int] = set()
        """Tasks the user cancelled (`x`): they wait, unfinished, until retried by name or the run resumed."""

    def pause(self) -> None:
        if not self._admission.paused:
            self._admission.paused = True
            self._pool.broadcast("pause")
            self._outbox.emit_now(RunPaused())

    def resume(self) -> None:
        if self._admission.paused:
            self._admission.paused = False
            self._pool.broadcast("resume")
            self._outbox.emit_now(RunResumed())

    def set_concurrency(self, limit: int, reason: str = "user") -> int:
        """The swarm's ceiling, split over the running shards."""
        limit = max(1, limit)
        self._admission.limit = limit
        running = [s for s in self._shards.values() if s.running]
        share = max(1, math.ceil(limit / max(1, len(running))))
        for shard in running:
            shard.concurrency = shard.limit = share
            shard.actor.set_concurrency.remote(share, reason)
        self._outbox.emit_now(ConcurrencyChanged(limit, reason, ceiling=limit))
        return limit

    def cancel_tasks(self, indices: Iterable[int]) -> list[int]:
        """Stop these agents now (the user's `x`): the shard that holds each cancels it as the local
        engine does (a call in flight cancelled and journaled, finished tool calls kept), and it
        leaves that shard: it waits, cancelled, until it is retried by name (a new shard takes it)
        or the run resumed. A task no running shard holds (in a batch, not handed out) is not
        cancelled, and one whose answer the shard had already taken is answered instead (the
        driver hears of it a moment later). Returns the tasks asked to stop."""
        states = self._states
        wanted = {i for i in indices if i in states and not states[i].is_final and i not in self._held}
        chosen: list[int] = []
        for shard in self._shards.values():
            mine = [i for i in shard.indices if i in wanted] if shard.running and wanted else []
            if not mine:
                continue
            shard.indices = [i for i in shard.indices if i not in wanted]  # its end or loss leaves them be
            shard.actor.cancel_tasks.remote(shard.shard_id, mine)
            self._held.update(mine)
            chosen += mine
        return chosen

    def is_held(self, index: int) -> bool:
        return index in self._held

    def release(self, indices: Iterable[int]) -> None:
        """Retried by name: no longer held."""
        self._held.difference_update(indices)
