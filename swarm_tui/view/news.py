"""A run's progress said plainly: its state changes as news, its pace, its round. No Textual.

The headless log (`headless.py`) and the console (`ui/`) tell a person who is not watching the
same things in the same words: that the run was paused (from wherever: an attached view's pause
reaches the engine, whose event reaches every listener), that the user moved the concurrency
ceiling, that new attempts fail over, that the judge saw the quality drift, that a budget or an
error rate stopped dispatch, that a provider batch went out or came back, that a round of a
multi-round swarm ended. `narrate` turns one event into `News` (the round it may name is the
view's: `view.RunView`); `SessionPace` gives an ETA at the pace of the session that runs now (a
resumed run's earlier work, and the hours between its sessions, do not count).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from swarm_tui.core.events import (
    AgentSilent,
    BatchEnded,
    BatchSubmitted,
    ConcurrencyChanged,
    EndpointSwitched,
    EngineEvent,
    PhaseAttempt,
    PhaseChanged,
    PlanChanged,
    QualityDrift,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    RunSuspended,
    SuspensionEnded,
)
from swarm_tui.engine.stats import RunStats

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
    event: EngineEvent | None = field(default=None, compare=False, repr=False)
    """What it reports (a console words its own notices from it; the log writes none of it)."""


def counts_text(finished: RunFinished) -> str:
    """ "97 done, 3 failed" (", 5 unfinished" when some were not run)."""
    text = f"{finished.succeeded} done, {finished.failed} failed"
    return text + (f", {finished.cancelled} unfinished" if finished.cancelled else "")


def round_of(detail: str) -> tuple[int, int] | None:
    """(round, rounds) named in a phase's detail, if it names one."""
    match = ROUND.search(detail)
    return (int(match.group(1)), int(match.group(2))) if match else None


Round = tuple[int, int] | None
"""(round, rounds) of a multi-round swarm, from its fan-out phase; None for one round."""


def _run_started(event: RunStarted, round_: Round) -> News:
    ceiling = event.ceiling or event.concurrency
    under = f" (ceiling {ceiling})" if ceiling != event.concurrency else ""
    return News(
        "run_started",
        f"run started: {event.pending} of {event.total} tasks to do, concurrency limit {event.concurrency}{under}",
        fields={"total": event.total, "pending": event.pending, "limit": event.concurrency, "ceiling": ceiling},
        event=event,
    )


def _paused(event: RunPaused, round_: Round) -> News:
    return News("paused", "paused: nothing new is sent; the calls in flight finish", "warning", event=event)


def _resumed(event: RunResumed, round_: Round) -> News:
    return News("resumed", "resumed: dispatch goes on", event=event)


def _limit(event: ConcurrencyChanged, round_: Round) -> News | None:
    if event.ceiling is None:  # the adaptive limit's own move; the user's (a key, an attached view) has a ceiling
        return None
    return News(
        "limit",
        f"concurrency ceiling set to {event.ceiling} ({event.reason})",
        fields={"ceiling": event.ceiling, "limit": event.limit, "by": event.reason},
        event=event,
    )


def switch_text(event: EndpointSwitched) -> str:
    """Where new attempts go now and from where (the door the switch is about), with why: the
    news line, the console's notification and its phase say the same."""
    if event.source and event.source != event.endpoint:
        return f"new attempts go from {event.source} to {event.endpoint}: {event.reason}"
    if event.source:
        return f"new attempts go to {event.endpoint} again: {event.reason}"
    return f"new attempts go to {event.endpoint}: {event.reason}"  # a log written before `source`


def _failover(event: EndpointSwitched, round_: Round) -> News:
    return News(
        "failover",
        switch_text(event),
        "warning",
        fields={"endpoint": event.endpoint, "source": event.source, "reason": event.reason},
        alert=True,
        event=event,
    )


def _plan(event: PlanChanged, round_: Round) -> News:
    finish = time.strftime("%H:%M:%S", time.localtime(event.finish_at)) if event.finish_at else "not known yet"
    deadline = time.strftime("%H:%M:%S", time.localtime(event.deadline_at))
    cost = f", ≈${event.cost_usd:.4f}" if event.cost_usd is not None else ""
    head = "plan" if event.feasible else "plan: the deadline or the budget cannot hold"
    return News(
        "plan",
        f"{head}: {event.batch:,} tasks as batches, {event.live:,} live; ends {finish} (deadline {deadline}){cost}; "
        f"{event.reason}",
        "info" if event.feasible else "warning",
        fields={
            "live": event.live,
            "batch": event.batch,
            "finish_at": event.finish_at,
            "deadline_at": event.deadline_at,
            "cost_usd": event.cost_usd,
            "feasible": event.feasible,
            "reason": event.reason,
        },
        alert=not event.feasible,
        event=event,
    )


def _drift(event: QualityDrift, round_: Round) -> News:
    return News(
        "drift",
        f"quality drift in round {event.round}: {event.detail or event.action}",
        "warning",
        fields={"round": event.round, "rolling": event.rolling, "baseline": event.baseline, "action": event.action},
        alert=True,
        event=event,
    )


def _stopping(event: RunStopping, round_: Round) -> News:
    return News(
        "stopping", f"stopping: {event.reason}", "warning", fields={"reason": event.reason}, alert=True, event=event
    )


def _batch_submitted(event: BatchSubmitted, round_: Round) -> News:
    return News(
        "batch_submitted",
        f"batch {event.batch_id} submitted: {len(event.indices)} lines",
        fields={"batch_id": event.batch_id, "lines": len(event.indices)},
        event=event,
    )


