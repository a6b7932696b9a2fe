"""A run's progress said plainly: its state changes as news, its pace, its round. No Textual.

The headless log (`headless.py`) and the console (`ui/`) tell a person who is not watching the
same things in the same words: that the run was paused (from wherever: an attached view's pause
reaches the engine, whose event reaches every listener), that the user moved the concurrency
ceiling, that new attempts fail over, that the judge saw the quality drift, that a budget or an
error rate stopped dispatch, that a provider batch went out or came back, that a round of a
multi-round swarm ended. `Narrator` turns the engine's events into `News`; `SessionPace` gives an
ETA at the pace of the session that runs now (a resumed run's earlier work, and the hours
between its sessions, do not count).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .core.events import (
    BatchEnded,
    BatchSubmitted,
    ConcurrencyChanged,
    EndpointSwitched,
    EngineEvent,
    PhaseAttempt,
    PhaseChanged,
    QualityDrift,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
)
from .engine.stats import RunStats

ROUND = re.compile(r"\bround (\d+)/(\d+)\b")
"""How the swarm pipeline names a round in its fan-out phase's detail ("round 3/6: 150 agents")."""

PHASE_LABELS = {"plan": "planner", "aggregate": "aggregator", "warm-up": "warm-up", "judge": "judge"}
"""Calls outside the task grid (`PhaseAttempt`), by the step that made them."""


