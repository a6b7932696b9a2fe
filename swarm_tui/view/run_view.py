"""`RunView`: what every front end shows of a run, kept from the run's events alone. No Textual.

One reducer for the console, an attached view, the headless log and the tests: the board (the
task states, `core.board.TaskBoard`), the counts and figures (`RunStats`), the run-wide figures
(limit, ceiling, pause, rate limits, batches, the judge's scores: `RunFigures`), the phase
(`PhaseView`), the per-agent facts (step, tools, batch line, cache replay, score, latency, attempt
in flight: `AgentFacts`) and the session's pace (`SessionPace`). A live view and an attached one
that saw the same events show the same, because they are the same code fed the same events.

Who feeds it: a run source, synchronously, as the events are delivered (`observe` is a
listener), so that every figure is as of its event's time (an attached view's are the times the
events were logged). A live engine keeps its own board and `RunStats` (it decides by them): a
view of it reads those (`states=`, `stats=`) and applies nothing to them a second time.

What a screen paints: `observe` also collects what changed (`Changes`: the agents whose cells
moved, new error-log rows, the latencies for the sparkline, the news to announce, the run's
end) until the screen takes them (`take_changes`, at its own pace: 10 Hz). So a burst of a
thousand events costs one repaint, and per event the view does a dict lookup and a few O(1)
updates. `apply(events)` does both at once, for callers that hold the events themselves.

A resumed run's earlier sessions are shown with `replay`: what they did, never announced as news,
and not counted as this session's pace.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.call_errors import ANSWER_ERRORS
from swarm_tui.core.events import (
    AgentSilent,
    AgentStepped,
    AnswerJudged,
    Attempt,
    AttemptEnded,
    AttemptStarted,
    BatchEnded,
    BatchProgress,
    BatchSubmitted,
    CallProgress,
    ConcurrencyChanged,
    DispatchWaiting,
    EndpointSwitched,
    EngineEvent,
    PhaseAttempt,
    PhaseChanged,
    QualityDrift,
    RateGateClosed,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    RunSuspended,
    SuspensionEnded,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TasksAdded,
    TaskState,
    TaskSucceeded,
    ToolCallEnded,
)
from swarm_tui.core.lanes import CACHE, lane_of
from swarm_tui.engine.stats import RunStats
from swarm_tui.view.agents import AgentFacts, InFlight
from swarm_tui.view.endpoints import EndpointFigures
from swarm_tui.view.failures import Failure
from swarm_tui.view.family import AgentTree
from swarm_tui.view.figures import RunFigures
from swarm_tui.view.liveness import LivenessView
from swarm_tui.view.news import News, SessionPace, narrate, silent_text
from swarm_tui.view.phase import PhaseView


@dataclass(slots=True)
class Changes:
    """What the events since the last `take_changes` changed, for a screen to paint."""

    events: int = 0
    """How many events (a screen that saw none may skip its repaint)."""
    agents: set[int] = field(default_factory=set)
    """Agents whose cell (state, step, tools, batch line, score) or detail changed."""
    started: set[int] = field(default_factory=set)
    """Agents in flight again since their last retry row (the error log says they were retried)."""
    failures: list[Failure] = field(default_factory=list)
    """New rows of the error log, in order."""
    latencies: list[float] = field(default_factory=list)
    """Latencies (ms) of the answers that came (the sparkline's bars)."""
    news: list[News] = field(default_factory=list)
    """State changes worth a sentence (none from `replay`)."""
    finished: RunFinished | None = None
    """The run ended (not a round of a multi-round swarm with more to come)."""
    finished_phase: tuple[str, str] = ("", "")
    """The phase and its detail as the run ended (later events of the same drain may move them)."""

    def __bool__(self) -> bool:
        return self.events > 0


class RunView:
    """A run as its events tell it (see the module's notes)."""

    def __init__(
        self,
        indices: Iterable[int] = (),
        *,
        states: Mapping[int, TaskState] | None = None,
        stats: RunStats | None = None,
        clock: Callable[[], float] = time.monotonic,
        screen: bool = True,
    ) -> None:
        """`states`, `stats`: a live engine's own (it moves them itself); None: the view keeps its
        own board (of `indices`) and `RunStats` (on `clock`). `screen`: keep the agents' facts and
        collect what changed, for a screen to paint; without one (a headless log, a resume
        closing a killed run) the view keeps the figures, the phase, the pace and the news only,
        and a task's events cost it a dict lookup."""
        self.board: TaskBoard | None = TaskBoard(indices) if states is None else None
        """The view's own board (None: it reads a live engine's states)."""
        self.states: Mapping[int, TaskState] = states if states is not None else self.board.states  # type: ignore[union-attr]
        self.stats = stats if stats is not None else RunStats(clock=clock)
        self._counts_stats = stats is None
        self.figures = RunFigures()
        self.endpoints = EndpointFigures()
        """Each door of a routed run (the run panel's endpoint rows); none for a single endpoint."""
        self.phases = PhaseView()
        self.agents = AgentFacts()
        self.family = AgentTree()
        """The agents an orchestrator spawned: parents, depths, levels and the critical path."""
        self.liveness = LivenessView()
        """Where agents stand and why beyond their state (what the line waits for, streams, silences)."""
        self.pace = SessionPace(self.stats)
        """The ETA at the pace of the session that runs now (never moved by `replay`)."""
        self._pending: Changes | None = Changes() if screen else None
        self._replaying = False
        self._on: dict[type, Callable[[Any, float | None], None]] = {
            BatchSubmitted: self._batch_submitted,
            BatchProgress: self._batch_progress,
            BatchEnded: self._batch_ended,
            AnswerJudged: self._judged,
            QualityDrift: self._drift,
            RunStarted: self._run_started,
            RunFinished: self._run_finished,
            RunPaused: self._paused,
            RunResumed: self._resumed,
            ConcurrencyChanged: self._concurrency,
            RateLimitsLearned: self._rate_limits,
            RunStopping: self._stopping,
            RateGateClosed: self._phase_only,
            EndpointSwitched: self._switched,
            PhaseChanged: self._phase_only,
            TasksAdded: self._tasks_added,
            AgentStepped: self._family_stepped,
            ToolCallEnded: self._family_tool_ended,
            DispatchWaiting: self._dispatch_waiting,
            RunSuspended: self._suspended,
            SuspensionEnded: self._unsuspended,
            CallProgress: self._progress,
            AgentSilent: self._silent,
        }
        """One method an event kind: a dict lookup per event, not a walk through a `match`."""
        if screen:  # the events of one task: what its cell and its error-log rows show
            self._on |= {
                AttemptStarted: self._attempt_started,
                TaskSucceeded: self._succeeded,
                TaskRetrying: self._retrying,
                TaskFailed: self._failed,
                AttemptEnded: self._attempt_ended,
                TaskQueued: self._left,
                TaskCancelled: self._cancelled,
                AgentStepped: self._stepped,
                ToolCallEnded: self._tool_call_ended,
                PhaseAttempt: self._phase_attempt,
            }
        else:  # a log's counts by reason: which calls stream or are silent, and until when
            self._on |= {
                AttemptStarted: self._call_started,
                TaskSucceeded: self._call_over,
                TaskFailed: self._call_over,
                TaskQueued: self._call_over,
                TaskCancelled: self._call_over,
                AgentStepped: self._call_over,
                TaskRetrying: self._backing_off,
            }

    # ----------------------------------------------------------------- feeding

    def observe(self, event: EngineEvent, at: float | None = None) -> None:
        """Apply one event (`at`: when it happened, epoch seconds; None: now): a run's listener."""
        self.tell(event, at)

    def tell(self, event: EngineEvent, at: float | None = None) -> News | None:
        """Apply one event, as `observe`; its news, if any (a log writes it at once)."""
        if self.board is not None:
            self.board.apply(event, at)
        if self._counts_stats:
            self.stats.observe(event)
        handler = self._on.get(type(event))
        if handler is not None:
            handler(event, at)
        news = narrate(event, self.phases.round) if not self._replaying else None
        pending = self._pending
        if pending is not None:
            pending.events += 1
            if news is not None:
                pending.news.append(news)
        return news

    def apply(self, events: Iterable[EngineEvent], at: float | None = None) -> Changes:
        """Apply these events; returns what changed since the changes were last taken (them included)."""
        for event in events:
            self.observe(event, at)
        return self.take_changes()

    def take_changes(self) -> Changes:
        """What changed since the last call (the screen paints it); an empty `Changes` when the
        view collects none."""
        taken = self._pending
        if taken is None:
            return Changes()
        self._pending = Changes()
        return taken

    def replay(
        self, events: Iterable[tuple[float | None, EngineEvent]], wall_clock: Callable[[], float] = time.time
    ) -> None:
        """Show what earlier sessions did: (when it was logged, event) in order. Their board,
        counts, batches, scores, rate limits, phases, agents' facts and error-log rows are
        shown; their news is not announced, their pace is not this session's, their limit and
        pause are not this session's (`RunFigures.forget_run`), and their answers count toward
        the counts but not toward the recent rates (`RunStats.forget_recent`)."""
        own_stats = self._counts_stats
        stats, clock = self.stats, self.stats.clock
        now, wall = clock(), wall_clock()
        logged_at = [wall]
        if own_stats:  # each event counted at its time, as far back as it was logged
            stats.clock = lambda: now - (wall - logged_at[0])
        self._replaying = True
        try:
            for at, event in events:
                logged_at[0] = wall if at is None else at
                self.observe(event, at)
        finally:
            self._replaying = False
            if own_stats:
                stats.clock = clock
                stats.forget_recent()
        self.figures.forget_run()
        self.endpoints.forget_run()

    # ----------------------------------------------------------------- the events, one kind each

    def _attempt_started(self, event: AttemptStarted, at: float | None) -> None:
        index = event.index
        started = time.time() if at is None else at
        if not event.hedge:  # a backup leaves its first call's stream and silence as they are
            self.liveness.started(index)
        self.agents.started(index, InFlight(event.number, event.endpoint, started, event.hedge))
        self.endpoints.started(event.endpoint)
        pending = self._pending
        if pending is not None:
            pending.agents.add(index)
            pending.started.add(index)

    def _succeeded(self, event: TaskSucceeded, at: float | None) -> None:
        attempt = event.attempt
        index = attempt.index
        self.family.succeeded(event)
        self.agents.stopped(index)
        self.liveness.ended(index)
        self.agents.checked(index, event.checks)
        self.endpoints.ended(attempt, at)
        pending = self._pending
        if lane_of(attempt.endpoint) == CACHE:  # a replay: no call, so no latency (heat, sparkline)
            self.agents.replayed(index)
            if pending is not None:
                pending.agents.add(index)
            return
        self.agents.set_latency(index, attempt.latency_ms)
        if pending is not None:
            pending.agents.add(index)
            pending.latencies.append(attempt.latency_ms)

    def _retrying(self, event: TaskRetrying, at: float | None) -> None:
        attempt = event.attempt
        index = attempt.index
        agents = self.agents
        agents.in_flight.pop(index, None)
        agents.left_batch(index)
        self._backing_off(event, at)
        if attempt.error is not None and attempt.error.kind in ANSWER_ERRORS:
            agents.reasking(index)  # its answer asked again (more room, the escalation endpoint)
        self.endpoints.ended(attempt, at)  # (its tools: left when its model call started)
        pending = self._pending
        if pending is not None:
            pending.agents.add(index)
            pending.failures.append(Failure.retrying(attempt, event.delay_s))
            pending.started.discard(index)  # only a start after this retry row is its retry

    def _failed(self, event: TaskFailed, at: float | None) -> None:
        attempt = event.attempt
        self.agents.stopped(attempt.index)
        self.liveness.ended(attempt.index)
        self.agents.last_failed = attempt.index
        self.endpoints.ended(attempt, at)
        pending = self._pending
        if pending is not None:
            pending.agents.add(attempt.index)
            pending.failures.append(Failure.final(attempt))

    def _attempt_ended(self, event: AttemptEnded, at: float | None) -> None:
        self.endpoints.ended(event.attempt, at)
        pending = self._pending
        if pending is not None and event.attempt.error is not None:
            pending.failures.append(Failure.side(event.attempt))

    def _left(self, event: TaskQueued | TaskCancelled, at: float | None) -> None:
        self.agents.stopped(event.index)
        self.liveness.ended(event.index)
        if self._pending is not None:
            self._pending.agents.add(event.index)

    def _tasks_added(self, event: TasksAdded, at: float | None) -> None:
        """Tasks joined the run; an agent's spawn: the tree grows, and its answers count for the
        critical path (a view without a screen hears of them from now on)."""
        if event.spawn is None:
            return
        self.family.added(event)
        if TaskSucceeded not in self._on:
            self._on[TaskSucceeded] = self._family_succeeded
        if self._pending is not None:
            self._pending.agents.update(event.indices)

    def _family_stepped(self, event: AgentStepped, at: float | None) -> None:
        self.family.stepped(event)

    def _family_tool_ended(self, event: ToolCallEnded, at: float | None) -> None:
        self.family.tool_ended(event)

    def _family_succeeded(self, event: TaskSucceeded, at: float | None) -> None:
        self.family.succeeded(event)

    def _stepped(self, event: AgentStepped, at: float | None) -> None:
        index = event.attempt.index
        self.family.stepped(event)
        self.agents.in_flight.pop(index, None)
        self.endpoints.ended(event.attempt, at)
        self.agents.agent_stepped(index, event.step, event.tools)
        self.liveness.in_tools(index, time.time() if at is None else at)
        if self._pending is not None:
            self._pending.agents.add(index)  # its cell: in its tools (and its detail grows)

    def _tool_call_ended(self, event: ToolCallEnded, at: float | None) -> None:
        self.family.tool_ended(event)
        self.agents.tool_call_ended(event.index, event.step)
        if self._pending is not None:
            self._pending.agents.add(event.index)

    def _batch_submitted(self, event: BatchSubmitted, at: float | None) -> None:
        self.figures.batch_submitted(event, at)
        if self._pending is not None:
            self.agents.batch_submitted(event.indices)
            self._pending.agents.update(event.indices)

    def _batch_progress(self, event: BatchProgress, at: float | None) -> None:
        self.figures.batch_progress(event, at)

    def _batch_ended(self, event: BatchEnded, at: float | None) -> None:
        self.figures.batch_ended(event)

    def _judged(self, event: AnswerJudged, at: float | None) -> None:
        self.figures.judged(event)
        if self._pending is not None:
            self.agents.judged(event.index, event.score)
            self._pending.agents.add(event.index)  # its cell: underlined (and its detail shows the verdict)

    def _phase_attempt(self, event: PhaseAttempt, at: float | None) -> None:
        self.endpoints.ended(event.attempt, at, in_flight=False)  # a planner's or judge's call: no start event
        pending = self._pending
        if pending is not None and event.attempt.error is not None:
            pending.failures.append(Failure.step(event.phase, event.attempt))  # a planner's or aggregator's call

    def _drift(self, event: QualityDrift, at: float | None) -> None:
        self.figures.quality.drifts.append(event)

    def _run_started(self, event: RunStarted, at: float | None) -> None:
        self.figures.run_started(event)
        self.liveness.streaming_run = event.stream
        self.phases.take(event)
        if not self._replaying:
            self.pace.observe(event)

    def _run_finished(self, event: RunFinished, at: float | None) -> None:
        self.figures.run_finished(event)
        end = self.phases.finish(event)
        if not self._replaying:
            self.pace.observe(event)
        if end and self._pending is not None:
            self._pending.finished = event
            self._pending.finished_phase = (self.phases.phase, self.phases.detail)

    def _paused(self, event: RunPaused, at: float | None) -> None:
        self.figures.paused = True
        self.phases.take(event)

    def _resumed(self, event: RunResumed, at: float | None) -> None:
        self.figures.paused = False
        self.phases.take(event)

    def _concurrency(self, event: ConcurrencyChanged, at: float | None) -> None:
        self.figures.concurrency_changed(event)
        self.endpoints.concurrency_changed(event)

    def _rate_limits(self, event: RateLimitsLearned, at: float | None) -> None:
        if event.endpoint:  # one door's: its row says it (the run-wide line is the run's own)
            self.endpoints.rate_limits(event)
            return
        self.figures.rate_limits = (event.rpm, event.tpm)

    def _switched(self, event: EndpointSwitched, at: float | None) -> None:
        self.endpoints.switched(event)
        self.phases.take(event)

    def _cancelled(self, event: TaskCancelled, at: float | None) -> None:
        if event.attempt is not None:
            self.endpoints.ended(event.attempt, at)
        self._left(event, at)

    def _stopping(self, event: RunStopping, at: float | None) -> None:
        self.figures.stopped = True
        self.phases.take(event)

    def _phase_only(self, event: RateGateClosed | PhaseChanged, at: float | None) -> None:
        self.phases.take(event)

    # ----------------------------------------------------------------- where agents stand, and why

    def _dispatch_waiting(self, event: DispatchWaiting, at: float | None) -> None:
        self.liveness.dispatch_waiting(event, time.time() if at is None else at)

    def _suspended(self, event: RunSuspended, at: float | None) -> None:
        self.liveness.suspended(event, time.time() if at is None else at)
        self.phases.take(event)

    def _unsuspended(self, event: SuspensionEnded, at: float | None) -> None:
        self.liveness.unsuspended()
        self.phases.take(event)

    def _progress(self, event: CallProgress, at: float | None) -> None:
        self.liveness.progress(event, time.time() if at is None else at)
        if self._pending is not None:
            self._pending.agents.add(event.index)

    def _silent(self, event: AgentSilent, at: float | None) -> None:
        when = time.time() if at is None else at
        self.liveness.flagged(event, when)
        pending = self._pending
        if pending is not None:
            flight = self.agents.in_flight.get(event.index)
            endpoint, started = (flight.endpoint, flight.started_at) if flight is not None else ("", when)
            attempt = Attempt(event.index, event.number, endpoint, started, event.silent_s * 1000, "silent")
            pending.failures.append(Failure.silent(attempt, silent_text(event)))
            pending.agents.add(event.index)

    def _call_started(self, event: AttemptStarted, at: float | None) -> None:
        if not event.hedge:
            self.liveness.started(event.index)

    def _call_over(
        self, event: TaskSucceeded | TaskFailed | TaskQueued | TaskCancelled | AgentStepped, at: float | None
    ) -> None:
        self.liveness.ended(event.index)

    def _backing_off(self, event: TaskRetrying, at: float | None) -> None:
        attempt = event.attempt
        error = attempt.error
        why = f"{error.kind}{f' {attempt.status}' if attempt.status else ''}" if error is not None else attempt.outcome
        delay = event.delay_s if event.delay_s == event.delay_s else 0.0  # NaN: an old log's unknown delay
        self.liveness.backing_off(attempt.index, (time.time() if at is None else at) + delay, why)
