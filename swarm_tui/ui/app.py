"""The swarm-tui console: the app, its factory, and the entry points the CLI calls.

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

import asyncio
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.events import Key, Resize
from textual.screen import Screen
from textual.widgets import Footer, Sparkline
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
    PhaseChanged,
    QualityDrift,
    RateGateClosed,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TaskSucceeded,
    ToolCallEnded,
)
from ..errors import InputError
from ..headless import print_summary
from ..session import SwarmSession
from .aggregate import AggregateScreen
from .commands import SwarmCommands
from .detail import AgentDetailScreen
from .dialogs import ConfirmScreen, HelpScreen
from .errorlog import ErrorLog, Failure
from .estimate import EstimateScreen
from .format import short_path
from .grid import STATE_LABELS, AgentGrid
from .keys import KeyRow, help_rows, key_hint, resolve_keymap
from .panels import LanePanel, ProviderBar, RunPanel, StatsFigures, StatsFooter
from .provider import ProviderScreen
from .source import LiveRun, RunSource, run_figures
from .themes import (
    DEFAULT_THEME,
    THEME_ORDER,
    bundled_themes,
    load_theme_file,
    looks_like_path,
    swarm_variable_defaults,
)

REFRESH_HZ = 10
CONCURRENCY = Binding.Group("Limit", compact=True)
PANELS_EVERY_S = 0.25
"""The figures and the legend repaint at 4 Hz: readable, and half the cost of the grid's 10 Hz."""
SPARK_SECONDS = 120
ACTIVE_STATES = frozenset({TaskState.QUEUED, TaskState.RUNNING, TaskState.RETRYING})
"""States of a task that `x` can cancel."""
SIDE_PANEL_MIN = 40
RESERVED_ROWS = 1 + 3 + 1 + 7
"""Provider bar, stats footer, key footer, and the least the error log keeps."""
LANE_ROWS_TALL_FROM = 40
"""From this terminal height the lane panel lists up to `LANE_ROWS[1]` batches, else `LANE_ROWS[0]`."""
LANE_ROWS = (2, 5)
BATCH_ROWS_FROM_LOG = 2
"""Rows the batch lane's lines take from the error log's least (7) before the grid gives any."""


def display_currency_or_usd(config: Config, provider: str) -> DisplayCurrency:
    """The footer's currency: the config's, at the provider's billing rate (¥1 = $1 at a relay);
    a display preference the config gets wrong never stops the console (USD then)."""
    try:
        return display_currency(config, provider)
    except InputError:
        return USD