def _batch_ended(event: BatchEnded, round_: Round) -> News:
    again = f", {event.requeued} sent again" if event.requeued else ""
    left = f", {event.unfinished} unfinished" if event.unfinished else ""
    return News(
        "batch_ended",
        f"batch {event.batch_id} {event.status}: {event.succeeded} done, {event.failed} failed{again}{left}",
        "info" if event.status == "completed" else "warning",
        fields={
            "batch_id": event.batch_id,
            "status": event.status,
            "succeeded": event.succeeded,
            "failed": event.failed,
            "requeued": event.requeued,
            "unfinished": event.unfinished,
        },
        event=event,
    )


def _phase(event: PhaseChanged, round_: Round) -> News:
    found = round_of(event.detail)
    fields: dict[str, Any] = {"phase": event.phase}
    if found is not None:
        fields |= {"round": found[0], "rounds": found[1]}
    return News("phase", f"{event.phase}: {event.detail}" if event.detail else event.phase, fields=fields, event=event)


def suspended_text(event: RunSuspended) -> str:
    """What a suspension's banner and log line say: what happened and what to do."""
    what = "quota or spend limit spent" if event.kind == "quota" else "the provider asked for a long wait"
    if event.probe_every_s is None:
        return f"suspended ({what}): {event.reason}; stopping (--on-quota stop): resume the run later"
    bound = f", stops after {_seconds(event.until_s)} (--max-suspend)" if event.until_s is not None else ""
    todo = "top up the account or raise its limit" if event.kind == "quota" else "nothing to do"
    return (
        f"suspended ({what}): {event.reason}; nothing new is sent, calls that meet it wait in line, none fails; "
        f"a probe every {_seconds(event.probe_every_s)} or more resumes the run by itself{bound}; {todo}"
    )


def _seconds(value: float) -> str:
    return f"{value / 3600:g}h" if value >= 3600 else f"{value / 60:g}m" if value >= 120 else f"{value:g}s"


def _suspended(event: RunSuspended, round_: Round) -> News:
    return News(
        "suspended",
        suspended_text(event),
        "warning",
        fields={
            "kind": event.kind,
            "reason": event.reason,
            "endpoint": event.endpoint,
            "probe_every_s": event.probe_every_s,
            "max_suspend_s": event.until_s,
        },
        alert=True,
        event=event,
    )


def _unsuspended(event: SuspensionEnded, round_: Round) -> News:
    return News(
        "resumed_from_suspension",
        f"the provider answers again: the run sends again after {event.suspended_s:.0f}s suspended ({event.kind})",
        fields={"kind": event.kind, "suspended_s": event.suspended_s},
        alert=True,
        event=event,
    )


def silent_text(event: AgentSilent) -> str:
    expected = f", where {event.expected_s:.1f}s was expected" if event.expected_s is not None else ""
    what = "no next chunk" if event.streaming else "no word"
    return f"agent {event.index + 1} silent: {what} for {event.silent_s:.0f}s{expected} (attempt {event.number})"


def _silent(event: AgentSilent, round_: Round) -> News:
    return News(
        "silent",
        silent_text(event),
        "warning",
        fields={
            "agent": event.index + 1,
            "attempt": event.number,
            "silent_s": event.silent_s,
            "expected_s": event.expected_s,
            "streaming": event.streaming,
        },
        alert=True,
        event=event,
    )


def _step_error(event: PhaseAttempt, round_: Round) -> News | None:
    attempt, error = event.attempt, event.attempt.error
    if error is None or event.phase == "probe":  # a suspension's probe: its outcome is the suspension's news
        return None
    who = PHASE_LABELS.get(event.phase, event.phase)
    again = "retrying" if attempt.outcome == "retry" else "gave up"
    return News(
        "step_error",
        f"{who} call failed ({again}): {error.kind}: {error.message}",
        "warning" if attempt.outcome == "retry" else "error",
        fields={"step": event.phase, "error": str(error.kind), "status": attempt.status, "outcome": attempt.outcome},
        event=event,
    )


def _round_finished(event: RunFinished, round_: Round) -> News | None:
    if round_ is None or round_[0] >= round_[1] or event.aborted or event.stop_reason:
        return None  # the run's end (the front end says it), not a round with more to come
    number, rounds = round_
    return News(
        "round_finished",
        f"round {number}/{rounds} finished: {counts_text(event)}",
        fields={"round": number, "rounds": rounds, "succeeded": event.succeeded, "failed": event.failed},
        event=event,
    )


NARRATED: dict[type, Callable[[Any, Round], News | None]] = {
    RunStarted: _run_started,
    RunPaused: _paused,
    RunResumed: _resumed,
    ConcurrencyChanged: _limit,
    EndpointSwitched: _failover,
    PlanChanged: _plan,
    QualityDrift: _drift,
    RunStopping: _stopping,
    BatchSubmitted: _batch_submitted,
    BatchEnded: _batch_ended,
    PhaseChanged: _phase,
    PhaseAttempt: _step_error,
    RunFinished: _round_finished,
    RunSuspended: _suspended,
    SuspensionEnded: _unsuspended,
    AgentSilent: _silent,
}
"""The events that may be news, each with its sentence: (event, the round on now) -> `News` or None."""


def narrate(event: EngineEvent, round_: Round = None) -> News | None:
    """The news of one event (None: it is none), `round_` the round a multi-round swarm is on
    after it (`RunView` keeps it, from the fan-out's phases)."""
    say = NARRATED.get(type(event))
    return say(event, round_) if say is not None else None


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
