"""The console's core: its layout, its themes, and the one timer that brings engine news to
the widgets. `steering.py` adds what the keys do, `app.py` binds them (`SwarmApp`).

How the engine and the screen share one event loop without the screen slowing the swarm:

* the run source (`LiveRun`: the engine of a `SwarmSession`; `AttachedRun`: a journal another
  process writes) runs as the app's worker (`run_worker(source.run())`);
* its listener only appends each event to a list: no widget is touched from the engine;
* one timer (`REFRESH_HZ`, 10 Hz) empties that list and applies it inside `batch_update()`:
  grid rows whose agents changed, new error-log rows; the panels' figures at 4 Hz, the
  sparkline at 1 Hz. A burst of a thousand events costs one repaint.

Steering (keys, command palette, detail screen, error log) calls the source, then drains at
once so the grid shows the change without waiting for the next tick.

The layout fits the terminal: the grid takes what a full run panel (40 columns) leaves, or
what a narrow one (28) leaves when that keeps its numbered cells (the 10x10 demo at 80x24),
else its cells become one character each; the footers take a narrow arrangement below 80
columns, and the key footer shows the keys that fit, whole.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.events import Key, Resize
from textual.screen import Screen
from textual.widgets import Sparkline
from textual.worker import Worker, WorkerState

from ..config import Config, load_config
from ..currency import USD, DisplayCurrency, display_currency
from ..engine import TaskState
from ..engine.events import (
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
from ..errors import InputError
from .detail import AgentDetailScreen, InFlight
from .errorlog import ErrorLog, Failure
from .footer import KeyFooter
from .grid import AgentGrid
from .keys import key_hint, resolve_keymap
from .panels import NARROW_FOOTER_BELOW, LanePanel, ProviderBar, RunPanel, StatsFigures, StatsFooter
from .phase import PhaseView, counts_detail
from .source import RunSource, run_figures
from .themes import (
    DEFAULT_THEME,
    THEME_ORDER,
    bundled_themes,
    drop_textual_themes,
    load_theme_file,
    looks_like_path,
    remember_theme,
    swarm_variable_defaults,
)

REFRESH_HZ = 10
PANELS_EVERY_S = 0.25
"""The figures and the legend repaint at 4 Hz: readable, and half the cost of the grid's 10 Hz."""
SPARK_SECONDS = 120
SIDE_PANEL_MIN = 40
SIDE_PANEL_NARROW = 28
"""The run panel's width beside a grid that would not keep its numbered cells otherwise (80x24)."""
RESERVED_ROWS = 1 + 3 + 1 + 7
"""Provider bar, stats footer, key footer, and the least the error log keeps."""
LANE_ROWS_TALL_FROM = 40
"""From this terminal height the lane panel lists up to `LANE_ROWS[1]` batches, else `LANE_ROWS[0]`."""
LANE_ROWS = (2, 5)
BATCH_ROWS_FROM_LOG = 2
"""Rows the batch lane's lines take from the error log's least (7) before the grid gives any."""
TOOLS_STARTING = "starting the job's tools (MCP servers, Python tools)…"


def display_currency_or_usd(config: Config, provider: str) -> DisplayCurrency:
    """The footer's currency: the config's, at the provider's billing rate (¥1 = $1 at a relay);
    a display preference the config gets wrong never stops the console (USD then)."""
    try:
        return display_currency(config, provider)
    except InputError:
        return USD


