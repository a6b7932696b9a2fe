"""The run-wide figures a view shows besides the board and the counts: the concurrency limit and
ceiling, the pause, the provider's rate limits, whether a run is on, the provider batches and the
judge's scores. Kept from the events alone, so a live view and an attached one that saw the same
events show the same figures.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from swarm_tui.core.events import (
    AnswerJudged,
    BatchEnded,
    BatchProgress,
    BatchSubmitted,
    ConcurrencyChanged,
    QualityDrift,
    RunFinished,
    RunStarted,
)

SPARK_SCORES = 60
"""Scores kept for the run panel's sparkline."""


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


class RunFigures:
    """The run-wide figures, moved by `RunView` (a method an event kind: the view dispatches once)."""

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

    def forget_run(self) -> None:
        """What earlier sessions said of their own run (its limit, its pause, its end) is not this
        session's: a resumed run's screen keeps their batches, scores and rate limits only."""
        self.limit = self.ceiling = None
        self.paused = self.started = self.stopped = False
        self.finished = None

    def judged(self, event: AnswerJudged) -> None:
        quality = self.quality
        quality.judged[event.index] = (event.score, event.reason)
        quality.recent.append(event.score)
        quality.rolling, quality.baseline = event.rolling, event.baseline

    def batch_submitted(self, event: BatchSubmitted, at: float | None) -> None:
        started = event.submitted_at or at or time.time()
        self.batches[event.batch_id] = BatchView(event.batch_id, len(event.indices), started)

    def batch_progress(self, event: BatchProgress, at: float | None) -> None:
        view = self.batches.get(event.batch_id)
        if view is not None:
            view.status, view.completed, view.failed = event.status, event.completed, event.failed
            view.next_poll_s, view.polled_at = event.next_poll_s, time.time() if at is None else at

    def batch_ended(self, event: BatchEnded) -> None:
        view = self.batches.get(event.batch_id)
        if view is not None:
            view.status, view.ended = event.status, event
            view.completed, view.failed = event.succeeded, event.failed + event.requeued

    def run_started(self, event: RunStarted) -> None:
        self.started, self.stopped, self.finished, self.paused = True, False, None, False
        self.limit, self.ceiling = event.concurrency, event.ceiling or event.concurrency

    def concurrency_changed(self, event: ConcurrencyChanged) -> None:
        self.limit = event.limit
        if event.ceiling is not None:
            self.ceiling = event.ceiling

    def run_finished(self, event: RunFinished) -> None:
        self.started, self.stopped, self.finished = False, True, event
