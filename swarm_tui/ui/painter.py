"""The console's painter: the one timer that paints what the run's events changed, and what is
announced when (the end of a run once, alerts with the bell when asked for).

How the engine and the screen share one event loop without the screen slowing the swarm:

* the run source runs as the app's worker (`lifecycle.py`) and feeds the run's `RunView` each
  event as it is delivered (O(1) each): no widget is touched from the engine;
* one timer (`REFRESH_HZ`, 10 Hz) takes what the view collected since (`take_changes`) and paints
  it inside `batch_update()`: grid rows whose agents changed, new error-log rows; the panels'
  figures at 4 Hz (`layout.py`), the sparkline at 1 Hz. A burst of a thousand events costs one
  repaint, and a tick with nothing new costs nothing.

Steering (keys, command palette, detail screen, error log) calls the source, then drains at
once so the grid shows the change without waiting for the next tick.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.widgets import Sparkline

from swarm_tui.core.events import (
    AgentSilent,
    EndpointSwitched,
    PhaseChanged,
    PlanChanged,
    QualityDrift,
    RunFinished,
    RunStopping,
    RunSuspended,
    SuspensionEnded,
)
from swarm_tui.frontend.source import RunSource
from swarm_tui.ui.follow import CursorFollow
from swarm_tui.ui.keys import KeyManager
from swarm_tui.ui.layout import ConsoleLayout
from swarm_tui.ui.lifecycle import RunLifecycle
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.widgets.errorlog.error_log import ErrorLog
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.view.news import News
from swarm_tui.view.run_view import Changes

REFRESH_HZ = 10
"""The painter's rate: the grid and the error log show an event within a tenth of a second."""
SPARK_SECONDS = 120
"""The sparkline's bars: one a second, the latest two minutes."""


