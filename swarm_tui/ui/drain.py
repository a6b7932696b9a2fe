"""The console's drain: the one timer that paints what the run's events changed, the run as the
app's worker, and what is announced when (the end of a run once, alerts with the bell when
asked for). On the core (`console.py`: layout, themes, panels); `steering.py` adds the keys.

How the engine and the screen share one event loop without the screen slowing the swarm:

* the run source (`LiveRun`: the engine of a `SwarmSession`; `AttachedRun`: a journal another
  process writes) runs as the app's worker (`run_worker(source.run())`);
* it feeds the run's `RunView` each event as it is delivered (O(1) each): no widget is touched
  from the engine;
* one timer (`REFRESH_HZ`, 10 Hz) takes what the view collected since (`take_changes`) and paints
  it inside `batch_update()`: grid rows whose agents changed, new error-log rows; the panels'
  figures at 4 Hz, the sparkline at 1 Hz. A burst of a thousand events costs one repaint.

Steering (keys, command palette, detail screen, error log) calls the source, then drains at
once so the grid shows the change without waiting for the next tick.
"""

from __future__ import annotations

from textual import on
from textual.worker import Worker, WorkerState

from swarm_tui.core.events import (
    EndpointSwitched,
    PhaseChanged,
    PlanChanged,
    QualityDrift,
    RunFinished,
    RunStopping,
    TaskState,
)
from swarm_tui.frontend.headless import signalled_exit_code
from swarm_tui.ui.console import PANELS_EVERY_S, TOOLS_STARTING, ConsoleCore
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.view.news import News
from swarm_tui.view.run_view import Changes


class DrainingConsole(ConsoleCore):
    """The console with its run's news painted: the drain, the worker, the announcements."""

    def on_mount(self) -> None:
        self._mount_widgets()
        self.drain(replay=True)  # what the view holds already: a resumed run's earlier sessions
        self.grid.focus()
        self.set_interval(1 / self._refresh_hz, self.drain, name="drain")
        if self._start:
            self._start_run()
        else:
            self.view.phases.settle(self.source.states)
        self.drain()

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
        self.drain()
        self._announce_if_over()
        if self._quitting:
            self.exit(self.run_exit_code())

    def run_exit_code(self) -> int:
        """The run's exit code (the headless rule); 130 for a stop by signal with work left."""
        source = self.source
        return signalled_exit_code(source.exit_code(), self.signalled, source.output_error)

    # ----------------------------------------------------------------- draining (the one timer)

    def drain(self, replay: bool = False) -> None:
        """Paint what the run's events changed since the last tick: the only place engine news
        reaches widgets. `replay`: the history of a resumed run: shown, but not announced."""
        changes = self.view.take_changes()
        if not changes and not self._tick_due() and not self._panels_owed():
            return
        if not replay:
            for news in changes.news:
                self._announce(news)
        if changes.finished is not None:
            self._finished(changes.finished, changes.finished_phase, announce=not replay)
        self._spark_bucket.extend(changes.latencies)
        if not self.grid.is_attached:  # a last tick while the app shuts down: nothing to paint on
            return
        with self.batch_update():
            self._paint(changes)
        self._announce_if_over()

    def _paint(self, changes: Changes) -> None:
        grid = self.grid
        if len(self.source.states) != grid.count:  # tasks joined the run (a planner's sub-tasks)
            grid.set_indices(sorted(self.source.states))
        if changes.agents:
            grid.update_cells(changes.agents)
            screen = self.screen
            if isinstance(screen, AgentDetailScreen) and screen.index in changes.agents:
                screen.agent_changed()
        self.error_log.name_endpoints = self.source.view.endpoints.routed  # which door answered each
        self.error_log.add_failures(changes.failures)
        for index in changes.started:
            self.error_log.agent_started(index)
        if changes.agents:
            self.error_log.agents_changed(changes.agents)
        self._follow_cursor()
        self._tick_second()
        now = self._clock()
        if now - self._panels_at >= PANELS_EVERY_S or (self.phase, self.phase_detail) != self._painted_phase:
            self._panels_at = now
            self.update_panels()
        else:
            self._panels_stale = True  # painted at the next tick past the 4 Hz, not at the next event
        self._refresh_bindings_if_changed()

    def _panels_owed(self) -> bool:
        """Events came since the panels were last painted, and their 4 Hz allows a paint now (a
        burst's last events show at once, not at the next event or second)."""
        return self._panels_stale and self._clock() - self._panels_at >= PANELS_EVERY_S

    def _announce(self, news: News) -> None:
        """The news a console says out loud (the rest the panels show)."""
        match news.event:
            case EndpointSwitched():
                self.alert(news.text[:1].upper() + news.text[1:], "Endpoint switched", timeout=8)
            case PlanChanged(feasible=feasible):  # the autopilot's (`--deadline`): what it will do, or cannot
                if feasible:
                    self.notify(news.text, title="Plan", timeout=8, markup=False)
                else:
                    self.alert(news.text, "The deadline or the budget cannot hold", timeout=15)
            case QualityDrift(round=round_number, detail=detail) if not self.source.attached or self.source.running:
                # (an attached view of a run nobody writes: its drifts are history; the panel names the last)
                self.alert(f"Round {round_number}: {detail}.", "Quality drift", timeout=10)
            case RunStopping(reason=reason) if not reason.startswith(("aborted", "interrupted")):
                self.alert(f"Stopping: {reason}", "Run stopping", timeout=10)
            case PhaseChanged(phase="done"):
                if (self.source.run_dir / "aggregate.md").exists():
                    self.aggregate_ready = True
                if self.aggregate_ready:
                    self.notify(
                        f"The aggregate is written: press {self.key_hint('app.aggregate')} to read it",
                        title="Aggregate",
                        timeout=10,
                        markup=False,
                    )

    def alert(self, message: str, title: str, timeout: float = 8) -> None:
        """News worth a look from across the room: a warning, and the bell when asked for (`--bell`)."""
        self.notify(message, title=title, severity="warning", timeout=timeout, markup=False)
        if self.bell_on:
            self.bell()

    def _follow_cursor(self, force: bool = False) -> None:
        """Follow mode: the cursor on the first agent in flight (moved when the one it is on is
        no longer active), or on the last agent that failed."""
        states, grid = self.source.states, self.grid
        last_failed = self.view.agents.last_failed
        if self.follow == "active":
            here = grid.cursor_index
            if here is not None and states.get(here) in (TaskState.RUNNING, TaskState.RETRYING) and not force:
                return
            for position in range(grid.count):
                index = grid.index_at(position)
                if states.get(index) in (TaskState.RUNNING, TaskState.RETRYING):
                    grid.move_to(index)
                    return
        elif self.follow == "failed" and last_failed is not None:
            if grid.cursor_index != last_failed:
                grid.move_to(last_failed)

    def _finished(self, finished: RunFinished, phase: tuple[str, str], announce: bool = True) -> None:
        """The run ended (the view's phase says so already; a round with more to come is no end);
        `phase`: the phase and its detail as it ended, which its announcement is titled with."""
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
        self._finish_news = (finished, *phase)  # said when the worker is over

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
        if why := self.source.resume_failed():  # a resume this attached view started
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