def concurrency_step(limit: int, direction: int) -> int:
    """The next limit for `+`/`-` on a ladder: 1-10 by 1, to 50 by 5, to 200 by 10, then by 50."""
    if direction > 0:
        for band_end, step in ((10, 1), (50, 5), (200, 10)):
            if limit < band_end:
                return (limit // step + 1) * step
        return (limit // 50 + 1) * 50
    for band_start, step in ((200, 50), (50, 10), (10, 5)):
        if limit > band_start:
            return max(band_start, -(-limit // step) * step - step)
    return max(1, limit - 1)


class SwarmApp(App[int]):
    """Watch and steer one swarm run. The result (`run_async()`'s value) is the exit code."""

    TITLE = "swarm-tui"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {SwarmCommands}

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "retry_failed", "Retry", id="app.retry_failed", tooltip="retry every failed agent"),
        Binding("R", "retry_cursor", "Retry agent", id="app.retry_agent", show=False),
        Binding("x", "cancel_cursor", "Cancel agent", id="app.cancel_agent", show=False),
        Binding("p", "toggle_pause", "Pause", id="app.pause", tooltip="pause / resume dispatch"),
        Binding("a", "abort", "Abort", id="app.abort"),
        Binding(
            "plus,equals_sign", "concurrency(1)", "More", id="app.concurrency_up", key_display="+", group=CONCURRENCY
        ),
        Binding("minus", "concurrency(-1)", "Less", id="app.concurrency_down", key_display="-", group=CONCURRENCY),
        Binding("t", "cycle_theme", "Theme", id="app.theme"),
        Binding("h", "toggle_heat", "Heat view", id="app.heat", show=False),
        Binding("e", "provider", "Provider", id="app.provider"),
        Binding("g", "aggregate", "Aggregate", id="app.aggregate", tooltip="what the aggregator wrote"),
        Binding("dollar_sign", "estimate", "Cost projection", id="app.estimate", key_display="$", show=False),
        Binding("m", "flush_memory", "Flush memory", id="app.flush_memory", show=False),
        Binding("question_mark", "help", "Help", id="app.help", key_display="?"),
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding(  # Textual's own palette binding, with an id (Textual adds none when one exists)
            App.COMMAND_PALETTE_BINDING,
            "command_palette",
            "palette",
            id="app.palette",
            show=False,
            priority=True,
            tooltip="Open the command palette",
        ),
    ]

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
    ) -> None:
        """`wall_clock`: epoch seconds, for the provider batches' times (their 24 h window)."""
        super().__init__()
        self.source = source
        self.config = config if config is not None else load_config()
        self.currency = display_currency_or_usd(self.config, source.profile.name)
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
        self._enabled_keys: tuple[bool | None, ...] = ()
        self.keymap: dict[str, str] = {}
        """The config's `[keys]` as applied: binding id -> keys (Textual's names, comma-separated)."""
        self.keymap_problems: list[str] = []
        self._worker: Worker | None = None
        self.phase = "STARTING"
        self.phase_detail = ""
        self.rate_limits: tuple[int | None, int | None] = (None, None)
        self._ended_elapsed_s: float | None = None
        """The run's elapsed time when it ended: the footer's clock stops there until it runs again."""
        self._spark: deque[float] = deque(maxlen=SPARK_SECONDS)
        self._spark_bucket: list[float] = []
        self._last_second = float("-inf")
        self._panels_at = float("-inf")
        self._theme_cycle = self._register_themes(theme or self.config.theme or DEFAULT_THEME)

    # ----------------------------------------------------------------- themes

    def _register_themes(self, wanted: str) -> list[str]:
        bundled = bundled_themes()
        self._theme_defaults = swarm_variable_defaults()
        for theme in bundled:
            self.register_theme(theme)
        cycle = [t.name for t in bundled if t.name in THEME_ORDER]
        if looks_like_path(wanted):
            user = load_theme_file(Path(wanted).expanduser())
            self.register_theme(user)
            cycle.append(user.name)
            wanted = user.name
        elif wanted not in cycle and wanted in self.available_themes:
            cycle.append(wanted)
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        return cycle

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
        """swarm-dark's `swarm-*` colours: any theme (a Textual one, a partial user file) works."""
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
        yield Footer(id="keys")

    def on_mount(self) -> None:
        self._apply_keymap()
        self.grid = self.query_one(AgentGrid)
        self.error_log = self.query_one(ErrorLog)
        self.run_panel = self.query_one(RunPanel)
        self.lane_panel = self.query_one(LanePanel)
        self.stats_footer = self.query_one(StatsFooter)
        self.figures = self.query_one(StatsFigures)
        self.sparkline = self.query_one(Sparkline)
        self._fit_grid()
        self._events.extend(getattr(self.source, "history", ()))  # a resumed run's earlier sessions
        self._drain(replay=True)
        self.source.subscribe(self._events.append)
        self.grid.focus()
        self.set_interval(1 / self._refresh_hz, self._drain, name="drain")
        if self._start:
            self._start_run()
        else:
            self._settle_phase()
        self._drain()

    def _apply_keymap(self) -> None:
        """The config's `[keys]` (binding id -> key) over every binding of every screen and
        widget (`KEY_SCOPES`); what is wrong with it (an unknown id, a key taken from another
        binding) is said, naming the file, and listed again at the top of the help."""
        resolved = resolve_keymap(self.config.keys, (scope for _, scope in KEY_SCOPES), self.config.path)
        self.keymap = resolved.keymap
        self.keymap_problems = resolved.problems
        if resolved.problems:
            self.notify("\n".join(resolved.problems), title="Keys", severity="warning", timeout=20, markup=False)
        palette = self.keymap.get("app.palette")
        if palette:  # the footer shows the palette's key by this name
            self.COMMAND_PALETTE_BINDING = palette.split(",")[0]  # type: ignore[misc]
        if self.keymap:
            self.set_keymap(self.keymap)

    def key_hint(self, binding_id: str) -> str:
        """The key to name in a hint (a notification, the palette) for one of the App's bindings, as bound now."""
        return key_hint(self, type(self), binding_id)

    def on_resize(self, event: Resize) -> None:
        if hasattr(self, "grid"):  # a first resize arrives before mount
            self._fit_grid(event.size.width, event.size.height)

    def _fit_grid(self, width: int | None = None, height: int | None = None) -> None:
        """The grid gets what the side panel and the error log's minimum leave; in a run with
        batches, also what the lane panel and the footer's batch line need beyond two rows
        of that minimum (a 100-agent grid stays whole at 80x24)."""
        width = self.size.width if width is None else width
        height = self.size.height if height is None else height
        batch_rows = self._lane_lines + 1 if self._lane_lines else 0  # the footer's batch line
        extra = batch_rows + self._judge_line  # and its judge line
        self.grid.fit(width - SIDE_PANEL_MIN, height - RESERVED_ROWS - max(0, extra - BATCH_ROWS_FROM_LOG))

    def _lane_rows(self) -> int:
        """How many batches the lane panel lists at this terminal height."""
        return LANE_ROWS[1] if self.size.height >= LANE_ROWS_TALL_FROM else LANE_ROWS[0]

    def _settle_phase(self) -> None:
        """The phase of a run nobody has started here: what its states say."""
        counts = Counter(self.source.states.values())
        unfinished = sum(n for state, n in counts.items() if not state.is_final)
        failed = counts[TaskState.FAILED]
        self.phase = "DONE" if not (failed or unfinished) else "FINISHED" if not unfinished else "NOT STARTED"
        self.phase_detail = self._counts_detail()

    def _counts_detail(self) -> str:
        counts = Counter(self.source.states.values())
        unfinished = sum(n for state, n in counts.items() if not state.is_final)
        return f"{counts[TaskState.SUCCEEDED]} done, {counts[TaskState.FAILED]} failed" + (
            f", {unfinished} unfinished" if unfinished else ""
        )

    # ----------------------------------------------------------------- the engine as a worker

    def _start_run(self) -> None:
        self.phase, self.phase_detail = "STARTING", ""
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
        for event in events:
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
                case AttemptEnded(attempt=attempt) if attempt.error is not None:
                    failures.append(Failure.side(attempt))
                case EndpointSwitched(endpoint=endpoint, reason=reason):
                    self.phase_detail = f"now sending to {endpoint}: {reason}"
                    if not replay:
                        self.notify(
                            f"New attempts go to {endpoint}: {reason}",
                            title="Endpoint switched",
                            severity="warning",
                            timeout=8,
                            markup=False,
                        )
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
                    self.notify(
                        f"Round {round_number}: {detail}.",
                        title="Quality drift",
                        severity="warning",
                        timeout=10,
                        markup=False,
                    )
                case RunStarted():
                    self.phase, self.phase_detail = "RUNNING", ""
                    self._ended_elapsed_s = None
                case RunPaused():
                    resume = self.key_hint("app.pause")
                    self.phase, self.phase_detail = "PAUSED", f"in-flight calls finish; {resume} resumes"
                case RunResumed():
                    self.phase, self.phase_detail = "RUNNING", ""
                case RateLimitsLearned(rpm=rpm, tpm=tpm):
                    self.rate_limits = (rpm, tpm)
                case RateGateClosed(seconds=seconds, asked_s=asked):
                    capped = f" (it asked {asked:g}s; capped by --max-retry-after)" if asked else ""
                    self.phase_detail = f"provider asked to wait: nothing sent for {seconds:.1f}s (429){capped}"
                case PhaseChanged(phase=phase, detail=detail):
                    self.phase, self.phase_detail = phase.upper(), detail
                    if phase == "done" and (self.source.run_dir / "aggregate.md").exists():
                        self._aggregate_ready = True
                    if phase == "done" and self._aggregate_ready and not replay:
                        self.notify(
                            f"The aggregate is written: press {self.key_hint('app.aggregate')} to read it",
                            title="Aggregate",
                            timeout=10,
                            markup=False,
                        )
                case RunStopping(reason=reason):
                    self.phase, self.phase_detail = "STOPPING", reason
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
            self._tick_second()
            now = self._clock()
            if now - self._panels_at >= PANELS_EVERY_S or (self.phase, self.phase_detail) != phase_before:
                self._panels_at = now
                self._update_panels()
            self._refresh_bindings_if_changed()
        self._announce_if_over()

    def _finished(self, finished: RunFinished, announce: bool = True) -> None:
        self._ended_elapsed_s = self.source.stats.elapsed_s
        unfinished = finished.cancelled
        if finished.aborted:
            self.phase = "ABORTED"
        elif finished.failed or unfinished:
            self.phase = "FINISHED"
        else:
            self.phase = "DONE"
        parts = [f"{finished.succeeded} done", f"{finished.failed} failed"]
        if unfinished:
            parts.append(f"{unfinished} unfinished")
        self.phase_detail = ", ".join(parts)
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
        self.notify(
            f"Run {'aborted' if finished.aborted else 'finished'}: {detail}. {hint}.",
            title=phase,
            severity="warning" if finished.failed or finished.cancelled else "information",
            timeout=8,
            markup=False,
        )

    def _tick_due(self) -> bool:
        return self._clock() - self._last_second >= 1.0

    def _tick_second(self) -> None:
        """Once a second: the sparkline, heat bounds, and figures that move with time alone."""
        if not self._tick_due():
            return
        self._last_second = self._clock()
        self.error_log.tick(self._last_second)
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
        notes: list[str] = []
        if source.attached:  # who drives the journal, said once; how to go on, when nobody does
            if not source.running and phase in ("RUNNING", "PAUSED", "STARTING"):
                phase, detail = "NOT RUNNING", self._counts_detail()
            notes.append(source.liveness())
            if not source.running:
                states = source.states.values()
                unfinished = any(not state.is_final for state in states)
                failed = any(state is TaskState.FAILED for state in states)
                if unfinished or failed:
                    flag = " --retry-failed" if failed else ""
                    notes.append(f"resume: swarm-tui resume {source.run_dir}{flag}")
        figures = run_figures(source)
        quality = figures.quality if figures is not None else None
        self.run_panel.update_from(
            source, self.grid, phase, detail, self.rate_limits, notes, quality, max_lines=self.grid.fit_height
        )
        self._update_lane()
        self._update_judge_line()
        self.figures.update_from(source, self.currency, self._ended_elapsed_s)

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

    STEERING_ACTIONS: ClassVar[tuple[tuple[str, tuple[object, ...]], ...]] = (
        ("retry_failed", ()),
        ("retry_cursor", ()),
        ("toggle_pause", ()),
        ("abort", ()),
        ("concurrency", (1,)),
        ("aggregate", ()),
        ("flush_memory", ()),
    )

    def _refresh_bindings_if_changed(self) -> None:
        """Refresh the keys' enabled state only when it changed: a refresh rebuilds the footer."""
        enabled = tuple(self.check_action(action, parameters) for action, parameters in self.STEERING_ACTIONS)
        if enabled != self._enabled_keys:
            self._enabled_keys = enabled
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        source = self.source
        if not hasattr(self, "grid"):
            return True
        match action:
            case "retry_failed":
                if source.attached and not source.can_steer and self._any_failed():
                    return True  # nobody runs it: the action says how to resume and retry
                return True if source.can_steer and self._any_failed() else None
            case "retry_cursor":
                index = self.grid.cursor_index
                state = source.states.get(index) if index is not None else None
                again = state is TaskState.FAILED or (state is TaskState.CANCELLED and source.running)
                return True if source.can_steer and again else None
            case "cancel_cursor":
                index = self.grid.cursor_index
                unfinished = index is not None and source.states.get(index) in ACTIVE_STATES
                return True if source.can_steer and source.running and unfinished else None
            case "toggle_pause":
                if not source.can_steer:
                    return None
                return True if source.running or (not source.attached and self._any_unfinished()) else None
            case "abort":
                return True if source.can_steer and source.running else None
            case "concurrency":
                return True if source.can_steer else None
            case "aggregate":  # hidden, not dimmed, until there is one: most runs never have one
                return self._aggregate_ready
            case "flush_memory":
                return True if source.can_steer and source.has_memory else None
        return True

    def why_not(self, action: str) -> str | None:
        """Why a key whose action makes no sense now does nothing (None: no reason to give)."""
        source = self.source
        match action:
            case "aggregate":
                return (
                    f"No aggregate yet: {source.run_dir / 'aggregate.md'} is written by a swarm job's "
                    "aggregate step, once its last round is done."
                )
            case "flush_memory":
                if not source.can_steer:
                    return "Nothing to flush: nobody is running this journal."
                return (
                    "No rolling memory to flush: this run has one round (a swarm job with memory rounds > 1 keeps one)."
                )
            case "retry_cursor":
                index = self.grid.cursor_index
                if index is None:
                    return None
                if not source.can_steer:
                    return (
                        f"Nobody is running this journal: swarm-tui resume {source.run_dir} --retry-failed "
                        "retries the failed agents."
                    )
                label = STATE_LABELS[source.states.get(index, TaskState.QUEUED)]
                return (
                    f"Agent {index + 1} is {label}: {self.key_hint('app.retry_agent')} retries a failed agent "
                    f"({self.key_hint('app.retry_failed')} retries every failed one)."
                )
        return None

    def on_key(self, event: Key) -> None:
        """A key no binding took: if it is bound to an action that makes no sense now, say why
        (a hidden or dimmed key otherwise does nothing visible)."""
        bindings = self._bindings.copy()
        if self.keymap:
            bindings.apply_keymap(self.keymap)
        for binding in bindings.key_to_bindings.get(event.key, []):
            base, _, _ = binding.action.partition("(")
            if self.check_action(base, ()) is not True and (reason := self.why_not(base)):
                event.stop()
                self.notify(reason, timeout=5, markup=False)
                return

    def _any_failed(self) -> bool:
        return self.source.stats.failed > 0

    def _any_unfinished(self) -> bool:
        stats = self.source.stats
        return stats.succeeded + stats.failed < len(self.source.tasks)

    # ----------------------------------------------------------------- actions

    def retry_agents(self, indices: list[int] | None) -> list[int]:
        """Queue failed agents again (all when `indices` is None); restart the engine if it ended."""
        source = self.source
        if not source.can_steer:
            self.notify(
                f"Nobody is running this journal: resume it with `swarm-tui resume {source.run_dir} --retry-failed`.",
                severity="warning",
                markup=False,
            )
            return []
        queued = source.retry(indices)
        if not queued:
            if indices:
                states = ", ".join(
                    f"agent {i + 1} is {source.states.get(i, TaskState.QUEUED).value}" for i in indices[:3]
                )
                self.notify(f"Nothing to retry: {states}.", markup=False)
            else:
                self.notify("Nothing to retry: no agent has failed.", markup=False)
            return []
        if not source.attached and not source.running:
            self._start_run()
        what = f"agent {queued[0] + 1}" if len(queued) == 1 else f"{len(queued)} failed agents"
        verb = "asked the running engine to retry" if source.attached else "retrying"
        self.notify(f"{verb.capitalize()} {what}.", timeout=3, markup=False)
        self._drain()
        return queued

    def action_retry_failed(self) -> None:
        self.retry_agents(None)

    def action_retry_cursor(self) -> None:
        index = self.grid.cursor_index
        if index is not None:
            self.retry_agents([index])

    def action_cancel_cursor(self) -> None:
        """`x`: stop the agent under the cursor; `R` starts it again (from its last completed step)."""
        index = self.grid.cursor_index
        if index is None:
            return
        if self.source.cancel([index]):
            again = self.key_hint("app.retry_agent")
            asked = "Asked the running engine to cancel" if self.source.attached else "Cancelled"
            self.notify(f"{asked} agent {index + 1}; {again} starts it again.", timeout=4, markup=False)
            self._drain()

    def action_toggle_pause(self) -> None:
        source = self.source
        if not source.running:
            if not source.attached and self._any_unfinished():
                self.notify("Resuming the unfinished agents.", timeout=3)
                self._start_run()
            return
        if source.paused:
            source.resume()
            if source.attached:
                self.notify("Asked the running engine to resume.", timeout=3)
        else:
            source.pause()
            self.notify(
                f"Paused: nothing new is sent; in-flight calls finish. {self.key_hint('app.pause')} resumes."
                if not source.attached
                else "Asked the running engine to pause.",
                timeout=4,
            )
        self._drain()

    def action_abort(self) -> None:
        source = self.source
        where = "the run in another process" if source.attached else "the run"
        batch = (
            f" Open provider batches are cancelled ({source.stats.batch_waiting} lines waiting); the lines they "
            "completed are kept."
            if source.stats.batch_waiting
            else ""
        )
        body = (
            f"In-flight calls are cancelled and nothing new is sent.{batch} Finished agents are kept; the journal "
            f"stays resumable:\n  swarm-tui resume {source.run_dir}"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                batches = " and the open batches" if source.stats.batch_waiting else ""
                source.abort("aborted by user")
                self.notify(
                    f"Aborting: cancelling in-flight calls{batches}…"
                    if not source.attached
                    else "Asked the running engine to abort.",
                    timeout=4,
                )
                self._drain()

        self.push_screen(ConfirmScreen(f"Abort {where}?", body, yes="Abort"), answered)

    def action_concurrency(self, direction: int) -> None:
        source = self.source
        ceiling = source.set_concurrency(concurrency_step(source.ceiling, direction), "user")
        asked = " (asked the running engine)" if source.attached else ""
        self.notify(
            f"Concurrency ceiling: {ceiling}{asked}. The adaptive limit (now {source.limit}) moves under it: "
            "up while calls are clean, down on 429s and timeouts.",
            timeout=4,
            markup=False,
        )
        self._drain()

    def action_cycle_theme(self) -> None:
        cycle = self._theme_cycle or [self.theme]
        position = cycle.index(self.theme) if self.theme in cycle else -1
        self.theme = cycle[(position + 1) % len(cycle)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    def action_toggle_heat(self) -> None:
        self.grid.heat = not self.grid.heat
        self.notify(
            "Latency heat view: done agents coloured from fastest to slowest fifth (the scale is beside "
            f"the grid); {self.key_hint('app.heat')} again for states."
            if self.grid.heat
            else "State view.",
            timeout=3,
        )
        self._last_second = float("-inf")
        self._tick_second()
        self._update_panels()

    def action_provider(self) -> None:
        self.push_screen(ProviderScreen(self.config, self.source))

    def action_estimate(self) -> None:
        self.push_screen(EstimateScreen(self.source.stats, self.config, self.currency))

    def action_aggregate(self) -> None:
        self.push_screen(AggregateScreen(self.source.run_dir))

    def action_flush_memory(self) -> None:
        flushed = self.source.flush_memory()
        what = "asked the run to flush" if flushed is None else f"flushed {flushed} rounds of"
        self.notify(
            f"{what} the rolling memory; the next round starts from the shared context", title="Memory", markup=False
        )

    def action_help(self) -> None:
        self.push_screen(
            HelpScreen(self.key_help(), str(self.source.run_dir), short_path(self.config.path), self.keymap_problems)
        )

    def key_help(self) -> list[tuple[str, list[KeyRow]]]:
        """Every binding with an id, grouped by where it applies: its keys as bound now (the
        keymap may have moved them), its id, what it does."""
        return [(where, help_rows(scope, self.keymap)) for where, scope in KEY_SCOPES]

    def open_agent(self, index: int) -> None:
        self.grid.move_to(index)
        self.push_screen(AgentDetailScreen(self.source, index))

    def follow_cursor(self, index: int) -> None:
        self.grid.move_to(index)

    async def action_quit(self) -> None:
        source = self.source
        if self._quitting or source.attached or not source.running:
            self.exit(source.exit_code())
            return
        stats = source.stats
        waiting = stats.total - stats.done - stats.in_flight - stats.batch_waiting
        batch = (
            f" Open provider batches run on at the provider ({stats.batch_waiting} lines waiting): resume "
            "collects them (a to cancel them instead)."
            if stats.batch_waiting
            else ""
        )

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if not source.running:
                self.exit(source.exit_code())
                return
            self._quitting = True
            source.abort("aborted by user (quit)", leave_batches=True)
            self.notify("Stopping: cancelling in-flight calls, then quitting…", timeout=10)

        self.push_screen(
            ConfirmScreen(
                "A run is in flight. Quit?",
                f"{stats.in_flight} calls in flight and {max(0, waiting)} agents waiting will be stopped; "
                f"finished agents are kept.{batch} The journal stays resumable:\n  swarm-tui resume {source.run_dir}",
                yes="Quit",
            ),
            answered,
        )

    # ----------------------------------------------------------------- messages from widgets

    @on(AgentGrid.Opened)
    def _open_detail(self, event: AgentGrid.Opened) -> None:
        self.push_screen(AgentDetailScreen(self.source, event.index))

    @on(AgentGrid.CursorMoved)
    def _cursor_moved(self, event: AgentGrid.CursorMoved) -> None:
        self._update_panels()
        self._refresh_bindings_if_changed()

    @on(ErrorLog.RetryRequested)
    def _retry_from_log(self, event: ErrorLog.RetryRequested) -> None:
        self.grid.move_to(event.index)
        self.retry_agents([event.index])


KEY_SCOPES: tuple[tuple[str, type[DOMNode]], ...] = (
    ("Everywhere (a pane with focus may take the same key)", SwarmApp),
    ("Grid (when it has focus)", AgentGrid),
    ("Error log (when it has focus: Tab)", ErrorLog),
    ("Agent detail (an agent opened from the grid)", AgentDetailScreen),
    ("Confirmations (abort, quit during a run)", ConfirmScreen),
    ("This help", HelpScreen),
    ("Provider pane", ProviderScreen),
    ("Cost projection", EstimateScreen),
    ("Aggregate", AggregateScreen),
)
"""Where bindings apply, as the help groups them: every class whose bindings the keymap moves."""


# --------------------------------------------------------------------------- factory and entry points


def make_app(
    source: RunSource | SwarmSession,
    *,
    config: Config | None = None,
    theme: str | None = None,
    start: bool = True,
    clock: Callable[[], float] | None = None,
    refresh_hz: float = REFRESH_HZ,
    wall_clock: Callable[[], float] = time.time,
) -> SwarmApp:
    """The app for a session (run here) or a run source (e.g. `AttachedRun`). Tests pass a
    session on a seeded simulator, a config on a temporary path, and a frozen clock."""
    run_source = LiveRun(source) if isinstance(source, SwarmSession) else source
    return SwarmApp(
        run_source,
        config=config,
        theme=theme,
        start=start,
        clock=clock,
        refresh_hz=refresh_hz,
        wall_clock=wall_clock,
    )


def run_tui(session: SwarmSession, theme: str | None = None) -> int:
    """`swarm-tui run` / `resume`: run the session in the TUI; the exit code of the run."""

    async def main() -> int:
        app = make_app(session, theme=theme)
        try:
            code = await app.run_async()
            if session.summary is not None or session.engine.tasks:  # the screen is gone: say where things stand
                print_summary(session.summary or session.finalize(), session.engine.outcome(), session, sys.stderr)
        finally:
            await session.aclose()
        return 1 if code is None else code

    return asyncio.run(main())


def run_attached(run_dir: Path, theme: str | None = None) -> int:
    """`swarm-tui attach RUN_DIR`: the same screen for a run another process drives."""
    from ..attach import AttachedRun

    source = AttachedRun(run_dir)

    async def main() -> int:
        app = make_app(source, theme=theme)
        try:
            code = await app.run_async()
        finally:
            await source.aclose()
        return 0 if code is None else code

    return asyncio.run(main())