class Painter:
    """The drain: the run's news painted into the widgets, and said out loud (see the module's notes)."""

    def __init__(
        self,
        app: App[Any],
        source: RunSource,
        *,
        grid: AgentGrid,
        error_log: ErrorLog,
        sparkline: Sparkline,
        layout: ConsoleLayout,
        follow: CursorFollow,
        lifecycle: RunLifecycle,
        keys: KeyManager,
        clock: Callable[[], float],
        bell: bool,
    ) -> None:
        """`bell`: ring the terminal's bell when the run finishes, stops, drifts or fails over."""
        self._app = app
        self._source = source
        self._view = source.view
        self._grid = grid
        self._error_log = error_log
        self._sparkline = sparkline
        self._layout = layout
        self._follow = follow
        self._lifecycle = lifecycle
        self._keys = keys
        self._clock = clock
        self._bell = bell
        self.aggregate_ready = (source.run_dir / "aggregate.md").exists()
        """The swarm's aggregate is written: `g` shows it."""
        self._finish_news: tuple[RunFinished, str, str] | None = None
        """The last `RunFinished` not yet announced: announced when the run's worker is over (see
        `_announce_if_over`), so a swarm of six rounds says "finished" once, not six times over the panels."""
        self._spark: deque[float] = deque(maxlen=SPARK_SECONDS)
        self._spark_bucket: list[float] = []
        self._last_second = float("-inf")
        self._family_shown = 0
        """The spawned agents the grid's order groups (under their parents)."""

    # ----------------------------------------------------------------- draining (the one timer)

    def drain(self, replay: bool = False) -> None:
        """Paint what the run's events changed since the last tick: the only place engine news
        reaches widgets. `replay`: the history of a resumed run: shown, but not announced."""
        changes = self._view.take_changes()
        if not changes and not self._tick_due() and not self._layout.owed():
            return
        if not replay:
            for news in changes.news:
                self._announce(news)
        if changes.finished is not None:
            self._finished(changes.finished, changes.finished_phase, announce=not replay)
        self._spark_bucket.extend(changes.latencies)
        if not self._grid.is_attached:  # a last tick while the app shuts down: nothing to paint on
            return
        with self._app.batch_update():
            self._paint(changes)
        self._announce_if_over()

    def run_ended(self) -> None:
        """The run's worker is over: what it changed last painted, and its end announced."""
        self.drain()
        self._announce_if_over()

    def _paint(self, changes: Changes) -> None:
        grid, error_log, source = self._grid, self._error_log, self._source
        family = self._view.family
        if len(source.states) != grid.count or (family.parent and len(family.parent) != self._family_shown):
            # tasks joined the run (a planner's sub-tasks, an agent's spawn: shown under their parent)
            self._family_shown = len(family.parent)
            grid.set_indices(family.grouped(sorted(source.states)))
        if changes.agents:
            grid.update_cells(changes.agents)
            screen = self._app.screen
            if isinstance(screen, AgentDetailScreen) and screen.index in changes.agents:
                screen.agent_changed()
        error_log.name_endpoints = source.view.endpoints.routed  # which door answered each
        error_log.add_failures(changes.failures)
        for index in changes.started:
            error_log.agent_started(index)
        if changes.agents:
            error_log.agents_changed(changes.agents)
        self._follow.apply()
        self._tick_second()
        self._layout.paint_if_due()
        self._keys.refresh_if_changed()

    # ----------------------------------------------------------------- once a second

    def _tick_due(self) -> bool:
        return self._clock() - self._last_second >= 1.0

    def _tick_second(self) -> None:
        """Once a second: the sparkline, heat bounds, and figures that move with time alone."""
        if not self._tick_due():
            return
        app, grid = self._app, self._grid
        self._last_second = self._clock()
        self._error_log.tick(self._last_second)
        if why := self._source.resume_failed():  # a resume this attached view started
            app.notify(f"The run was not resumed: {why}", title="Resume", severity="error", timeout=30, markup=False)
        screen = app.screen
        if isinstance(screen, AgentDetailScreen):
            screen.tick()
        if self._spark_bucket:
            self._spark.append(max(self._spark_bucket))
            self._spark_bucket = []
            # one bar is nothing to compare yet (Textual draws a lone value as a full block across
            # the width): a flat line until there are two
            self._sparkline.data = list(self._spark) if len(self._spark) >= 2 else []
        if grid.heat:
            lat = self._source.stats.latencies_ms
            if lat:
                grid.set_heat_bounds([lat[int(q * (len(lat) - 1))] for q in (0.2, 0.4, 0.6, 0.8)])

    def tick_now(self) -> None:
        """The once-a-second work now, not at the next second (the heat view switched on)."""
        self._last_second = float("-inf")
        self._tick_second()

    # ----------------------------------------------------------------- what is said

    def _announce(self, news: News) -> None:
        """The news a console says out loud (the rest the panels show)."""
        app, source = self._app, self._source
        match news.event:
            case EndpointSwitched():
                self.alert(news.text[:1].upper() + news.text[1:], "Endpoint switched", timeout=8)
            case PlanChanged(feasible=feasible):  # the autopilot's (`--deadline`): what it will do, or cannot
                if feasible:
                    app.notify(news.text, title="Plan", timeout=8, markup=False)
                else:
                    self.alert(news.text, "The deadline or the budget cannot hold", timeout=15)
            case QualityDrift(round=round_number, detail=detail) if not source.attached or source.running:
                # (an attached view of a run nobody writes: its drifts are history; the panel names the last)
                self.alert(f"Round {round_number}: {detail}.", "Quality drift", timeout=10)
            case RunStopping(reason=reason) if not reason.startswith(("aborted", "interrupted")):
                self.alert(f"Stopping: {reason}", "Run stopping", timeout=10)
            case RunSuspended() if not source.attached or source.running:  # the banner is the phase's
                self.alert(news.text[:1].upper() + news.text[1:], "Run suspended", timeout=15)
            case SuspensionEnded() if not source.attached or source.running:
                app.notify(news.text[:1].upper() + news.text[1:], title="Run resumed", timeout=8, markup=False)
            case AgentSilent() if not source.attached or source.running:
                self.alert(news.text[:1].upper() + news.text[1:], "Agent silent", timeout=8)
            case PhaseChanged(phase="done"):
                if (source.run_dir / "aggregate.md").exists():
                    self.aggregate_ready = True
                if self.aggregate_ready:
                    app.notify(
                        f"The aggregate is written: press {self._keys.hint('app.aggregate')} to read it",
                        title="Aggregate",
                        timeout=10,
                        markup=False,
                    )

    def alert(self, message: str, title: str, timeout: float = 8) -> None:
        """News worth a look from across the room: a warning, and the bell when asked for (`--bell`)."""
        self._app.notify(message, title=title, severity="warning", timeout=timeout, markup=False)
        if self._bell:
            self._app.bell()

    def _finished(self, finished: RunFinished, phase: tuple[str, str], announce: bool = True) -> None:
        """The run ended (the view's phase says so already; a round with more to come is no end);
        `phase`: the phase and its detail as it ended, which its announcement is titled with."""
        self._layout.stop_clock()
        source = self._source
        if source.attached or self._lifecycle.quitting or not announce:
            return
        fatal = source.fatal
        if fatal:  # the journal cannot be written: nothing more can be done from here
            self._view.phases.phase = "STOPPED"
            self._app.notify(
                f"{fatal}. Fix it, then: swarm-tui resume {source.run_dir}",
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
        news = self._finish_news
        if news is None or self._lifecycle.in_progress:
            return
        self._finish_news = None
        if self._lifecycle.ended_well:
            self._announce_finished(*news)

    def _announce_finished(self, finished: RunFinished, phase: str, detail: str) -> None:
        hint = self._keys.hint
        if finished.failed:
            then = f"{hint('app.retry_failed')} retries the failed agents"
        elif finished.cancelled:
            then = f"{hint('app.pause')} resumes the unfinished agents"
        else:
            then = f"{hint('app.quit')} quits"
        counts = f"{finished.succeeded} done, {finished.failed} failed" + (
            f", {finished.cancelled} unfinished" if finished.cancelled else ""
        )
        self._app.notify(
            f"Run {'aborted' if finished.aborted else 'finished'}: {counts}. {then}.",
            title=phase,
            severity="warning" if finished.failed or finished.cancelled else "information",
            timeout=8,
            markup=False,
        )
        if self._bell:
            self._app.bell()