class ConsoleCore(App[int]):
    """Watch one swarm run: the screen, the drain, the themes. The result is the exit code."""

    def __init__(
        self,
        source: RunSource,
        *,
        config: Config | None = None,
        theme: str | None = None,
        start: bool = True,
        clock: Callable[[], float] | None = None,
        refresh_hz: float = REFRESH_HZ,
        wall_clock: Callable[[], float] = time.time,
        bell: bool = False,
    ) -> None:
        """`wall_clock`: epoch seconds, for the provider batches' times (their 24 h window) and
        the attempts in flight. `bell`: ring the terminal's bell when the run finishes, stops,
        drifts or fails over."""
        super().__init__()
        self.source = source
        self.config = config if config is not None else load_config()
        self.currency = display_currency_or_usd(self.config, source.profile.name)
        self.bell_on = bell
        self._start = start
        self._clock = clock or time.monotonic
        self._wall_clock = wall_clock
        self._lane_lines = 0
        """The lane panel's height as the grid was last fitted to it (0: no batches)."""
        self._judge_line = False
        """The footer has the judge's cost line (a run whose judge has cost something)."""
        self._finish_news: tuple[RunFinished, str, str] | None = None
        """The last `RunFinished` not yet announced: announced when the run's worker is over (see
        `_announce_if_over`), so a swarm of six rounds says "finished" once, not six times over the panels."""
        if clock is not None:  # a frozen clock (snapshot tests): elapsed, rates and ETA hold still
            source.stats.clock = clock
            source.stats.started_at = clock()
        self._refresh_hz = refresh_hz
        self._events: list[EngineEvent] = []
        self._quitting = False
        self._aggregate_ready = (source.run_dir / "aggregate.md").exists()
        self._enabled_keys: tuple[object, ...] = ()
        self.keymap: dict[str, str] = {}
        """The config's `[keys]` as applied: binding id -> keys (Textual's names, comma-separated)."""
        self.keymap_problems: list[str] = []
        self._worker: Worker | None = None
        self.phases = PhaseView()
        self.rate_limits: tuple[int | None, int | None] = (None, None)
        self._ended_elapsed_s: float | None = None
        """The run's elapsed time when it ended: the footer's clock stops there until it runs again."""
        self._spark: deque[float] = deque(maxlen=SPARK_SECONDS)
        self._spark_bucket: list[float] = []
        self._last_second = float("-inf")
        self._panels_at = float("-inf")
        self.follow: str | None = None
        """What the grid's cursor follows: None, "active" or "failed" (`f`)."""
        self._last_failed: int | None = None
        self.attempts_in_flight: dict[int, InFlight] = {}
        """Each agent's attempt in flight now: its number, endpoint and start (the detail shows it)."""
        self._theme_paths: dict[str, str] = {}
        self._theme_cycle = self._register_themes(theme or self.config.theme or DEFAULT_THEME)
        self._theme_saved = self.theme

    # ----------------------------------------------------------------- the phase (tests and panels read it)

    @property
    def phase(self) -> str:
        return self.phases.phase

    @phase.setter
    def phase(self, value: str) -> None:
        self.phases.phase = value

    @property
    def phase_detail(self) -> str:
        return self.phases.detail

    @phase_detail.setter
    def phase_detail(self, value: str) -> None:
        self.phases.detail = value

    # ----------------------------------------------------------------- themes

    def _register_themes(self, wanted: str) -> list[str]:
        """swarm-tui's themes (and a user's file) only: Textual's own carry none of the grid's
        colours, and most fail the contrast the bundled ones are held to."""
        bundled = bundled_themes()
        self._theme_defaults = swarm_variable_defaults()
        for theme in bundled:
            self.register_theme(theme)
        cycle = [t.name for t in bundled if t.name in THEME_ORDER]
        if looks_like_path(wanted):
            try:
                user = load_theme_file(Path(wanted).expanduser())
            except InputError as exc:  # a remembered file gone since: the default, said at mount
                self._theme_problem = str(exc)
                wanted = DEFAULT_THEME
            else:
                self.register_theme(user)
                self._theme_paths[user.name] = wanted
                cycle.append(user.name)
                wanted = user.name
        if wanted not in cycle:
            self._theme_problem = f"no swarm-tui theme named {wanted!r} (known: {', '.join(cycle)})"
            wanted = DEFAULT_THEME
        self.theme = wanted
        drop_textual_themes(self)
        return cycle

    def watch_theme(self, theme: str) -> None:
        """A theme chosen (`t`, the palette's Theme): remembered as the config's `[defaults] theme`."""
        if not self.is_running or theme == getattr(self, "_theme_saved", theme):
            return
        self._theme_saved = theme
        try:
            remember_theme(self.config.path, self._theme_paths.get(theme, theme))
        except (OSError, InputError) as exc:
            self.notify(f"Theme not remembered: {exc}", severity="warning", markup=False)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's palette commands, less its Quit (ours asks first during a run) and with a
        Screenshot that saves into the run directory (Textual's needs ~/Downloads) and says where."""
        for command in super().get_system_commands(screen):
            if command.title == "Quit":
                continue
            if command.title == "Screenshot":
                command = SystemCommand(
                    "Screenshot",
                    f"Save an SVG of the screen into {self.source.run_dir}",
                    lambda: self.set_timer(0.1, self.save_screenshot_to_run),
                )
            yield command

    def save_screenshot_to_run(self) -> Path | None:
        try:
            path = Path(self.save_screenshot(path=str(self.source.run_dir)))
        except OSError as exc:
            self.notify(f"Screenshot not saved: {exc}", severity="error", markup=False)
            return None
        self.notify(f"Screenshot saved: {path}", title="Screenshot", timeout=8, markup=False)
        return path

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """swarm-dark's `swarm-*` colours: any theme (a partial user file) works."""
        return getattr(self, "_theme_defaults", {})

    # ----------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        source = self.source
        yield ProviderBar(id="provider-bar")
        with Horizontal(id="top"):
            yield AgentGrid([t.index for t in source.tasks], source.states, id="grid")
            yield RunPanel(id="run-panel")
        yield LanePanel(id="lane")
        yield ErrorLog(id="error-log")
        yield StatsFooter(id="stats")
        yield KeyFooter(id="keys")

    def on_mount(self) -> None:
        self._apply_keymap()
        self.grid = self.query_one(AgentGrid)
        self.error_log = self.query_one(ErrorLog)
        self.error_log.state_of = self.source.states.get
        self.error_log.retry_hint = self.retry_cost
        self.run_panel = self.query_one(RunPanel)
        self.lane_panel = self.query_one(LanePanel)
        self.stats_footer = self.query_one(StatsFooter)
        self.figures = self.query_one(StatsFigures)
        self.sparkline = self.query_one(Sparkline)
        problem = getattr(self, "_theme_problem", None)
        if problem:
            self.notify(f"{problem}; {DEFAULT_THEME} instead", title="Theme", severity="warning", markup=False)
        self._fit_grid()
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

    def retry_cost(self, indices: list[int]) -> str:
        """What retrying these agents would cost (steering.py says it)."""
        return ""

    def _apply_keymap(self) -> None:
        """The config's `[keys]` (binding id -> key) over every binding of every screen and
        widget (`KEY_SCOPES`); what is wrong with it (an unknown id, a key taken from another
        binding) is said, naming the file, and listed again at the top of the help."""
        resolved = resolve_keymap(self.config.keys, self.key_scopes(), self.config.path)
        self.keymap = resolved.keymap
        self.keymap_problems = resolved.problems
        if resolved.problems:
            self.notify("\n".join(resolved.problems), title="Keys", severity="warning", timeout=20, markup=False)
        palette = self.keymap.get("app.palette")
        if palette:  # the footer shows the palette's key by this name
            self.COMMAND_PALETTE_BINDING = palette.split(",")[0]  # type: ignore[misc]
        if self.keymap:
            self.set_keymap(self.keymap)

    def key_scopes(self) -> list[type]:
        """Every class whose bindings the keymap moves (the app's `KEY_SCOPES`)."""
        return [type(self)]

    def key_hint(self, binding_id: str) -> str:
        """The key to name in a hint (a notification, the palette) for one of the App's bindings, as bound now."""
        return key_hint(self, type(self), binding_id)

    def on_resize(self, event: Resize) -> None:
        if hasattr(self, "grid"):  # a first resize arrives before mount
            self._fit_grid(event.size.width, event.size.height)
            self._update_panels()

    def _fit_grid(self, width: int | None = None, height: int | None = None) -> None:
        """The grid gets what the side panel and the error log's minimum leave; in a run with
        batches, also what the lane panel and the footer's batch line need beyond two rows
        of that minimum (a 100-agent grid stays whole at 80x24)."""
        width = self.size.width if width is None else width
        height = self.size.height if height is None else height
        batch_rows = self._lane_lines + 1 if self._lane_lines else 0  # the footer's batch line
        extra = batch_rows + self._judge_line  # and its judge line
        rows = height - RESERVED_ROWS - max(0, extra - BATCH_ROWS_FROM_LOG)
        self.grid.fit(width - SIDE_PANEL_MIN, rows, width - SIDE_PANEL_NARROW)

    def _lane_rows(self) -> int:
        """How many batches the lane panel lists at this terminal height."""
        return LANE_ROWS[1] if self.size.height >= LANE_ROWS_TALL_FROM else LANE_ROWS[0]

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
            self.exit(self.source.exit_code())

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
        fatal = getattr(getattr(self.source, "engine", None), "fatal", None)
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

    def _update_panels(self) -> None:
        source = self.source
        self.query_one(ProviderBar).update_from(source)
        phase, detail = self.phase, self.phase_detail
        notes: list[tuple[int, str]] = []
        if source.attached:  # who drives the journal, said once; how to go on, when nobody does
            if not source.running and phase in ("RUNNING", "PAUSED", "STARTING"):
                phase, detail = "NOT RUNNING", counts_detail(source.states)
            notes.append((1, source.liveness()))
            if not source.running:
                states = source.states.values()
                unfinished = any(not state.is_final for state in states)
                failed = any(state is TaskState.FAILED for state in states)
                if unfinished or failed:
                    flag = " --retry-failed" if failed else ""
                    key = self.key_hint("app.retry_failed" if failed else "app.pause")
                    notes.append((1, f"{key}: resume it here, in the background"))
                    notes.append((7, f"or: swarm-tui resume {source.run_dir}{flag}"))
        figures = run_figures(source)
        quality = figures.quality if figures is not None else None
        self.run_panel.update_from(
            source,
            self.grid,
            phase,
            detail,
            self.rate_limits,
            notes,
            quality,
            max_lines=self.grid.fit_height,
            follow=self.follow,
        )
        self._update_lane()
        self._update_judge_line()
        narrow = self.size.width < NARROW_FOOTER_BELOW
        self.figures.update_from(source, self.currency, self._ended_elapsed_s, eta_s=source.eta_s(), narrow=narrow)

    def _update_lane(self) -> None:
        """The lane panel and the footer's batch line, in a run with provider batches; the grid
        gives them their rows when they appear (or grow)."""
        figures = run_figures(self.source)
        batches = figures.batches if figures is not None else {}
        if not batches and not self._lane_lines:
            return  # a run without batches: nothing here changes its screen
        rows = self._lane_rows()
        self.lane_panel.update_from(batches, self.grid, self.source.stats, self._wall_clock(), rows)
        self.stats_footer.set_class(bool(self.source.stats.batch_sent), "-batch")
        lines = self.lane_panel.lines(batches, rows)
        if lines != self._lane_lines:
            self._lane_lines = lines
            self._fit_grid()

    def _update_judge_line(self) -> None:
        """The footer's judge line, once the judge has cost something (the grid gives it a row
        only past what the error log spares, as for the batch line)."""
        wanted = self.source.stats.judge_cost_usd > 0
        if wanted != self._judge_line:
            self._judge_line = wanted
            self.stats_footer.set_class(wanted, "-judge")
            self._fit_grid()

    # ----------------------------------------------------------------- which keys make sense now

    STEERING_ACTIONS: ClassVar[tuple[tuple[str, tuple[object, ...]], ...]] = ()
    """The actions whose enabled state the footer shows (steering.py names them)."""
    FOOTER_LABELS: ClassVar[tuple[str, ...]] = ("app.quit", "app.pause")
    """The bindings whose footer label may change with the run (`footer_label`)."""

    def footer_label(self, binding_id: str) -> str | None:
        return None

    def _refresh_bindings_if_changed(self) -> None:
        """Refresh the keys (enabled, and their labels) only when they changed: a refresh rebuilds the footer."""
        enabled = tuple(self.check_action(action, parameters) for action, parameters in self.STEERING_ACTIONS)
        labels = tuple(self.footer_label(binding_id) for binding_id in self.FOOTER_LABELS)
        if (enabled, labels) != self._enabled_keys:
            self._enabled_keys = (enabled, labels)
            self.refresh_bindings()

    def on_key(self, event: Key) -> None:
        """A key no binding took: if it is bound to an action that makes no sense now, say why."""
        if self._explain_key(event.key):
            event.stop()

    def _explain_key(self, key: str) -> bool:
        return False
