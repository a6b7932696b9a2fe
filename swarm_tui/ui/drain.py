"""The console's event drain: the one timer that brings engine news to the widgets, the run
as the app's worker, and what is announced when (the end of a run once, alerts with the bell
when asked for). On the core (`console.py`: layout, themes, panels); `steering.py` adds the keys.

How the engine and the screen share one event loop without the screen slowing the swarm:

* the run source (`LiveRun`: the engine of a `SwarmSession`; `AttachedRun`: a journal another
  process writes) runs as the app's worker (`run_worker(source.run())`);
* its listener only appends each event to a list: no widget is touched from the engine;
* one timer (`REFRESH_HZ`, 10 Hz) empties that list and applies it inside `batch_update()`:
  grid rows whose agents changed, new error-log rows; the panels' figures at 4 Hz, the
  sparkline at 1 Hz. A burst of a thousand events costs one repaint.

Steering (keys, command palette, detail screen, error log) calls the source, then drains at
once so the grid shows the change without waiting for the next tick.
"""

from __future__ import annotations

from textual import on
from textual.worker import Worker, WorkerState

from ..core.events import (
    AgentStepped,
    AnswerJudged,
    AttemptEnded,
    AttemptStarted,
    BatchSubmitted,
    EndpointSwitched,
    EngineEvent,
    PhaseAttempt,
    PhaseChanged,
    QualityDrift,
    RateLimitsLearned,
    RunFinished,
    RunStopping,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TaskSucceeded,
    ToolCallEnded,
)
from ..engine import TaskState
from ..headless import signalled_exit_code
from .console import PANELS_EVERY_S, TOOLS_STARTING, ConsoleCore
from .detail import AgentDetailScreen, InFlight
from .errorlog import Failure


