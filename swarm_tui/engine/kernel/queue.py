"""The task queue: the one part that knows where each task of a run is, and holds what it waits on.

A task not finished is in one place at a time (`Place`):

* **queued** — in the ready line, waiting for its turn (in order; a task whose backoff ended, an
  agent back from its tools and the user's retries go ahead of tasks never tried);
* **next** — taken off the line by the dispatcher, waiting for admission's slot;
* **backoff** — waiting out a retry's delay (a timer), then first in line;
* **in flight** — its attempt is on the wire (the queue holds the attempt's `asyncio.Task`);
* **tools** — an agent running its tool calls (no slot held; the run waits for it);
* **held** — the user's `x`: unfinished, until retried by name or the run resumed;
* **elsewhere** — none of these: finished, carried by another lane (a batch, the cache), or its
  answer on its way to the journal.

`where(index)` is O(1): each task's place is one byte of a table (a million-task run holds a
megabyte), moved with the task. The queue is the only owner of the ready line, the retry timers,
the handles of the calls and tool runs under way and the held set: the engine and its lanes move
tasks through its methods, never its collections.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum


class Place(StrEnum):
    """Where a task is (see the module doc)."""

    ELSEWHERE = "elsewhere"
    QUEUED = "queued"
    NEXT = "next"
    BACKOFF = "backoff"
    IN_FLIGHT = "in flight"
    WORKING = "tools"
    HELD = "held"


_PLACES = tuple(Place)
_ELSEWHERE, _QUEUED, _NEXT, _BACKOFF, _IN_FLIGHT, _WORKING, _HELD = range(len(_PLACES))
"""Each place's byte in the table (its position in `Place`)."""
_FAR = 1 << 16
"""An index this far past the table's end (or below 0) is kept in a dict rather than grow the table."""


