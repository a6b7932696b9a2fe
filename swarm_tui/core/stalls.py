"""Time the process did not run is not time a call took.

A process stopped with SIGSTOP (Ctrl-Z, a paused VM, a suspended laptop) and continued finds
every clock moved on: answers that arrived meanwhile wait in the socket, but every deadline —
the hard timeout, the straggler and hedge deadlines, a stream's first token and idle gap — has
passed, so the calls in flight would all be abandoned on wake-up and sent (and paid) again.

`StallWatch` ticks on the event loop. A tick that comes much later than it was due means the
process did not run for that long: the gap is added to `stalled_s`, so `now()` (the monotonic
clock minus the stalls) is the time the process ran, and every deadline entered through
`deadline(seconds)` is pushed back by the gap before it can fire. After a stall the tick is the
earliest timer due (it was due first), so it runs before the deadlines it moves.

The tick is not the first code to run after a stop, though: a stop lands wherever the process
is, often in the middle of a turn of a busy loop, and the rest of that turn (and the callbacks
it queued) runs on waking before any timer, the tick included. Code there that asks the time
(an attempt looking whether its call is late) would count the whole stop as the call's: a
backup sent, and paid, for a call whose answer was already waiting in the socket. So `now()`
notices a stall itself: a tick overdue by more than `STALL_S` is one, counted at once, and the
tick, when it comes, finds it counted. One watch per event loop (`StallWatch.of_running_loop()`).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from types import TracebackType

TICK_S = 0.25
STALL_S = 1.0
"""A tick this much later than due is a stall (a loop merely busy for a moment is not)."""


class StallWatch:
    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StallWatch] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop, *, tick_s: float = TICK_S, stall_s: float = STALL_S) -> None:
        self._loop = loop
        self.tick_s = tick_s
        self.stall_s = stall_s
        self.stalled_s = 0.0
        """Seconds the process did not run since the watch began."""
        self.stalls = 0
        self._live: set[asyncio.Timeout] = set()
        self._due = time.monotonic() + tick_s
        self._handle = loop.call_later(tick_s, self._tick)

    @classmethod
    def of_running_loop(cls) -> StallWatch:
        loop = asyncio.get_running_loop()
        watch = cls._by_loop.get(loop)
        if watch is None:
            watch = cls._by_loop[loop] = cls(loop)
        return watch

    def now(self) -> float:
        """Seconds the process ran (a monotonic clock that stood still while it was stopped): a
        stall not yet counted by the tick is counted here first (see the module doc)."""
        now = time.monotonic()
        if now - self._due > self.stall_s:
            self._catch_up(now)
        return now - self.stalled_s

    def deadline(self, seconds: float | None) -> _Deadline:
        """`asyncio.timeout(seconds)` that a stall pushes back by the time the process did not run."""
        self.now()  # a stall not yet counted is counted before the new deadline is set (not pushed back by it)
        return _Deadline(self, seconds)

    def track(self, timeout: asyncio.Timeout) -> None:
        """Push `timeout` back by every stall from now until `untrack`."""
        self._live.add(timeout)

    def untrack(self, timeout: asyncio.Timeout) -> None:
        self._live.discard(timeout)

    def _tick(self) -> None:
        now = time.monotonic()
        self._catch_up(now)
        self._due = now + self.tick_s
        self._handle = self._loop.call_later(self.tick_s, self._tick)

    def _catch_up(self, now: float) -> None:
        """Count the time past the tick's due as a stall when it is one, and measure the next one
        from `now` (the tick, coming just after, does not count again what `now()` counted)."""
        late = now - self._due
        if late > self.stall_s:
            self._stalled(late)
            self._due = now

    def _stalled(self, gap: float) -> None:
        self.stalled_s += gap
        self.stalls += 1
        for timeout in list(self._live):
            when = timeout.when()
            if when is not None and not timeout.expired():
                timeout.reschedule(when + gap)


class _Deadline:
    """The context manager of `StallWatch.deadline` (a class: no generator on the hot path)."""

    __slots__ = ("_watch", "_timeout")

    def __init__(self, watch: StallWatch, seconds: float | None) -> None:
        self._watch = watch
        self._timeout = asyncio.timeout(seconds)

    async def __aenter__(self) -> asyncio.Timeout:
        timeout = await self._timeout.__aenter__()
        self._watch.track(timeout)
        return timeout

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._watch.untrack(self._timeout)
        await self._timeout.__aexit__(kind, error, tb)