@dataclass(frozen=True, slots=True)
class News:
    """One state change, said in a sentence. `kind` is a stable key (the JSON log's `event`)."""

    kind: str
    text: str
    level: str = "info"
    """info, warning or error."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """What a log shipper may want apart (the JSON log's other keys)."""
    alert: bool = False
    """Worth ringing the terminal's bell for, when the user asked for one: a stop, a drift."""


def counts_text(finished: RunFinished) -> str:
    """ "97 done, 3 failed" (", 5 unfinished" when some were not run)."""
    text = f"{finished.succeeded} done, {finished.failed} failed"
    return text + (f", {finished.cancelled} unfinished" if finished.cancelled else "")


def round_of(detail: str) -> tuple[int, int] | None:
    """(round, rounds) named in a phase's detail, if it names one."""
    match = ROUND.search(detail)
    return (int(match.group(1)), int(match.group(2))) if match else None


class Narrator:
    """The engine's events as news, with what the news depends on: the round a multi-round swarm
    is on, and whether the run is paused. Feed it every event, in order (`take`)."""

    def __init__(self) -> None:
        self.round: tuple[int, int] | None = None
        """(round, rounds) of a multi-round swarm, from its fan-out phase; None for one round."""
        self.paused = False
        self.phase = ""

    @property
    def rounds_left(self) -> bool:
        """A round of a multi-round swarm is on and more follow it."""
        return self.round is not None and self.round[0] < self.round[1]

    def take(self, event: EngineEvent) -> News | None:
        match event:
            case RunStarted(total=total, pending=pending, concurrency=limit, ceiling=ceiling):
                self.paused = False
                ceiling = ceiling or limit
                under = f" (ceiling {ceiling})" if ceiling != limit else ""
                return News(
                    "run_started",
                    f"run started: {pending} of {total} tasks to do, concurrency limit {limit}{under}",
                    fields={"total": total, "pending": pending, "limit": limit, "ceiling": ceiling},
                )
            case RunPaused():
                self.paused = True
                return News("paused", "paused: nothing new is sent; the calls in flight finish", "warning")
            case RunResumed():
                self.paused = False
                return News("resumed", "resumed: dispatch goes on")
            case ConcurrencyChanged(limit=limit, reason=reason, ceiling=ceiling) if ceiling is not None:
                # the user's move (a key, an attached view): the adaptive limit's own moves have no ceiling
                return News(
                    "limit",
                    f"concurrency ceiling set to {ceiling} ({reason})",
                    fields={"ceiling": ceiling, "limit": limit, "by": reason},
                )
            case EndpointSwitched(endpoint=endpoint, reason=reason):
                return News(
                    "failover",
                    f"new attempts go to {endpoint}: {reason}",
                    "warning",
                    fields={"endpoint": endpoint, "reason": reason},
                    alert=True,
                )
            case QualityDrift(rolling=rolling, baseline=baseline, action=action, detail=detail, round=round_number):
                return News(
                    "drift",
                    f"quality drift in round {round_number}: {detail or action}",
                    "warning",
                    fields={"round": round_number, "rolling": rolling, "baseline": baseline, "action": action},
                    alert=True,
                )
            case RunStopping(reason=reason):
                return News("stopping", f"stopping: {reason}", "warning", fields={"reason": reason}, alert=True)
            case BatchSubmitted(batch_id=batch_id, indices=indices):
                return News(
                    "batch_submitted",
                    f"batch {batch_id} submitted: {len(indices)} lines",
                    fields={"batch_id": batch_id, "lines": len(indices)},
                )
            case BatchEnded(batch_id=batch_id, status=status) as ended:
                again = f", {ended.requeued} sent again" if ended.requeued else ""
                left = f", {ended.unfinished} unfinished" if ended.unfinished else ""
                return News(
                    "batch_ended",
                    f"batch {batch_id} {status}: {ended.succeeded} done, {ended.failed} failed{again}{left}",
                    "info" if status == "completed" else "warning",
                    fields={
                        "batch_id": batch_id,
                        "status": status,
                        "succeeded": ended.succeeded,
                        "failed": ended.failed,
                        "requeued": ended.requeued,
                        "unfinished": ended.unfinished,
                    },
                )
            case PhaseChanged(phase=phase, detail=detail):
                self.phase = phase
                found = round_of(detail)
                if found is not None:
                    self.round = found
                fields: dict[str, Any] = {"phase": phase}
                if found is not None:
                    fields |= {"round": found[0], "rounds": found[1]}
                return News("phase", f"{phase}: {detail}" if detail else phase, fields=fields)
            case PhaseAttempt(phase=phase, attempt=attempt) if attempt.error is not None:
                who = PHASE_LABELS.get(phase, phase)
                error = attempt.error
                again = "retrying" if attempt.outcome == "retry" else "gave up"
                return News(
                    "step_error",
                    f"{who} call failed ({again}): {error.kind}: {error.message}",
                    "warning" if attempt.outcome == "retry" else "error",
                    fields={
                        "step": phase,
                        "error": str(error.kind),
                        "status": attempt.status,
                        "outcome": attempt.outcome,
                    },
                )
            case RunFinished() as finished if self.rounds_left and not finished.aborted and not finished.stop_reason:
                number, rounds = self.round or (0, 0)
                return News(
                    "round_finished",
                    f"round {number}/{rounds} finished: {counts_text(finished)}",
                    fields={
                        "round": number,
                        "rounds": rounds,
                        "succeeded": finished.succeeded,
                        "failed": finished.failed,
                    },
                )
        return None


class SessionPace:
    """The ETA at the pace of the session that runs now: the tasks left, at the rate this session
    has finished tasks since its run started (a resumed run's earlier sessions do not count, nor
    the time between them; a retry after the end starts a new pace). Subscribe it after the
    `RunStats` it reads, so that a `RunStarted` has been counted when it notes the start."""

    def __init__(self, stats: RunStats, clock: Callable[[], float] | None = None) -> None:
        self.stats = stats
        self._clock = clock
        self.started_at: float | None = None
        self.first_started_at: float | None = None
        self.ended_at: float | None = None
        self._done_at_start = 0
        self.running = False

    def now(self) -> float:
        return self._clock() if self._clock is not None else self.stats.clock()

    def observe(self, event: EngineEvent) -> None:
        match event:
            case RunStarted():
                self.started_at, self._done_at_start, self.running = self.now(), self.stats.done, True
                self.ended_at = None
                if self.first_started_at is None:
                    self.first_started_at = self.started_at
            case RunFinished():
                self.running, self.ended_at = False, self.now()

    @property
    def session_elapsed_s(self) -> float | None:
        """From this session's first start to its last end (or now, while it runs)."""
        if self.first_started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else self.now()
        return max(0.0, end - self.first_started_at)

    def eta_s(self) -> float | None:
        """Seconds to the end at this pace; 0 when nothing is left; None before a first task of
        this session is done, and when no run is on."""
        stats = self.stats
        if not self.running or self.started_at is None:
            return None
        remaining = stats.total - stats.done - stats.cancelled
        if remaining <= 0:
            return 0.0
        done_now = stats.done - self._done_at_start
        if done_now <= 0:
            return None
        return remaining * (self.now() - self.started_at) / done_now


def average_rates(stats: RunStats, elapsed_s: float) -> tuple[float, float]:
    """(requests/s, tokens/s) over a whole run of `elapsed_s`: what an ended run's figures show
    (the recent rate would stay frozen at its last seconds')."""
    if elapsed_s <= 0:
        return 0.0, 0.0
    return stats.sent / elapsed_s, stats.usage.total / elapsed_s