class TaskQueue:
    def __init__(self, waiting: Iterable[int] = ()) -> None:
        """`waiting`: the tasks to run, each once, in order (a resumed run's unfinished ones)."""
        self._ready: deque[int] = deque(waiting)
        self._codes, self._far = _table(self._ready)
        """Each task's place (`Place`'s position) by index, and those of indices outside the table
        (negative, or far past its end)."""
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._flights: dict[int, asyncio.Task[None]] = {}
        """Tasks whose attempt is on the wire (each holds a slot)."""
        self._tool_runs: dict[int, asyncio.Task[None]] = {}
        """Agents running their tool calls: no slot held."""
        self._held: set[int] = set()
        """Tasks the user cancelled (`x`): they wait, unfinished, until retried or the run resumed."""
        self._recalled: set[int] = set()
        """Tasks whose call a pause cut (`recall_flights`): first in line again when they rest."""
        self._wake = asyncio.Event()

    # ----------------------------------------------------------------- places

    def where(self, index: int) -> Place:
        return _PLACES[self._code(index)]

    def _code(self, index: int) -> int:
        codes = self._codes
        if 0 <= index < len(codes):
            return codes[index]
        return self._far.get(index, _ELSEWHERE)

    def _put(self, index: int, code: int) -> None:
        codes = self._codes
        if 0 <= index < len(codes):
            codes[index] = code
        elif 0 <= index < len(codes) + _FAR:
            codes.extend(bytes(index + 1 - len(codes)))
            codes[index] = code
        elif code == _ELSEWHERE:
            self._far.pop(index, None)
        else:
            self._far[index] = code

    # ----------------------------------------------------------------- the ready line

    def append(self, index: int) -> None:
        """At the end of the line (a task added, or given back by a lane)."""
        self._ready.append(index)
        self._put(index, _QUEUED)

    def extend(self, indices: Iterable[int]) -> None:
        for index in indices:
            self.append(index)
        self._wake.set()

    def go_first(self, index: int) -> None:
        """Ahead of the line now (an agent back from its tools, a task the dispatcher could not send)."""
        self._ready.appendleft(index)
        self._put(index, _QUEUED)
        self._wake.set()

    def put_first(self, indices: Sequence[int]) -> None:
        """Ahead of the line, in this order (the user asked for these now)."""
        self._ready.extendleft(reversed(indices))
        for index in indices:
            self._put(index, _QUEUED)
        self._wake.set()

    def pop(self) -> int | None:
        """The dispatcher takes the next task (it waits for a slot: `Place.NEXT`); None: the line is empty."""
        if not self._ready:
            return None
        index = self._ready.popleft()
        self._put(index, _NEXT)
        return index

    def put_back(self, index: int) -> None:
        """The dispatcher could not send it (the run stopped, the budget has no room): first again,
        unless the user held it meanwhile."""
        if index in self._held:
            self._put(index, _HELD)
            return
        self._ready.appendleft(index)
        self._put(index, _QUEUED)

    def carried(self, index: int) -> None:
        """The dispatcher handed it on without a call of its own (a lane replayed its answer): elsewhere."""
        if self._code(index) == _NEXT:
            self._put(index, _ELSEWHERE)

    @property
    def has_ready(self) -> bool:
        """Tasks wait in line (work is waiting: the adaptive limit may grow)."""
        return bool(self._ready)

    @property
    def waiting(self) -> int:
        """How many tasks wait in line."""
        return len(self._ready)

    @property
    def queued(self) -> Sequence[int]:
        """The tasks in line, in the order they will go (read-only)."""
        return tuple(self._ready)

    def untried(self, tried: Callable[[int], bool]) -> list[int]:
        """The tasks in line that no attempt has been made of (in line order)."""
        return [i for i in self._ready if not tried(i)]

    def take(self, indices: Sequence[int]) -> list[int]:
        """Take these tasks out of the line for another lane (those still in it)."""
        chosen = set(indices)
        taken = [i for i in self._ready if i in chosen]
        if taken:
            self._ready = deque(i for i in self._ready if i not in chosen)
            for index in taken:
                self._put(index, _ELSEWHERE)
        return taken

    def share(self, claim: Callable[[list[int]], list[int]]) -> None:
        """A run's start: the other lanes take their tasks out of the line (`claim(line)` returns
        what stays); the rest stay, in order."""
        line = list(self._ready)
        kept = claim(line)
        if len(kept) == len(line):
            return
        for index in line:
            self._put(index, _ELSEWHERE)
        for index in kept:
            self._put(index, _QUEUED)
        self._ready = deque(kept)

    # ----------------------------------------------------------------- backoffs

    def retry_after(self, index: int, delay_s: float) -> None:
        """A failed attempt's task waits `delay_s`, then goes ahead of tasks never tried (its wait
        was its turn)."""
        self._timers[index] = asyncio.get_running_loop().call_later(delay_s, self._due, index)
        self._put(index, _BACKOFF)

    def _due(self, index: int) -> None:
        self._timers.pop(index, None)
        self.go_first(index)

    # ----------------------------------------------------------------- calls and tool runs

    def fly(self, index: int, attempt: asyncio.Task[None]) -> None:
        """Its attempt is on the wire (holding the slot it was admitted with)."""
        self._flights[index] = attempt
        self._put(index, _IN_FLIGHT)

    def flying(self, index: int) -> asyncio.Task[None] | None:
        return self._flights.get(index)

    def flights(self) -> list[asyncio.Task[None]]:
        return list(self._flights.values())

    @property
    def in_flight(self) -> int:
        """Calls of tasks on the wire now."""
        return len(self._flights)

    def land(self, index: int) -> None:
        """Its attempt is over, whatever its outcome (which may already have moved it on)."""
        del self._flights[index]
        if self._code(index) == _IN_FLIGHT:
            self._put(index, _ELSEWHERE)
        self._wake.set()

    def cancel_flights(self) -> None:
        """Every call on the wire stops (each attempt's own cleanup journals it)."""
        for attempt in self._flights.values():
            attempt.cancel()

    def recall_flights(self) -> list[int]:
        """Every call on the wire stops and its task goes back to the front of the line as its
        attempt's cleanup rests it (a pause that holds the calls in flight). Returns those tasks."""
        recalled = list(self._flights)
        self._recalled.update(recalled)
        self.cancel_flights()
        return recalled

    def work(self, index: int, run: asyncio.Task[None]) -> None:
        """The agent runs its tools: no slot, but the run waits for it."""
        self._tool_runs[index] = run
        self._put(index, _WORKING)

    def worked(self, index: int, run: asyncio.Task[None]) -> bool:
        """Its tools are done; True when `run` was its current tool run (not one cancelled and replaced)."""
        if self._tool_runs.get(index) is not run:
            return False
        del self._tool_runs[index]
        if self._code(index) == _WORKING:
            self._put(index, _ELSEWHERE)
        self._wake.set()
        return True

    def tool_runs(self) -> list[asyncio.Task[None]]:
        return list(self._tool_runs.values())

    # ----------------------------------------------------------------- the user's `x`

    def hold(self, index: int) -> bool:
        """The user stops this task (`x`): it waits, held, until retried by name. A call in flight
        or a tool run is cancelled (its own cleanup journals it: True); a task waiting in line or
        out a backoff leaves it (False: the caller journals it cancelled)."""
        self._held.add(index)
        running = self._flights.get(index) or self._tool_runs.get(index)
        if running is not None:
            running.cancel()
            return True
        timer = self._timers.pop(index, None)
        if timer is not None:
            timer.cancel()
        if self._code(index) == _QUEUED:
            self._ready.remove(index)
        self._put(index, _HELD)
        self._wake.set()
        return False

    def is_held(self, index: int) -> bool:
        return index in self._held

    def rest(self, index: int) -> None:
        """A task stopped mid-attempt or between steps (an abort, the user's `x`, a pause that
        holds the calls in flight): held when the user asked, first in line when a pause cut its
        call, else back in line for the next run or a resume."""
        if index in self._held:
            self._put(index, _HELD)
        elif index in self._recalled:
            self._recalled.discard(index)
            self.go_first(index)
        else:
            self.append(index)

    def release(self, indices: Sequence[int]) -> None:
        """The user asked for these again: no longer held, and ahead of the line."""
        self._held.difference_update(indices)
        self.put_first(indices)

    # ----------------------------------------------------------------- the dispatcher's waits

    @property
    def busy(self) -> bool:
        """Something the line waits for is under way: a call, a backoff, a tool run."""
        return bool(self._flights or self._timers or self._tool_runs)

    def wake(self) -> None:
        """Something the dispatcher waits for may have changed."""
        self._wake.set()

    async def changed(self) -> None:
        """Wait for the next `wake`."""
        self._wake.clear()
        await self._wake.wait()

    def stop_waiting(self) -> list[int]:
        """After a stop: the backoffs end now, and every task waiting (out a backoff or in line)
        stays in line, in index order, for the next run. Returns them."""
        for timer in self._timers.values():
            timer.cancel()
        retrying = set(self._timers)  # a few; the line may hold a million: no set of it
        self._timers.clear()
        waiting = sorted([*retrying, *(i for i in self._ready if i not in retrying)])
        self._ready = deque(waiting)
        for index in retrying:
            self._put(index, _QUEUED)
        return waiting


def _table(line: deque[int]) -> tuple[bytearray, dict[int, int]]:
    """The places of a new line's tasks (each once): queued, every one. A new run's line is every
    index from 0: its table is made at C speed, not a byte at a time."""
    codes = bytearray(max(line, default=-1) + 1)
    far: dict[int, int] = {}
    if line and len(codes) == len(line) and min(line) == 0:
        return bytearray([_QUEUED]) * len(line), far
    for index in line:
        if index >= 0:
            codes[index] = _QUEUED
        else:
            far[index] = _QUEUED
    return codes, far
