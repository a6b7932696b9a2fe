"""The console's core: its layout, its themes, its panels. `drain.py` brings the engine's news
to it, `steering.py` adds what the keys do, `app.py` binds them (`SwarmApp`).

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

from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.events import Key, Resize
from textual.screen import Screen
from textual.widgets import Sparkline
from textual.worker import Worker

from swarm_tui.config import Config, load_config
from swarm_tui.core.errors import InputError
from swarm_tui.core.events import RunFinished, TaskState
from swarm_tui.frontend.source import RunSource
from swarm_tui.pricing.currency import USD, DisplayCurrency, display_currency
from swarm_tui.ui.keys import key_hint, resolve_keymap
from swarm_tui.ui.themes import (
    DEFAULT_THEME,
    THEME_ORDER,
    bundled_themes,
    drop_textual_themes,
    load_theme_file,
    looks_like_path,
    remember_theme,
    swarm_variable_defaults,
)
from swarm_tui.ui.widgets.errorlog.error_log import ErrorLog
from swarm_tui.ui.widgets.footer.key_footer import KeyFooter
from swarm_tui.ui.widgets.footer.stats_footer import NARROW_FOOTER_BELOW, StatsFigures, StatsFooter, footer_lanes
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.ui.widgets.panels.lane_panel import LanePanel
from swarm_tui.ui.widgets.panels.provider_bar import ProviderBar
from swarm_tui.ui.widgets.panels.run_panel import RunPanel
from swarm_tui.view import actions
from swarm_tui.view.phase import counts_detail

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
    """Watch one swarm run: the screen, its panels and themes. The result is the exit code."""

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
        self.view = source.view
        """The run as its events tell it: what the widgets paint (the source feeds it)."""
        self.config = config if config is not None else load_config()
        self.currency = display_currency_or_usd(self.config, source.profile.name)
        self.bell_on = bell
        self._start = start
        self._clock = clock or time.monotonic
        self._wall_clock = wall_clock
        self._lane_lines = 0
        """The lane panel's height as the grid was last fitted to it (0: no batches)."""
        self._footer_lanes: tuple[str, ...] = ()
        """The lanes' lines the footer has past its three (`footer_lanes`: batch, judge, cache)."""
        self._finish_news: tuple[RunFinished, str, str] | None = None
        """The last `RunFinished` not yet announced: announced when the run's worker is over (see
        `_announce_if_over`), so a swarm of six rounds says "finished" once, not six times over the panels."""
        if clock is not None:  # a frozen clock (snapshot tests): elapsed, rates and ETA hold still
            source.stats.clock = clock
            source.stats.started_at = clock()
        self._refresh_hz = refresh_hz
        self._quitting = False
        self.signalled: str | None = None
        """The signal that stopped the run (SIGHUP, SIGTERM): it exits 130 once its outputs are written."""
        self.aggregate_ready = (source.run_dir / "aggregate.md").exists()
        """The swarm's aggregate is written: `g` shows it."""
        self._enabled_keys: tuple[object, ...] = ()
        self.keymap: dict[str, str] = {}
        """The config's `[keys]` as applied: binding id -> keys (Textual's names, comma-separated)."""
        self.keymap_problems: list[str] = []
        self._worker: Worker | None = None
        self._painted_phase: tuple[str, str] = ("", "")
        """The phase and detail the panels show (a new one is painted at once, not at 4 Hz)."""
        self._ended_elapsed_s: float | None = None
        """The run's elapsed time when it ended: the footer's clock stops there until it runs again."""
        self._spark: deque[float] = deque(maxlen=SPARK_SECONDS)
        self._spark_bucket: list[float] = []
        self._last_second = float("-inf")
        self._panels_at = float("-inf")
        self._panels_stale = False
        """Events came that the panels have not been painted with yet (their 4 Hz held them back)."""
        self.follow: str | None = None
        """What the grid's cursor follows: None, "active" or "failed" (`f`)."""
        self._theme_paths: dict[str, str] = {}
        self._theme_cycle = self._register_themes(theme or self.config.theme or DEFAULT_THEME)
        self._theme_saved = self.theme

    # ----------------------------------------------------------------- the phase (the view's; the app sets a few)

    @property
    def phase(self) -> str:
        return self.view.phases.phase

    @phase.setter
    def phase(self, value: str) -> None:
        self.view.phases.phase = value

    @property
    def phase_detail(self) -> str:
        return self.view.phases.detail

    @phase_detail.setter
    def phase_detail(self, value: str) -> None:
        self.view.phases.detail = value

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
            yield AgentGrid(list(source.tasks), source.states, self.view.agents, id="grid")
            yield RunPanel(id="run-panel")
        yield LanePanel(id="lane")
        yield ErrorLog(id="error-log")
        yield StatsFooter(id="stats")
        yield KeyFooter(id="keys")

    def _mount_widgets(self) -> None:
        """The widgets the drain and the panels update, found once; the keymap applied."""
        self._apply_keymap()
        self.view.phases.resume_key = self.key_hint("app.pause")  # the pause's detail names it
        self.grid = self.query_one(AgentGrid)
        self.error_log = self.query_one(ErrorLog)
        self.error_log.state_of = self.source.states.get
        self.error_log.retry_hint = self.retry_cost
        self.error_log.clock = self._clock
        self.provider_bar = self.query_one(ProviderBar)
        self.run_panel = self.query_one(RunPanel)
        self.lane_panel = self.query_one(LanePanel)
        self.stats_footer = self.query_one(StatsFooter)
        self.figures = self.query_one(StatsFigures)
        self.sparkline = self.query_one(Sparkline)
        problem = getattr(self, "_theme_problem", None)
        if problem:
            self.notify(f"{problem}; {DEFAULT_THEME} instead", title="Theme", severity="warning", markup=False)
        self._fit_grid()

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
            self.update_panels()

    def _fit_grid(self, width: int | None = None, height: int | None = None) -> None:
        """The grid gets what the side panel and the error log's minimum leave; in a run with
        batches, a judge or a cache, also what the lane panel and the footer's lanes' lines need
        beyond two rows of that minimum (a 100-agent grid stays whole at 80x24)."""
        width = self.size.width if width is None else width
        height = self.size.height if height is None else height
        extra = self._lane_lines + len(self._footer_lanes)
        rows = height - RESERVED_ROWS - max(0, extra - BATCH_ROWS_FROM_LOG)
        self.grid.fit(width - SIDE_PANEL_MIN, rows, width - SIDE_PANEL_NARROW)

    def _lane_rows(self) -> int:
        """How many batches the lane panel lists at this terminal height."""
        return LANE_ROWS[1] if self.size.height >= LANE_ROWS_TALL_FROM else LANE_ROWS[0]

    def update_panels(self) -> None:
        """Paint the provider bar, the run panel, the lane panel and the footer from the view
        (the drain does at 4 Hz; a key that changes what they say does at once)."""
        if not self.provider_bar.is_attached:  # the app shuts down: its widgets are pruned
            return
        source = self.source
        self._panels_stale = False
        self.provider_bar.update_from(source)
        phase, detail = self.phase, self.phase_detail
        notes: list[tuple[int, str]] = []
        if source.attached:  # who drives the journal, said once; how to go on, when nobody does
            if not source.running and phase in ("RUNNING", "PAUSED", "STARTING"):
                phase, detail = "NOT RUNNING", counts_detail(source.states)
            notes.append((1, source.liveness(short=0 < self.run_panel.content_size.width < 36)))
            if source.resumable:  # (a stopped writer's lock would refuse a resume: none is offered)
                states = source.states.values()
                unfinished = any(not state.is_final for state in states)
                failed = any(state is TaskState.FAILED for state in states)
                if unfinished or failed:
                    flag = " --retry-failed" if failed else ""
                    key = self.key_hint("app.retry_failed" if failed else "app.pause")
                    notes.append((1, f"{key}: resume it here, in the background"))
                    notes.append((7, f"or: swarm-tui resume {source.run_dir}{flag}"))
        self._painted_phase = (self.phase, self.phase_detail)
        self.run_panel.update_from(
            source, self.grid, phase, detail, notes, max_lines=self.grid.fit_height, follow=self.follow
        )
        self._update_lane()
        self._update_footer_lanes()
        narrow = self.size.width < NARROW_FOOTER_BELOW
        self.figures.update_from(source, self.currency, self._ended_elapsed_s, eta_s=source.eta_s(), narrow=narrow)

    def _update_lane(self) -> None:
        """The lane panel, in a run with provider batches; the grid gives it its rows when it
        appears (or grows)."""
        batches = self.view.figures.batches
        if not batches and not self._lane_lines:
            return  # a run without batches: nothing here changes its screen
        rows = self._lane_rows()
        self.lane_panel.update_from(batches, self.grid, self.source.stats, self._wall_clock(), rows)
        lines = self.lane_panel.lines(batches, rows)
        if lines != self._lane_lines:
            self._lane_lines = lines
            self._fit_grid()

    def _update_footer_lanes(self) -> None:
        """The footer's lines past its three (the batch lane's, the judge's, the cache's), as the
        run comes to have them (the grid gives them rows only past what the error log spares)."""
        lanes = footer_lanes(self.source.stats)
        if lanes != self._footer_lanes:
            self._footer_lanes = lanes
            self.stats_footer.show_lanes(lanes)
            self._fit_grid()

    # ----------------------------------------------------------------- which keys make sense now

    @property
    def cursor_index(self) -> int | None:
        """The agent under the grid's cursor (what `R` and `x` act on)."""
        return self.grid.cursor_index if hasattr(self, "grid") else None

    def footer_label(self, binding_id: str) -> str | None:
        """A key's label in the footer as things are now (None: the binding's own)."""
        return actions.label_now(binding_id, self)

    def _refresh_bindings_if_changed(self) -> None:
        """Refresh the keys (enabled, and their labels) only when they changed: a refresh rebuilds the footer."""
        enabled = tuple(self.check_action(action.name, action.parameters) for action in actions.STEERED)
        labels = tuple(self.footer_label(binding_id) for binding_id in actions.FOOTER_LABELS)
        if (enabled, labels) != self._enabled_keys:
            self._enabled_keys = (enabled, labels)
            self.refresh_bindings()

    def on_key(self, event: Key) -> None:
        """A key no binding took: if it is bound to an action that makes no sense now, say why."""
        if self._explain_key(event.key):
            event.stop()

    def _explain_key(self, key: str) -> bool:
        return False
