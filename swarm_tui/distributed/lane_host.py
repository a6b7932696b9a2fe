"""The driver's side its lanes see (`core.ports.LaneHost`): on Ray the batch lane runs on the
driver, which owns the provider's batches. It claims its tasks before any shard is handed out,
submits and follows the batches from here, and journals their lines as the local engine's lane
does; what it gives back (a failed live share, a line to retry live, a stop) goes to the shards.

A mixin of `driver.RayEngine`, apart so the driver stays one screenful of concerns (the commits,
events and notes a lane makes are `ObservableEngine`'s, shared with the local kernel)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from swarm_tui.core.ports import Lane
from swarm_tui.engine.lanes.registry import batch_lane_of
from swarm_tui.engine.ledger import SpendLedger
from swarm_tui.engine.observable import ObservableEngine
from swarm_tui.engine.pacing.retry import RetryPolicy

if TYPE_CHECKING:
    from swarm_tui.pricing import Price
    from swarm_tui.providers.client import ProviderClient

log = logging.getLogger("swarm_tui.distributed.driver")


class DriverLanes(ObservableEngine):
    """The lanes of a Ray run (`RayEngine` calls `_open_lanes` once, then `_claim` and
    `_start_lanes` at each run's start; it dispatches)."""

    _wake: asyncio.Event

    def _dispatch(self, indices: list[int], *, spread: bool = False) -> None:  # pragma: no cover
        raise NotImplementedError

    def _open_lanes(self, client: ProviderClient, price: Price | None, validator) -> None:
        self.retry_policy = RetryPolicy(max_attempts=self.settings.guards.max_attempts)
        self.ledger = SpendLedger(None)
        """Holds no budget: a Ray run's budget is split into the shards' allowances (`_free_budget`),
        each its engine's ledger, and the CLI refuses the batch lane with a budget on Ray."""
        self._retry_timers: dict[int, asyncio.TimerHandle] = {}
        lane = batch_lane_of(self, client, price, validator)
        self.lanes: list[Lane] = [lane] if lane is not None else []
        self._lane_runs: list[asyncio.Task[None]] = []

    def _claim(self, pending: list[int]) -> list[int]:
        """Each lane takes its tasks out of `pending` (those in open batches for good): the rest go live."""
        for lane in self.lanes:
            pending = lane.claim(pending)
        return pending

    def _start_lanes(self) -> None:
        self._lane_runs = [asyncio.create_task(lane.run(), name=f"lane-{lane.name}") for lane in self.lanes]
        for lane_run in self._lane_runs:
            lane_run.add_done_callback(self._lane_done)

    @property
    def lanes_busy(self) -> bool:
        """A lane still carries or follows work, or a line waits to be retried live."""
        return any(not lane_run.done() for lane_run in self._lane_runs) or bool(self._retry_timers)

    def _lane_done(self, task: asyncio.Task[None]) -> None:
        self.wake()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("the lane %s crashed", task.get_name(), exc_info=exc)
            self.stop_dispatch(f"internal error in {task.get_name()}: {type(exc).__name__}: {exc}")

    async def _settle_lanes(self) -> None:
        """The lanes' loops are over (a stop gives their unsubmitted tasks back, left unfinished)."""
        for timer in self._retry_timers.values():
            timer.cancel()
        self._retry_timers.clear()
        if self._lane_runs:
            await asyncio.gather(*self._lane_runs, return_exceptions=True)
            self._lane_runs = []

    def _abort_lanes(self, leave_open: bool) -> None:
        for lane in self.lanes:
            lane.abort(leave_open=leave_open)

    def _wake_lanes(self) -> None:
        for lane in self.lanes:
            lane.wake()

    # ----------------------------------------------------------------- LaneHost

    def give_back(self, indices: Iterable[int]) -> None:
        """Tasks the lane will not carry go to the shards (after a stop they stay unfinished)."""
        indices = list(indices)
        if indices and self._running and self._stop_reason is None:
            self._dispatch(indices)
        self.wake()

    def retry_soon(self, index: int, delay_s: float = 0.0) -> None:
        """A batch line to try again, live: to a shard after its backoff."""

        def due() -> None:
            self._retry_timers.pop(index, None)
            self.give_back([index])

        self._retry_timers[index] = asyncio.get_running_loop().call_later(delay_s, due)

    def wake(self) -> None:
        """Something the run's loop waits for may have changed."""
        self._wake.set()
