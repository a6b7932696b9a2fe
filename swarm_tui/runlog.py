"""The run's event log, read: a follower that replays it, and what a resumed run does with it.

The engine writes every event it emits to the journal's log (`core/codec.py`). Reading it
back through `LogFollower` gives the same events, in the same order, moving the same
`TaskBoard`: an attached view (`attach.py`), a resumed run's cumulative figures
(`replay_history`) and the closing of a run whose process died (`close_interrupted_run`) all
read the one log and reconstruct nothing.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .core.board import TaskBoard
from .core.events import (
    AnswerJudged,
    Attempt,
    BatchEnded,
    BatchProgress,
    BatchSubmitted,
    ConcurrencyChanged,
    EngineEvent,
    QualityDrift,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    TaskCancelled,
    TaskState,
)
from .core.notes import NOTE_TYPES
from .engine.stats import RunStats
from .journal import Journal

READ_BATCH = 5000
"""Log rows read per query: a long run is replayed in steps, never in one huge list."""

Listener = Callable[[EngineEvent], None]


@dataclass
class BatchView:
    """One provider batch as the lane panel shows it."""

    batch_id: str
    requests: int
    submitted_at: float
    """Epoch seconds (when the event was logged)."""
    status: str = "validating"
    completed: int = 0
    failed: int = 0
    next_poll_s: float | None = None
    polled_at: float | None = None
    ended: BatchEnded | None = None


@dataclass
class QualityView:
    """The judge's scores as the run panel and the grid show them."""

    judged: dict[int, tuple[float, str]] = field(default_factory=dict)
    """Score and reason of each judged answer, by task index."""
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=SPARK_SCORES))
    rolling: float | None = None
    baseline: float | None = None
    drifts: list[QualityDrift] = field(default_factory=list)


SPARK_SCORES = 60
"""Scores kept for the run panel's sparkline."""


class RunFigures:
    """The run-wide figures a view shows besides the board (limit, ceiling, pause, rate limits,
    whether a run is on), kept from the events alone: a live view and an attached one that
    saw the same events show the same figures."""

    def __init__(self, limit: int | None = None, ceiling: int | None = None) -> None:
        self.limit = limit
        self.ceiling = ceiling
        self.rate_limits: tuple[int | None, int | None] = (None, None)
        self.paused = False
        self.started = False
        """A run has started and not finished (its writer owes us a `RunFinished`)."""
        self.stopped = False
        self.finished: RunFinished | None = None
        self.batches: dict[str, BatchView] = {}
        """The run's provider batches (`--lane batch|auto`), in the order they were submitted."""
        self.quality = QualityView()
        """The judge's scores and the drifts it acted on (a run with `--judge`)."""

    def note(self, event: EngineEvent, at: float | None = None) -> None:
        """`at`: when the event happened (epoch seconds; default now)."""
        match event:
            case AnswerJudged(index=index, score=score, reason=reason):
                quality = self.quality
                quality.judged[index] = (score, reason)
                quality.recent.append(score)
                quality.rolling, quality.baseline = event.rolling, event.baseline
            case QualityDrift():
                self.quality.drifts.append(event)
            case BatchSubmitted(batch_id=batch_id, indices=indices, submitted_at=submitted_at):
                self.batches[batch_id] = BatchView(batch_id, len(indices), submitted_at or at or time.time())
            case BatchProgress(batch_id=batch_id) if batch_id in self.batches:
                view = self.batches[batch_id]
                view.status, view.completed, view.failed = event.status, event.completed, event.failed
                view.next_poll_s, view.polled_at = event.next_poll_s, time.time() if at is None else at
            case BatchEnded(batch_id=batch_id) if batch_id in self.batches:
                view = self.batches[batch_id]
                view.status, view.ended = event.status, event
                view.completed, view.failed = event.succeeded, event.failed + event.requeued
            case RunStarted(concurrency=limit, ceiling=ceiling):
                self.started, self.stopped, self.finished, self.paused = True, False, None, False
                self.limit, self.ceiling = limit, ceiling or limit
            case ConcurrencyChanged(limit=limit, ceiling=ceiling):
                self.limit = limit
                if ceiling is not None:
                    self.ceiling = ceiling
            case RunPaused():
                self.paused = True
            case RunResumed():
                self.paused = False
            case RateLimitsLearned(rpm=rpm, tpm=tpm):
                self.rate_limits = (rpm, tpm)
            case RunStopping():
                self.stopped = True
            case RunFinished():
                self.started, self.stopped, self.finished = False, True, event


