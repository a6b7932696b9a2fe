"""How the driver steers the shards as one swarm: pause, resume, a new limit split over the
running shards, and the user's `x` on agents (each cancelled by the shard that holds it).

A mixin of `driver.RayEngine`, apart so the driver stays one screenful of concerns."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from swarm_tui.core.events import ConcurrencyChanged, RunPaused, RunResumed
from swarm_tui.engine.observable import ObservableEngine

if TYPE_CHECKING:
    from swarm_tui.distributed.actors import ActorPool, Shard
    from swarm_tui.distributed.admission import SwarmAdmission


class ShardSteering(ObservableEngine):
    """The driver's steering (`RayEngine` sets `pool`, `admission`, `shards` and `_held`)."""

    pool: ActorPool
    admission: SwarmAdmission
    shards: dict[int, Shard]
    _held: set[int]

    def pause(self) -> None:
        if not self.admission.paused:
            self.admission.paused = True
            self.pool.broadcast("pause")
            self._emit_now(RunPaused())

    def resume(self) -> None:
        if self.admission.paused:
            self.admission.paused = False
            self.pool.broadcast("resume")
            self._emit_now(RunResumed())

    def set_concurrency(self, limit: int, reason: str = "user") -> int:
        """The swarm's ceiling, split over the running shards."""
        limit = max(1, limit)
        self.admission.limit = limit
        running = [s for s in self.shards.values() if s.running]
        share = max(1, math.ceil(limit / max(1, len(running))))
        for shard in running:
            shard.concurrency = shard.limit = share
            shard.actor.set_concurrency.remote(share, reason)
        self._emit_now(ConcurrencyChanged(limit, reason, ceiling=limit))
        return limit

    def cancel_tasks(self, indices: Iterable[int]) -> list[int]:
        """Stop these agents now (the user's `x`): the shard that holds each cancels it as the local
        engine does (a call in flight cancelled and journaled, finished tool calls kept), and it
        leaves that shard: it waits, cancelled, until it is retried by name (a new shard takes it)
        or the run resumed. A task no running shard holds (in a batch, not handed out) is not
        cancelled, and one whose answer the shard had already taken is answered instead (the
        driver hears of it a moment later). Returns the tasks asked to stop."""
        wanted = {i for i in indices if i in self.states and not self.states[i].is_final and i not in self._held}
        chosen: list[int] = []
        for shard in self.shards.values():
            mine = [i for i in shard.indices if i in wanted] if shard.running and wanted else []
            if not mine:
                continue
            shard.indices = [i for i in shard.indices if i not in wanted]  # its end or loss leaves them be
            shard.actor.cancel_tasks.remote(shard.shard_id, mine)
            self._held.update(mine)
            chosen += mine
        return chosen
