"""The engine as the swarm tools reach it (`tools.swarm_tools.SpawnHost`): an orchestrator's spawn
adds tasks to the run (journaled with their ancestry first, through the engine's `add_tasks`), and
its wait returns when the tasks it waits on have ended, whatever ended them.

A waiting agent holds no slot: its wait is its step's tool run, which the engine keeps as it keeps
any tool run (the run goes on while it waits). The wait is woken by the run's own events (a task
settled, cancelled by the user, queued again), delivered after they are on disk, so what a wait
returns is what the journal says; an answer is read from the journal, where it is kept whole.

A task ended: succeeded or failed (its final states), or cancelled by the user (`x`, while the run
goes on: it waits, held, until retried), so a wait never hangs on an agent nobody will run. A task
cancelled because the run is stopping has not ended: the waiting agent's own tool run is stopped
with the run, and its resumed run waits again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from swarm_tui.core.events import (
    EngineEvent,
    Spawn,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskState,
    TaskSucceeded,
)
from swarm_tui.core.task import Task
from swarm_tui.tools.swarm_tools import Ended

if TYPE_CHECKING:
    from swarm_tui.engine.engine import SwarmEngine

Outcome = Callable[[int], Ended | None]
"""How a settled task ended, read from the journal (its answer, or its final error); None: no
result is kept for it."""


class _Wait:
    """One wait: the tasks it still waits on, and the event that wakes it."""

    __slots__ = ("done", "remaining")

    def __init__(self, remaining: set[int]) -> None:
        self.remaining = remaining
        self.done = asyncio.Event()


class EngineSpawns:
    """`SpawnHost` over a `SwarmEngine` and its journal's results."""

    def __init__(self, engine: SwarmEngine, outcome: Outcome) -> None:
        self.engine = engine
        self.outcome = outcome
        self._waits: dict[int, list[_Wait]] = {}
        """The waits each task is in (a task is in few: its parent's, now and then a second)."""
        engine.subscribe(self._observe)

    def task_of(self, index: int) -> Task:
        return self.engine.tasks[index]

    @property
    def next_index(self) -> int:
        return len(self.engine.tasks)

    def add_tasks(self, tasks: Sequence[Task], spawn: Spawn) -> list[int]:
        return self.engine.add_tasks(tasks, spawn)

    def ended(self, index: int) -> Ended | None:
        if not self._has_ended(index):
            return None
        state = self.engine.states[index]
        if state is TaskState.CANCELLED:
            return Ended("cancelled", "cancelled by the user: it waits, unfinished, until it is retried")
        kept = self.outcome(index)
        if kept is not None:
            return kept
        return Ended(state.value, "" if state is TaskState.SUCCEEDED else "(no error kept)")

    def _has_ended(self, index: int) -> bool:
        state = self.engine.states.get(index)
        if state is TaskState.CANCELLED:
            return self.engine.stopping is None
        return state is not None and state.is_final

    async def settle(self, indices: Sequence[int], timeout_s: float | None = None) -> None:
        remaining = {index for index in indices if not self._has_ended(index)}
        if not remaining:
            return
        wait = _Wait(remaining)
        for index in set(indices):
            self._waits.setdefault(index, []).append(wait)
        try:
            async with asyncio.timeout(timeout_s):
                await wait.done.wait()
        except TimeoutError:
            pass
        finally:
            for index in set(indices):
                waits = self._waits.get(index)
                if waits is not None and wait in waits:
                    waits.remove(wait)
                    if not waits:
                        del self._waits[index]

    def _observe(self, event: EngineEvent) -> None:
        """A run's listener: a task some wait is on moved (settled, cancelled, queued again)."""
        if not self._waits or not isinstance(event, TaskSucceeded | TaskFailed | TaskCancelled | TaskQueued):
            return
        index = event.index
        waits = self._waits.get(index)
        if not waits:
            return
        ended = self._has_ended(index)
        for wait in waits:
            if ended:
                wait.remaining.discard(index)
                if not wait.remaining:
                    wait.done.set()
            else:  # queued again (a retry) before the wait ended: waited for anew
                wait.remaining.add(index)
