"""The task state machine: every view's task states, moved only by engine events.

`TaskBoard.apply(event)` is the one place a task changes state. The engine applies each event
it emits, the Ray driver each event its shards report, and an attached view each event it
reads from the journal's log: the same events through the same rules give the same board.

    queued ──AttemptStarted──> running ──TaskSucceeded──> succeeded   (final: nothing moves it)
      ^  ^                     │  │  └───TaskFailed─────> failed ──TaskQueued (retry)──┐
      │  └──TaskQueued─────────┘  └───TaskRetrying───> retrying ──AttemptStarted──> running
      └──TaskQueued── cancelled <──TaskCancelled── (running, retrying, queued)

A hedged backup's `AttemptStarted` moves no state (its task is already running). A multi-step
agent's `AgentStepped` ends its model call and leaves it running (in its tools).

The board is the one owner of what is in flight: each running task's attempt (`in_flight`: its
number, endpoint and start; a batch line's too) and a hedged attempt's backup call while both run
(`backups`). From them come the calls on the wire (`live_calls`, what the footer shows) and the
tasks holding a slot (`live_tasks`). So a run whose process died (kill -9, a power cut) can be
closed honestly: `interrupted()` gives the events that say its calls in flight were lost and its
waiting tasks left unfinished. A task in a provider batch (`BatchSubmitted`) is not lost with the
process: its batch runs on at the provider, and the next session collects its line.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from swarm_tui.core.events import (
    AgentStepped,
    Attempt,
    AttemptEnded,
    AttemptStarted,
    BatchSubmitted,
    EngineEvent,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TasksAdded,
    TaskState,
    TaskSucceeded,
)
from swarm_tui.core.lanes import is_batch_endpoint

LOST_OUTCOME = "cancelled"

KEPT: dict[TaskState, frozenset[TaskState]] = {
    **{state: frozenset({TaskState.SUCCEEDED}) for state in TaskState},
    TaskState.CANCELLED: frozenset({TaskState.SUCCEEDED, TaskState.FAILED}),
}
"""The transition rule, for the board and the journal's tables alike: the states a task never
leaves for each state. A paid answer is never turned into anything else (another attempt's late
failure, a second process); a stop leaves finished work as it is."""

SETTLES: dict[type, TaskState] = {
    TaskSucceeded: TaskState.SUCCEEDED,
    TaskFailed: TaskState.FAILED,
    TaskRetrying: TaskState.RETRYING,
    AgentStepped: TaskState.RUNNING,
    TaskCancelled: TaskState.CANCELLED,
    TaskQueued: TaskState.QUEUED,
}
"""The state each event moves its task to (under `KEPT`). `AttemptStarted` and `BatchSubmitted`
start tasks running; `TasksAdded` queues new ones."""


def moves(current: TaskState | None, target: TaskState) -> bool:
    """Whether a task in `current` (None: not on the board) goes to `target` (see `KEPT`)."""
    return current not in KEPT[target]


@dataclass(frozen=True, slots=True)
class InFlight:
    number: int
    endpoint: str
    started_at: float
    """Wall-clock (epoch seconds) when the attempt started."""
    hedge: bool = False
    """A hedged backup call (the attempt's second)."""
    batch: bool = False
    """A line of a provider batch (no call on the wire: the provider runs it)."""


class TaskBoard:
    """Each task's state and attempt in flight, and how many tasks are in each state: kept as the
    events are applied (one O(1) update a move), so a run's outcome and the `--fail-on-error`
    guard read counts instead of walking a million states."""

    def __init__(self, states: Mapping[int, TaskState] | Iterable[int] = ()) -> None:
        self._states: dict[int, TaskState] = (
            dict(states) if isinstance(states, Mapping) else {i: TaskState.QUEUED for i in states}
        )
        self._counts: dict[TaskState, int] = _counts(self._states)
        self._flights: dict[int, InFlight] = {}
        self._backups: dict[int, InFlight] = {}
        self._batch_lines = 0

    @classmethod
    def of(cls, indices: Iterable[int], states: dict[int, TaskState] | None = None) -> TaskBoard:
        """The board of a run's tasks: each queued, but for what `states` says (a resumed run's).
        A `states` that names every task becomes the board's own (the caller gives it up): a
        million-task run holds one dict of states, not two, nor a copy."""
        board = cls()
        if states is not None and all(i in states for i in indices):
            board._states = states
        else:
            board._states = {i: TaskState.QUEUED for i in indices}
            board._states.update(states or {})
        board._counts = _counts(board._states)
        return board

    @property
    def states(self) -> Mapping[int, TaskState]:
        """Each task's state (read-only: only events move it, through `apply`)."""
        return self._states

    @property
    def in_flight(self) -> Mapping[int, InFlight]:
        """Each running task's attempt in flight (a batch line's too): its call, or its backup's
        once the first call of a hedged pair has ended."""
        return self._flights

    @property
    def backups(self) -> Mapping[int, InFlight]:
        """The backup call of each hedged attempt whose two calls both run."""
        return self._backups

    @property
    def live_tasks(self) -> int:
        """Tasks whose attempt is a call on the wire (each holds an in-flight slot)."""
        return len(self._flights) - self._batch_lines

    @property
    def live_calls(self) -> int:
        """Calls on the wire: each live attempt's, and the backups of hedged ones."""
        return len(self._flights) - self._batch_lines + len(self._backups)

    @property
    def batch_lines(self) -> int:
        """Tasks waiting as lines of a provider batch."""
        return self._batch_lines

    def apply(self, event: EngineEvent, at: float | None = None) -> None:
        """Move the board as `event` says (`at`: when it happened, epoch seconds; default now)."""
        match event:
            case AttemptStarted(index=i, hedge=False, number=number, endpoint=endpoint):
                self._move(i, TaskState.RUNNING)
                self._fly(i, InFlight(number, endpoint, time.time() if at is None else at))
            case AttemptStarted(index=i, number=number, endpoint=endpoint):  # a backup: no state moves
                self._backups[i] = InFlight(number, endpoint, time.time() if at is None else at, hedge=True)
            case AttemptEnded(attempt=attempt):
                self._call_ended(attempt)
            case BatchSubmitted(indices=indices, numbers=numbers, endpoint=endpoint):
                started = time.time() if at is None else at
                for i, number in zip(indices, numbers, strict=True):
                    self._move(i, TaskState.RUNNING)
                    self._fly(i, InFlight(number, endpoint, started, batch=True))
            case TaskSucceeded(attempt=attempt) | TaskFailed(attempt=attempt) | TaskRetrying(attempt=attempt):
                self._settle(attempt.index, SETTLES[type(event)])
            case AgentStepped(attempt=attempt):  # its model call is over; it runs its tools
                self._settle(attempt.index, TaskState.RUNNING)
            case TaskCancelled(index=i):
                self._settle(i, TaskState.CANCELLED)
            case TaskQueued(index=i):
                if moves(self._states.get(i), TaskState.QUEUED):
                    self._move(i, TaskState.QUEUED)
            case TasksAdded(indices=indices):
                for i in indices:
                    if i not in self._states:
                        self._move(i, TaskState.QUEUED)

    def _settle(self, index: int, state: TaskState) -> None:
        self._land(index)
        self._backups.pop(index, None)
        if moves(self._states.get(index), state):
            self._move(index, state)

    def _fly(self, index: int, flight: InFlight) -> None:
        """A task's attempt is in flight (a new attempt: whatever its earlier one had has ended)."""
        self._land(index)
        self._backups.pop(index, None)
        self._flights[index] = flight
        if flight.batch:
            self._batch_lines += 1

    def _land(self, index: int) -> None:
        flight = self._flights.pop(index, None)
        if flight is not None and flight.batch:
            self._batch_lines -= 1

    def _call_ended(self, attempt: Attempt) -> None:
        """One call of an attempt ended without deciding its task (a hedged pair's loser or failed
        call): the other, if it runs on, is the attempt's call in flight now."""
        i = attempt.index
        backup = self._backups.get(i)
        if backup is not None and backup.number == attempt.number:
            del self._backups[i]
            return
        flight = self._flights.get(i)
        if flight is None or flight.number != attempt.number:
            return
        if backup is not None:
            del self._backups[i]
            self._flights[i] = backup
        else:
            self._land(i)

    def _move(self, index: int, state: TaskState) -> None:
        states = self._states
        old = states.get(index)
        states[index] = state
        if old is not state:
            counts = self._counts
            if old is not None:
                counts[old] -= 1
            counts[state] += 1

    def count(self, state: TaskState) -> int:
        """How many tasks are in `state` now (kept, not counted)."""
        return self._counts[state]

    def interrupted(self, now: float | None = None) -> list[EngineEvent]:
        """What happened to a run whose process died: each call in flight was lost (an attempt
        that ended `cancelled`: it may have been billed), each task waiting out a backoff left
        unfinished. A task never started needs no event: queued is unfinished already."""
        now = time.time() if now is None else now
        closing: list[EngineEvent] = []
        for i, state in sorted(self.states.items()):
            flight = self._flights.get(i)
            if flight is not None and is_batch_endpoint(flight.endpoint):
                continue  # its line is still at the provider: the next session collects it
            if state is TaskState.RUNNING and flight is not None:
                latency_ms = max(0.0, (now - flight.started_at) * 1000.0)
                lost = Attempt(i, flight.number, flight.endpoint, flight.started_at, latency_ms, LOST_OUTCOME)
                closing.append(TaskCancelled(i, lost))
            elif state in (TaskState.RUNNING, TaskState.RETRYING):  # a queued task stays queued: unfinished
                closing.append(TaskCancelled(i))
        return closing


def _counts(states: Mapping[int, TaskState]) -> dict[TaskState, int]:
    """How many tasks are in each state (a C-speed count: a million states in a few milliseconds)."""
    return {**dict.fromkeys(TaskState, 0), **Counter(states.values())}