class DrainingConsole(ConsoleCore):
    """The console with its engine news applied: the drain, the worker, the announcements."""

    def on_mount(self) -> None:
        self._mount_widgets()
        self._events.extend(getattr(self.source, "history", ()))  # a resumed run's earlier sessions
        self._drain(replay=True)
        self.source.subscribe(self._events.append)
        self.source.subscribe(self._note_attempt)
        self.grid.focus()
        self.set_interval(1 / self._refresh_hz, self._drain, name="drain")
        if self._start:
            self._start_run()
        else:
            self.phases.settle(self.source.states)
        self._drain()

    # ----------------------------------------------------------------- the engine as a worker

    def _start_run(self) -> None:
        self.phase, self.phase_detail = "STARTING", TOOLS_STARTING if self.source.has_tools else ""
        self._worker = self.run_worker(
            self.source.run(), name="swarm run", group="engine", exclusive=True, exit_on_error=False
        )

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "engine" or not event.worker.is_finished:
            return
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            self.phase, self.phase_detail = "CRASHED", f"{type(error).__name__}: {error}"
            self.notify(
                f"The run stopped on an error: {type(error).__name__}: {error}. The journal is intact: "
                f"swarm-tui resume {self.source.run_dir}",
                severity="error",
                timeout=30,
                markup=False,
            )
        self._drain()
        self._announce_if_over()
        if self._quitting:
            self.exit(self.run_exit_code())

    def run_exit_code(self) -> int:
        """The run's exit code (the headless rule); 130 for a stop by signal with work left."""
        source = self.source
        return signalled_exit_code(source.exit_code(), self.signalled, source.output_error)

    # ----------------------------------------------------------------- draining events (the one timer)

    def _note_attempt(self, event: EngineEvent) -> None:
        """The engine's listener for the attempts in flight, timed as they start (the drain
        comes up to a tick later): what an agent's detail shows while it runs."""
        match event:
            case AttemptStarted(index=index, number=number, endpoint=endpoint, hedge=hedge):
                self.attempts_in_flight[index] = InFlight(number, endpoint, self.source.event_time(), hedge)
            case TaskSucceeded(attempt=a) | TaskRetrying(attempt=a) | TaskFailed(attempt=a) | AgentStepped(attempt=a):
                self.attempts_in_flight.pop(a.index, None)
            case TaskCancelled(index=index) | TaskQueued(index=index):
                self.attempts_in_flight.pop(index, None)

    def _drain(self, replay: bool = False) -> None:
        """Apply the events buffered since the last tick: the only place engine news reaches widgets.
        `replay`: they are the history of a resumed run: shown, but not announced as news."""
        if not self._events and not self._tick_due():
            return
        events = self._events.copy()  # the listener holds `self._events.append`: keep the list
        self._events.clear()
        changed: set[int] = set()
        failures: list[Failure] = []
        restarted: set[int] = set()
        grid = self.grid
        phase_before = (self.phase, self.phase_detail)
        pause_key = self.key_hint("app.pause")
        for event in events:
            self.phases.take(event, pause_key)
            match event:
                case TaskSucceeded(attempt=attempt):
                    changed.add(attempt.index)
                    grid.left_tools(attempt.index)
                    grid.left_batch(attempt.index)
                    grid.set_latency(attempt.index, attempt.latency_ms)
                    self._spark_bucket.append(attempt.latency_ms)
                case TaskRetrying(attempt=attempt, delay_s=delay):
                    changed.add(attempt.index)
                    grid.left_batch(attempt.index)
                    failures.append(Failure.retrying(attempt, delay, self._clock()))
                    restarted.discard(attempt.index)  # only a start after this retry row is its retry
                case TaskFailed(attempt=attempt):
                    changed.add(attempt.index)
                    grid.left_tools(attempt.index)
                    grid.left_batch(attempt.index)
                    failures.append(Failure.final(attempt))
                    self._last_failed = attempt.index
                case AttemptEnded(attempt=attempt) if attempt.error is not None:
                    failures.append(Failure.side(attempt))
                case PhaseAttempt(phase=step, attempt=attempt) if attempt.error is not None:
                    failures.append(Failure.step(step, attempt))  # a planner's or aggregator's call
                case EndpointSwitched(endpoint=endpoint, reason=reason) if not replay:
                    self.alert(f"New attempts go to {endpoint}: {reason}", "Endpoint switched", timeout=8)
                case AttemptStarted(index=index):  # a model call: a multi-step agent thinks
                    changed.add(index)
                    restarted.add(index)
                    grid.left_tools(index)
                    grid.left_batch(index)
                case TaskQueued(index=index) | TaskCancelled(index=index):
                    changed.add(index)
                    grid.left_tools(index)
                    grid.left_batch(index)
                case BatchSubmitted(indices=indices):  # their cells: waiting in a provider batch
                    changed.update(indices)
                    grid.batch_submitted(indices)
                case AgentStepped(attempt=attempt, step=step, tools=tools):  # its cell: in its tools
                    changed.add(attempt.index)  # (and its detail grows)
                    grid.agent_stepped(attempt.index, step, tools)
                case ToolCallEnded(index=index, step=step):
                    changed.add(index)
                    grid.tool_call_ended(index, step)
                case AnswerJudged(index=index, score=score):  # its cell: underlined (low: its own colour)
                    changed.add(index)  # (and its detail shows the verdict)
                    grid.judged(index, score)
                case QualityDrift(round=round_number, detail=detail) if not replay and (
                    not self.source.attached or self.source.running
                ):
                    # (an attached view of a run nobody writes: its drifts are history; the panel names the last)
                    self.alert(f"Round {round_number}: {detail}.", "Quality drift", timeout=10)
                case RunStopping(reason=reason) if not replay and not reason.startswith(("aborted", "interrupted")):
                    self.alert(f"Stopping: {reason}", "Run stopping", timeout=10)
                case RateLimitsLearned(rpm=rpm, tpm=tpm):
                    self.rate_limits = (rpm, tpm)
                case PhaseChanged(phase=phase):
                    if phase == "done" and (self.source.run_dir / "aggregate.md").exists():
                        self._aggregate_ready = True
                    if phase == "done" and self._aggregate_ready and not replay:
                        self.notify(
                            f"The aggregate is written: press {self.key_hint('app.aggregate')} to read it",
                            title="Aggregate",
                            timeout=10,
                            markup=False,
                        )
                case RunFinished() as finished:
                    self._finished(finished, announce=not replay)
        with self.batch_update():
            if len(self.source.states) != grid.count:  # tasks joined the run (a planner's sub-tasks)
                grid.set_indices(sorted(self.source.states))
            if changed:
                grid.update_cells(changed)
                screen = self.screen
                if isinstance(screen, AgentDetailScreen) and screen.index in changed:
                    screen.agent_changed()
            self.error_log.add_failures(failures)
            for index in restarted:
                self.error_log.agent_started(index)
            if changed:
                self.error_log.agents_changed(changed)
            self._follow_cursor()
            self._tick_second()
            now = self._clock()
            if now - self._panels_at >= PANELS_EVERY_S or (self.phase, self.phase_detail) != phase_before:
                self._panels_at = now
                self._update_panels()
            self._refresh_bindings_if_changed()
        self._announce_if_over()

    def alert(self, message: str, title: str, timeout: float = 8) -> None:
        """News worth a look from across the room: a warning, and the bell when asked for (`--bell`)."""
        self.notify(message, title=title, severity="warning", timeout=timeout, markup=False)
        if self.bell_on:
            self.bell()

    def _follow_cursor(self, force: bool = False) -> None:
        """Follow mode: the cursor on the first agent in flight (moved when the one it is on is
        no longer active), or on the last agent that failed."""
        states, grid = self.source.states, self.grid
        if self.follow == "active":
            here = grid.cursor_index
            if here is not None and states.get(here) in (TaskState.RUNNING, TaskState.RETRYING) and not force:
                return
            for position in range(grid.count):
                index = grid.index_at(position)
                if states.get(index) in (TaskState.RUNNING, TaskState.RETRYING):
                    grid.move_to(index)
                    return
        elif self.follow == "failed" and self._last_failed is not None:
            if grid.cursor_index != self._last_failed:
                grid.move_to(self._last_failed)

    def _finished(self, finished: RunFinished, announce: bool = True) -> None:
        if not self.phases.finish(finished):
            return  # a round of a multi-round swarm: more to come
        self._ended_elapsed_s = self.source.stats.elapsed_s
        if self.source.attached or self._quitting or not announce:
            return
        fatal = self.source.fatal
        if fatal:  # the journal cannot be written: nothing more can be done from here
            self.phase = "STOPPED"
            self.notify(
                f"{fatal}. Fix it, then: swarm-tui resume {self.source.run_dir}",
                title="Run stopped",
                severity="error",
                timeout=60,
                markup=False,
            )
            return
        self._finish_news = (finished, self.phase, self.phase_detail)  # said when the worker is over

    def _announce_if_over(self) -> None:
        """The run's end, once its worker is over (a multi-round swarm finishes a run a round, and
        several may arrive in one drain): the last `RunFinished` only; none after a crash."""
        news, worker = self._finish_news, self._worker
        if news is None or (worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)):
            return
        self._finish_news = None
        if worker is None or worker.state is WorkerState.SUCCESS:
            self._announce_finished(*news)

    def _announce_finished(self, finished: RunFinished, phase: str, detail: str) -> None:
        if finished.failed:
            hint = f"{self.key_hint('app.retry_failed')} retries the failed agents"
        elif finished.cancelled:
            hint = f"{self.key_hint('app.pause')} resumes the unfinished agents"
        else:
            hint = f"{self.key_hint('app.quit')} quits"
        counts = f"{finished.succeeded} done, {finished.failed} failed" + (
            f", {finished.cancelled} unfinished" if finished.cancelled else ""
        )
        self.notify(
            f"Run {'aborted' if finished.aborted else 'finished'}: {counts}. {hint}.",
            title=phase,
            severity="warning" if finished.failed or finished.cancelled else "information",
            timeout=8,
            markup=False,
        )
        if self.bell_on:
            self.bell()

    def _tick_due(self) -> bool:
        return self._clock() - self._last_second >= 1.0

    def _tick_second(self) -> None:
        """Once a second: the sparkline, heat bounds, and figures that move with time alone."""
        if not self._tick_due():
            return
        self._last_second = self._clock()
        self.error_log.tick(self._last_second)
        resume_failed = getattr(self.source, "resume_failed", None)  # a resume this attached view started
        if resume_failed is not None and (why := resume_failed()):
            self.notify(f"The run was not resumed: {why}", title="Resume", severity="error", timeout=30, markup=False)
        screen = self.screen
        if isinstance(screen, AgentDetailScreen):
            screen.tick()
        if self._spark_bucket:
            self._spark.append(max(self._spark_bucket))
            self._spark_bucket = []
            self.sparkline.data = list(self._spark)
        if self.grid.heat:
            lat = self.source.stats.latencies_ms
            if lat:
                self.grid.set_heat_bounds([lat[int(q * (len(lat) - 1))] for q in (0.2, 0.4, 0.6, 0.8)])
