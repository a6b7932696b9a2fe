"""The swarm-tui console: one Textual `App` that holds its parts, each whole in its own module.

`SwarmApp` composes the screen (`compose`: provider bar, grid and run panel, lane panel, error
log, footers; `app.tcss`) and the parts that act on it, as a live monitor's app holds its
managers:

* `themes.ThemeManager`: the themes registered, the `t` cycle, the choice remembered;
* `keys.KeyManager`: the config's keymap applied, the key a hint names, the footer's keys
  refreshed when what they may do changes, a word on a key that does nothing now;
* `lifecycle.RunLifecycle`: the run as the app's worker, its end, and the ways out (`q`,
  ctrl+c, a signal), so the journal is never closed under the run;
* `follow.CursorFollow`: what the grid's cursor follows (`f`);
* `layout.ConsoleLayout`: the grid fitted to the terminal, the panels painted at 4 Hz;
* `painter.Painter`: the one 10 Hz timer that drains the run's `RunView` into the widgets,
  inside `batch_update()`, and what is announced when;
* `steering.Steering`: what the keys do to the run and which panes they open.

The first three are made with the app (a theme is set before the first frame; a signal may come
before the screen is up); the others at mount, from the widgets `compose` made. Each part is
handed what it needs (the app, the source, widgets, the other parts it calls) and keeps its own
state. Textual dispatches actions and messages to the App, so those stay here, one line each
handing over to the part whose concern they are; which actions make sense now is the actions
table's rule (`view/actions.py`), read through this app as its `rules.Now`. `make_app` builds it
(tests build it without the CLI); `launch.py` runs it for the CLI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.events import Key, Resize
from textual.screen import Screen
from textual.widgets import Sparkline
from textual.worker import Worker

from swarm_tui.config import Config, load_config
from swarm_tui.core.errors import InputError
from swarm_tui.frontend.live import LiveRun
from swarm_tui.frontend.source import RunSource
from swarm_tui.pricing.currency import USD, DisplayCurrency, display_currency
from swarm_tui.run.session import SwarmSession
from swarm_tui.ui.commands import SwarmCommands, system_commands
from swarm_tui.ui.follow import CursorFollow
from swarm_tui.ui.keys import KeyManager, bindings_for
from swarm_tui.ui.layout import ConsoleLayout
from swarm_tui.ui.lifecycle import RunLifecycle
from swarm_tui.ui.painter import REFRESH_HZ, Painter
from swarm_tui.ui.screens.aggregate import AggregateScreen
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.screens.dialogs import ConfirmScreen, HelpScreen
from swarm_tui.ui.screens.estimate import EstimateScreen
from swarm_tui.ui.screens.provider import ProviderScreen
from swarm_tui.ui.steering import Steering
from swarm_tui.ui.themes import DEFAULT_THEME, ThemeManager, swarm_variable_defaults
from swarm_tui.ui.widgets.errorlog.error_log import ErrorLog
from swarm_tui.ui.widgets.footer.key_footer import KeyFooter
from swarm_tui.ui.widgets.footer.stats_footer import StatsFigures, StatsFooter
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.ui.widgets.panels.lane_panel import LanePanel
from swarm_tui.ui.widgets.panels.provider_bar import ProviderBar
from swarm_tui.ui.widgets.panels.run_panel import RunPanel
from swarm_tui.view import actions

__all__ = ["KEY_SCOPES", "SwarmApp", "make_app"]


def display_currency_or_usd(config: Config, provider: str) -> DisplayCurrency:
    """The footer's currency: the config's, at the provider's billing rate (¥1 = $1 at a relay);
    a display preference the config gets wrong never stops the console (USD then)."""
    try:
        return display_currency(config, provider)
    except InputError:
        return USD


class SwarmApp(App[int]):
    """Watch and steer one swarm run. The result (`run_async()`'s value) is the exit code."""

    TITLE = "swarm-tui"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {SwarmCommands}

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("app")
    """The app's actions' keys, from the actions table (`view/actions.py`), ids and all."""

    # The widgets `compose` made, found at mount (the parts are handed those they paint).
    grid: AgentGrid
    error_log: ErrorLog
    provider_bar: ProviderBar
    run_panel: RunPanel
    lane_panel: LanePanel
    stats_footer: StatsFooter
    figures: StatsFigures
    sparkline: Sparkline

    # The parts made at mount (see the module's notes).
    follow: CursorFollow
    layout: ConsoleLayout
    painter: Painter
    steering: Steering

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
        """`start`: run the source at mount (False: show it as it stands). `clock`: the run's
        (a frozen one holds elapsed, rates and ETA still in snapshot tests). `wall_clock`: epoch
        seconds, for the provider batches' times (their 24 h window). `bell`: ring the
        terminal's bell when the run finishes, stops, drifts or fails over."""
        super().__init__()
        self.source = source
        self.view = source.view
        """The run as its events tell it: what the widgets paint (the source feeds it)."""
        self.config = config if config is not None else load_config()
        self.currency = display_currency_or_usd(self.config, source.profile.name)
        if clock is not None:  # a frozen clock (snapshot tests): elapsed, rates and ETA hold still
            source.stats.clock = clock
            source.stats.started_at = clock()
        self._clock = clock or time.monotonic
        self._wall_clock = wall_clock
        self._refresh_hz = refresh_hz
        self._bell = bell
        self._mounted = False
        """The widgets are found and the parts made (Textual asks `check_action` and sends a resize before)."""
        self.themes = ThemeManager(self, theme or self.config.theme or DEFAULT_THEME, self.config.path)
        self.keys = KeyManager(
            self, KEY_SCOPES, self.config.keys, self.config.path, why_not=self.why_not, label_now=self.footer_label
        )
        self.lifecycle = RunLifecycle(self, source, start=start)

    # ----------------------------------------------------------------- the screen and its parts

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

    def on_mount(self) -> None:
        """The keymap applied, the widgets found, the parts made; then the run's history painted,
        the painter's timer set, and the run started."""
        self.keys.apply()
        self.view.phases.resume_key = self.keys.hint("app.pause")  # the pause's detail names it
        self.grid = self.query_one(AgentGrid)
        self.error_log = self.query_one(ErrorLog)
        self.provider_bar = self.query_one(ProviderBar)
        self.run_panel = self.query_one(RunPanel)
        self.lane_panel = self.query_one(LanePanel)
        self.stats_footer = self.query_one(StatsFooter)
        self.figures = self.query_one(StatsFigures)
        self.sparkline = self.query_one(Sparkline)
        self._make_parts()
        self._mounted = True
        self.error_log.state_of = self.source.states.get
        self.error_log.retry_hint = self.steering.retry_cost
        self.error_log.clock = self._clock
        self.themes.say_problem()
        self.layout.fit_grid()
        self.painter.drain(replay=True)  # what the view holds already: a resumed run's earlier sessions
        self.grid.focus()
        self.set_interval(1 / self._refresh_hz, self.painter.drain, name="drain")
        self.lifecycle.begin()
        self.painter.drain()

    def _make_parts(self) -> None:
        source, grid = self.source, self.grid
        self.follow = CursorFollow(grid, source)
        self.layout = ConsoleLayout(
            self,
            source,
            grid=grid,
            provider_bar=self.provider_bar,
            run_panel=self.run_panel,
            lane_panel=self.lane_panel,
            stats_footer=self.stats_footer,
            figures=self.figures,
            follow=self.follow,
            currency=self.currency,
            key_hint=self.keys.hint,
            clock=self._clock,
            wall_clock=self._wall_clock,
        )
        self.painter = Painter(
            self,
            source,
            grid=grid,
            error_log=self.error_log,
            sparkline=self.sparkline,
            layout=self.layout,
            follow=self.follow,
            lifecycle=self.lifecycle,
            keys=self.keys,
            clock=self._clock,
            bell=self._bell,
        )
        self.steering = Steering(
            self,
            source,
            config=self.config,
            currency=self.currency,
            grid=grid,
            painter=self.painter,
            layout=self.layout,
            follow=self.follow,
            lifecycle=self.lifecycle,
            keys=self.keys,
        )

    def drain(self) -> None:
        """Paint what the run's events changed, now (the painter's timer does ten times a second)."""
        self.painter.drain()

    def update_panels(self) -> None:
        """Paint the panels now, not at their next 4 Hz beat."""
        self.layout.update()

    def on_resize(self, event: Resize) -> None:
        if self._mounted:  # a first resize arrives before mount
            self.layout.resized(event.size.width, event.size.height)

    # ----------------------------------------------------------------- the phase (the view's; a few parts set it)

    @property
    def phase(self) -> str:
        return self.view.phases.phase

    @property
    def phase_detail(self) -> str:
        return self.view.phases.detail

    # ----------------------------------------------------------------- which keys make sense now (`rules.Now`)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The actions table's rule for the action (`view/actions.py`): the same rule dims its
        key, hides it from the palette and lets `why_not` say why."""
        return actions.enabled(action, self) if self._mounted else True

    def why_not(self, action: str) -> str | None:
        """Why a key whose action makes no sense now does nothing (None: no reason to give)."""
        return actions.why_not(action, self)

    def footer_label(self, binding_id: str) -> str | None:
        """A key's label in the footer as things are now (None: the binding's own)."""
        return actions.label_now(binding_id, self)

    @property
    def cursor_index(self) -> int | None:
        """The agent under the grid's cursor (what `R` and `x` act on)."""
        return self.grid.cursor_index if self._mounted else None

    @property
    def aggregate_ready(self) -> bool:
        """The swarm's aggregate is written: `g` shows it."""
        return self._mounted and self.painter.aggregate_ready

    def key_hint(self, binding_id: str) -> str:
        """The key to name in a hint for one of the app's bindings, as bound now."""
        return self.keys.hint(binding_id)

    @property
    def keymap(self) -> dict[str, str]:
        """The config's `[keys]` as applied (what the widgets' and screens' hints read)."""
        return self.keys.keymap

    def on_key(self, event: Key) -> None:
        """A key no binding took: if it is bound to an action that makes no sense now, say why."""
        if self.keys.explain(event.key):
            event.stop()

    # ----------------------------------------------------------------- themes and the palette

    def watch_theme(self, theme: str) -> None:
        if self.is_running:  # (set while the app is made: the config's, not a choice to remember)
            self.themes.remember(theme)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """swarm-dark's `swarm-*` colours: any theme (a partial user file) works."""
        return swarm_variable_defaults()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        return system_commands(
            super().get_system_commands(screen),
            self.source.run_dir,
            lambda: self.set_timer(0.1, self.save_screenshot_to_run),
        )

    def save_screenshot_to_run(self) -> Path | None:
        try:
            path = Path(self.save_screenshot(path=str(self.source.run_dir)))
        except OSError as exc:
            self.notify(f"Screenshot not saved: {exc}", severity="error", markup=False)
            return None
        self.notify(f"Screenshot saved: {path}", title="Screenshot", timeout=8, markup=False)
        return path

    # ----------------------------------------------------------------- the keys' actions (steering.py, lifecycle.py)

    def action_retry_failed(self) -> None:
        self.steering.retry_failed()

    def action_retry_cursor(self) -> None:
        self.steering.retry_cursor()

    def action_cancel_cursor(self) -> None:
        self.steering.cancel_cursor()

    def action_toggle_pause(self) -> None:
        self.steering.toggle_pause()

    def action_abort(self) -> None:
        self.steering.abort()

    def action_concurrency(self, direction: int) -> None:
        self.steering.concurrency(direction)

    def action_cycle_theme(self) -> None:
        self.themes.next()

    def action_toggle_heat(self) -> None:
        self.steering.toggle_heat()

    def action_follow(self) -> None:
        self.steering.cycle_follow()

    def action_provider(self) -> None:
        self.steering.provider()

    def action_estimate(self) -> None:
        self.steering.estimate()

    def action_aggregate(self) -> None:
        self.steering.aggregate()

    def action_flush_memory(self) -> None:
        self.steering.flush_memory()

    def action_report(self) -> None:
        self.steering.report()

    def action_help(self) -> None:
        self.steering.help()

    async def action_quit(self) -> None:
        self.lifecycle.quit()

    def action_help_quit(self) -> None:
        self.lifecycle.help_quit()

    def open_agent(self, index: int) -> None:
        """An agent's detail, the grid's cursor on it (the palette's "agent N")."""
        self.steering.open_agent(index)

    def follow_cursor(self, index: int) -> None:
        """The grid's cursor on an agent (the detail's previous / next)."""
        self.grid.move_to(index)

    # ----------------------------------------------------------------- messages

    @on(AgentGrid.Opened)
    def _open_detail(self, event: AgentGrid.Opened) -> None:
        self.steering.open_detail(event.index)

    @on(AgentGrid.CursorMoved)
    def _cursor_moved(self, event: AgentGrid.CursorMoved) -> None:
        self.steering.cursor_moved(by_user=event.by_user)

    @on(ErrorLog.OpenRequested)
    def _open_from_log(self, event: ErrorLog.OpenRequested) -> None:
        self.steering.open_failure(event.failure, event.index)

    @on(ErrorLog.RetryRequested)
    def _retry_from_log(self, event: ErrorLog.RetryRequested) -> None:
        self.steering.retry_from_log(event.index, event.indices)

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if self.lifecycle.worker_ended(event):
            self.painter.run_ended()
            self.lifecycle.exit_if_quitting()


