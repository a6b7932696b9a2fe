"""The run's event log, read: a follower that replays it, and what a resumed run does with it.

The engine writes every event it emits to the journal's log (`core/codec.py`). Reading it
back through `LogFollower` gives the same events, in the same order, through the same
`RunView` a live screen uses: an attached view (`attach.py`), a resumed run's cumulative figures
(`earlier_session_events`) and the closing of a run whose process died (`close_interrupted_run`) all
read the one log and reconstruct nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from swarm_tui.core.events import Attempt, EngineEvent, RunFinished, TaskCancelled, TaskState
from swarm_tui.core.notes import NOTE_TYPES
from swarm_tui.engine.stats import RunStats
from swarm_tui.journal import Journal
from swarm_tui.view.run_view import RunView

READ_BATCH = 5000
"""Log rows read per query: a long run is replayed in steps, never in one huge list."""

Listener = Callable[[EngineEvent], None]


class LogFollower(RunView):
    """The run as its journal's log tells it: a `RunView` of its own board and `RunStats`, each
    event applied at the time it was logged (`now`, for the stats' clock), then handed to the
    listeners."""

    def __init__(
        self,
        journal: Journal,
        indices: Iterable[int] = (),
        *,
        clock: Callable[[], float] = time.monotonic,
        screen: bool = True,
    ) -> None:
        super().__init__(indices, clock=clock, screen=screen)
        self.journal = journal
        self.seq = 0
        """The last log row delivered."""
        self.heartbeat: dict[str, Any] | None = None
        self.last_at: float | None = None
        """When the last event was logged (epoch seconds)."""
        self.now: float | None = None
        """While an event is delivered: the time it was logged (see `clock`)."""
        self._closed_here: set[int] = set()
        """Tasks this view closed because the writer died; its next session closes them too."""
        self._listeners: list[Listener] = []

    # What an attached view reads of a follower, as of one of a schema-1 journal
    # (`journal.migrate.JournalFollower`): the states, the end, the pause, the limit and ceiling.

    @property
    def view(self) -> Mapping[int, TaskState]:
        return self.states

    @property
    def finished(self) -> RunFinished | None:
        return self.figures.finished

    @property
    def paused(self) -> bool:
        return self.figures.paused

    @property
    def limit(self) -> int | None:
        return self.figures.limit

    @property
    def ceiling(self) -> int | None:
        return self.figures.ceiling

    @property
    def started(self) -> bool:
        """The log's last run started and has not logged its end (its writer owes a `RunFinished`)."""
        return self.figures.started

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def clock(self) -> float:
        return self.now if self.now is not None else time.time()

    def poll(self) -> int:
        """Deliver what was logged since the last poll; returns how many events were delivered."""
        self.heartbeat = self.journal.queries.meta().get("heartbeat")
        count = 0
        while rows := self.journal.history.log_since(self.seq, READ_BATCH):
            for seq, at, event in rows:
                self.seq = seq
                count += self._take(event, at)
        return count

    def close_interrupted(self, at: float) -> int:
        """The writer died mid-run: show its calls in flight as lost and its waiting tasks as
        unfinished, as the run's next session will log them."""
        if not self.figures.started:
            return 0
        self.figures.started, self.figures.stopped = False, True
        closing = self.board.interrupted(at) if self.board is not None else []
        for event in closing:
            self._deliver(event, at)
            self._closed_here.add(event.index)  # type: ignore[union-attr]
        return len(closing)

    def _take(self, event: EngineEvent, at: float) -> int:
        if isinstance(event, NOTE_TYPES):  # logged beside the events, not emitted to a live view
            return 0
        index = getattr(event, "index", None)
        if index is not None and index in self._closed_here:
            self._closed_here.discard(index)
            if isinstance(event, TaskCancelled):
                return 0  # the closing this view already showed
        return self._deliver(event, at)

    def _deliver(self, event: EngineEvent, at: float) -> int:
        self.last_at = at
        self.now = at
        try:
            self.observe(event, at)
            for listener in self._listeners:
                listener(event)
        finally:
            self.now = None
        return 1


def earlier_session_events(journal: Journal, stats: RunStats) -> list[EngineEvent]:
    """Feed the run's log so far into `stats` (a live engine's, before it resumes a run) so that
    its counts, tokens, cost and latencies are the run's, not just this session's. Returns the
    events, for the screen's error log and grid.

    Replayed events do not count toward the recent-rate window (req/s, tok/s): they happened
    before this session started."""
    events: list[EngineEvent] = []
    wall, now = time.time(), stats.clock()
    follower = LogFollower(journal, screen=False)
    follower.subscribe(stats.observe)
    follower.subscribe(events.append)
    original_clock = stats.clock
    stats.clock = lambda: now - (wall - follower.clock())
    try:
        follower.poll()
    finally:
        stats.clock = original_clock
    stats.forget_recent()
    return events


def close_interrupted_run(journal: Journal) -> int:
    """A run whose last session never finished (its process was killed): journal what the log
    implies, before a new session starts. Each call that was in flight was lost (an attempt
    ended `cancelled`: it may have been billed) and each waiting task is left unfinished.
    Returns how many tasks were closed (0 for a run that ended normally)."""
    if journal.history.run_ended():  # the usual resume: nothing to close, no need to replay the log here
        return 0
    follower = LogFollower(journal, screen=False)
    follower.poll()
    if not follower.started or follower.board is None:
        return 0
    beat = journal.queries.meta().get("heartbeat") or {}
    at = max(beat.get("at") or 0.0, follower.last_at or 0.0) or time.time()
    closing = [e for e in follower.board.interrupted(at) if isinstance(e, TaskCancelled)]
    lost: list[Attempt] = [e.attempt for e in closing if e.attempt is not None]
    journal.records.record_cancelled([e.index for e in closing], lost, closing)
    return len(closing)