class LogFollower(RunFigures):
    """The run as its journal's log tells it: a `TaskBoard`, the run's figures, and every event
    handed to the listeners, at the time it was logged (`now`, for a `RunStats`)."""

    def __init__(self, journal: Journal, indices: Iterable[int]) -> None:
        super().__init__()
        self.journal = journal
        self.board = TaskBoard(indices)
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

    @property
    def view(self) -> Mapping[int, TaskState]:
        return self.board.states

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def clock(self) -> float:
        return self.now if self.now is not None else time.time()

    def poll(self) -> int:
        """Deliver what was logged since the last poll; returns how many events were delivered."""
        self.heartbeat = self.journal.meta().get("heartbeat")
        count = 0
        while rows := self.journal.log_since(self.seq, READ_BATCH):
            for seq, at, event in rows:
                self.seq = seq
                count += self._take(event, at)
        return count

    def close_interrupted(self, at: float) -> int:
        """The writer died mid-run: show its calls in flight as lost and its waiting tasks as
        unfinished, as the run's next session will log them."""
        if not self.started:
            return 0
        self.started = False
        self.stopped = True
        closing = self.board.interrupted(at)
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
        self.note(event, at)
        return self._deliver(event, at)

    def _deliver(self, event: EngineEvent, at: float) -> int:
        self.board.apply(event, at)
        self.last_at = at
        self.now = at
        try:
            for listener in self._listeners:
                listener(event)
        finally:
            self.now = None
        return 1


def replay_history(journal: Journal, stats: RunStats) -> list[EngineEvent]:
    """Feed the run's log so far into `stats` (a live engine's, before it resumes a run) so that
    its counts, tokens, cost and latencies are the run's, not just this session's. Returns the
    events, for the screen's error log and grid.

    Replayed events do not count toward the recent-rate window (req/s, tok/s): they happened
    before this session started."""
    events: list[EngineEvent] = []
    wall, now = time.time(), stats.clock()
    follower = LogFollower(journal, ())
    follower.subscribe(stats.observe)
    follower.subscribe(events.append)
    original_clock = stats.clock
    stats.clock = lambda: now - (wall - follower.clock())
    try:
        follower.poll()
    finally:
        stats.clock = original_clock
    stats._recent.clear()  # RunStats has no public way to observe without rating; see module notes
    return events


def close_interrupted_run(journal: Journal) -> int:
    """A run whose last session never finished (its process was killed): journal what the log
    implies, before a new session starts. Each call that was in flight was lost (an attempt
    ended `cancelled`: it may have been billed) and each waiting task is left unfinished.
    Returns how many tasks were closed (0 for a run that ended normally)."""
    if journal.run_ended():  # the usual resume: nothing to close, no need to replay the log here
        return 0
    follower = LogFollower(journal, ())
    follower.poll()
    if not follower.started:
        return 0
    beat = journal.meta().get("heartbeat") or {}
    at = max(beat.get("at") or 0.0, follower.last_at or 0.0) or time.time()
    closing = [e for e in follower.board.interrupted(at) if isinstance(e, TaskCancelled)]
    lost: list[Attempt] = [e.attempt for e in closing if e.attempt is not None]
    journal.record_cancelled([e.index for e in closing], lost, closing)
    return len(closing)