KEY_SCOPES: tuple[tuple[str, type[DOMNode]], ...] = (
    ("Everywhere (a pane with focus may take the same key)", SwarmApp),
    ("Grid (when it has focus)", AgentGrid),
    ("Error log (when it has focus: Tab)", ErrorLog),
    ("Agent detail (an agent opened from the grid or the error log)", AgentDetailScreen),
    ("Confirmations (abort, quit during a run, resume)", ConfirmScreen),
    ("This help", HelpScreen),
    ("Provider pane", ProviderScreen),
    ("Cost projection", EstimateScreen),
    ("Aggregate", AggregateScreen),
)
"""Where bindings apply, as the help groups them: every class whose bindings the keymap moves."""


def make_app(
    source: RunSource | SwarmSession,
    *,
    config: Config | None = None,
    theme: str | None = None,
    start: bool = True,
    clock: Callable[[], float] | None = None,
    refresh_hz: float = REFRESH_HZ,
    wall_clock: Callable[[], float] = time.time,
    bell: bool = False,
) -> SwarmApp:
    """The app for a session (run here) or a run source (e.g. `AttachedRun`). Tests pass a
    session on a seeded simulator or a recorded run's source (`tests/scripted_run.py`), a config
    on a temporary path, and a frozen clock."""
    run_source = LiveRun(source) if isinstance(source, SwarmSession) else source
    return SwarmApp(
        run_source,
        config=config,
        theme=theme,
        start=start,
        clock=clock,
        refresh_hz=refresh_hz,
        wall_clock=wall_clock,
        bell=bell,
    )
