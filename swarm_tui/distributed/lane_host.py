"""The lanes of a Ray run: on Ray the batch lane runs on the driver, which owns the provider's
batches. It claims its tasks before any shard is handed out, submits and follows the batches from
here, and journals their lines as the local engine's lane does (through the driver's outbox and
numbering, `engine.ports.LaneHost`); what it gives back (a failed live share, a line to retry
live, a stop) goes to the shards.

`DriverLanes` is the driver's part that holds them: the lanes, their runs, and the batch lines
waiting out a backoff before they go to a shard.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from swarm_tui.engine.ports import Lane

log = logging.getLogger("swarm_tui.distributed.driver")


class DriverLanes:
    def __init__(self, lanes: list[Lane], *, wake: Callable[[], None], stop: Callable[[str], None]) -> None:
        """`wake`: the driver's loop may look again; `stop(reason)`: a lane crashed, dispatch stops."""
        self.lanes = lanes
        self._wake = wake
        self._stop = stop
        self._runs: list[asyncio.Task[None]] = []
        self._retry_timers: dict[int, asyncio.TimerHandle] = {}

    @property
    def lane(self) -> Lane | None:
        """The batch lane (`--lane batch|auto`, or a live run following open batches); None without."""
        return next((lane for lane in self.lanes if lane.name == "batch"), None)

    def claim(self, pending: list[int]) -> list[int]:
        """Each lane takes its tasks out of `pending` (those in open batches for good): the rest go live."""
        for lane in self.lanes:
            pending = lane.claim(pending)
        return pending

    def waiting(self) -> list[int]:
        """Tasks the lanes claimed and have not carried yet."""
        return [i for lane in self.lanes for i in lane.waiting]

    def start(self) -> None:
        self._runs = [asyncio.create_task(lane.run(), name=f"lane-{lane.name}") for lane in self.lanes]
        for run in self._runs:
            run.add_done_callback(self._done)

    @property
    def busy(self) -> bool:
        """A lane still carries or follows work, or a line waits to be retried live."""
        return any(not run.done() for run in self._runs) or bool(self._retry_timers)

    def retry_after(self, index: int, delay_s: float, then: Callable[[list[int]], None]) -> None:
        """A batch line to try again, live: `then([index])` (to a shard) after its backoff."""

        def due() -> None:
            self._retry_timers.pop(index, None)
            then([index])

        self._retry_timers[index] = asyncio.get_running_loop().call_later(delay_s, due)

    def _done(self, run: asyncio.Task[None]) -> None:
        self._wake()
        if not run.cancelled() and (exc := run.exception()) is not None:
            log.error("the lane %s crashed", run.get_name(), exc_info=exc)
            self._stop(f"internal error in {run.get_name()}: {type(exc).__name__}: {exc}")

    async def settle(self) -> None:
        """The lanes' loops are over (a stop gives their unsubmitted tasks back, left unfinished)."""
        for timer in self._retry_timers.values():
            timer.cancel()
        self._retry_timers.clear()
        if self._runs:
            await asyncio.gather(*self._runs, return_exceptions=True)
            self._runs = []

    def abort(self, *, leave_open: bool) -> None:
        for lane in self.lanes:
            lane.abort(leave_open=leave_open)

    def wake(self) -> None:
        """The run is stopping: the lanes stop waiting."""
        for lane in self.lanes:
            lane.wake()
