"""The console's main screen laid out and its panels painted: the app's part that fits the grid to
the terminal and paints the provider bar, the run panel, the lane panel and the footer's figures
from the run's view.

The layout fits the terminal: the grid takes what a full run panel (40 columns) leaves, or
what a narrow one (28) leaves when that keeps its numbered cells (the 10x10 demo at 80x24),
else its cells become one character each (`widgets/grid/layout.py` chooses); the lane panel and
the footer's lanes' lines take their rows from the error log's least first, then from the grid;
the footers take a narrow arrangement below 80 columns, and the key footer shows the keys that
fit, whole.

The panels repaint at 4 Hz (`PANELS_EVERY_S`), the grid at the painter's 10 Hz: figures read at
4 Hz are readable, and cost half. A new phase is painted at once (`paint_if_due`), and a key that
changes what the panels say repaints them at once (`update`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App

from swarm_tui.core.events import TaskState
from swarm_tui.frontend.source import RunSource
from swarm_tui.pricing.currency import DisplayCurrency
from swarm_tui.ui.follow import CursorFollow
from swarm_tui.ui.widgets.footer.stats_footer import NARROW_FOOTER_BELOW, StatsFigures, StatsFooter, footer_lanes
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.ui.widgets.panels.lane_panel import LanePanel
from swarm_tui.ui.widgets.panels.provider_bar import ProviderBar
from swarm_tui.ui.widgets.panels.run_panel import RunPanel
from swarm_tui.view.phase import counts_detail

PANELS_EVERY_S = 0.25
"""The figures and the legend repaint at 4 Hz: readable, and half the cost of the grid's 10 Hz."""
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


class ConsoleLayout:
    """The main screen's room shared out, and its panels painted (see the module's notes)."""

    def __init__(
        self,
        app: App[Any],
        source: RunSource,
        *,
        grid: AgentGrid,
        provider_bar: ProviderBar,
        run_panel: RunPanel,
        lane_panel: LanePanel,
        stats_footer: StatsFooter,
        figures: StatsFigures,
        follow: CursorFollow,
        currency: DisplayCurrency,
        key_hint: Callable[[str], str],
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        """`key_hint`: the key of one of the app's bindings as bound now; `clock`: the run's
        (monotonic, frozen in snapshot tests); `wall_clock`: epoch seconds, for the provider
        batches' times (their 24 h window)."""
        self._app = app
        self._source = source
        self._grid = grid
        self._provider_bar = provider_bar
        self._run_panel = run_panel
        self._lane_panel = lane_panel
        self._stats_footer = stats_footer
        self._figures = figures
        self._follow = follow
        self._currency = currency
        self._key_hint = key_hint
        self._clock = clock
        self._wall_clock = wall_clock
        self._lane_lines = 0
        """The lane panel's height as the grid was last fitted to it (0: no batches)."""
        self._footer_lanes: tuple[str, ...] = ()
        """The lanes' lines the footer has past its three (`footer_lanes`: batch, judge, cache)."""
        self._painted_phase: tuple[str, str] = ("", "")
        """The phase and detail the panels show (a new one is painted at once, not at 4 Hz)."""
        self._painted_at = float("-inf")
        self._stale = False
        """Events came that the panels have not been painted with yet (their 4 Hz held them back)."""
        self.ended_elapsed_s: float | None = None
        """The run's elapsed time when it ended: the footer's clock stops there until it runs again."""

    # ----------------------------------------------------------------- the room

    def fit_grid(self, width: int | None = None, height: int | None = None) -> None:
        """The grid gets what the side panel and the error log's minimum leave; in a run with
        batches, a judge or a cache, also what the lane panel and the footer's lanes' lines need
        beyond two rows of that minimum (a 100-agent grid stays whole at 80x24)."""
        size = self._app.size
        width = size.width if width is None else width
        height = size.height if height is None else height
        extra = self._lane_lines + len(self._footer_lanes)
        rows = height - RESERVED_ROWS - max(0, extra - BATCH_ROWS_FROM_LOG)
        self._grid.fit(width - SIDE_PANEL_MIN, rows, width - SIDE_PANEL_NARROW)

    def resized(self, width: int, height: int) -> None:
        """The terminal's new size: the grid fitted again, the panels painted to their new widths."""
        self.fit_grid(width, height)
        self.update()

    def _lane_rows(self) -> int:
        """How many batches the lane panel lists at this terminal height."""
        return LANE_ROWS[1] if self._app.size.height >= LANE_ROWS_TALL_FROM else LANE_ROWS[0]

    # ----------------------------------------------------------------- the panels

    def stop_clock(self) -> None:
        """The run ended: the footer's clock (and its rates, the run's averages) stop here."""
        self.ended_elapsed_s = self._source.stats.elapsed_s

    def paint_if_due(self) -> None:
        """After a drain: the panels painted at their 4 Hz, or at once for a new phase; else owed."""
        now = self._clock()
        phases = self._source.view.phases
        if now - self._painted_at >= PANELS_EVERY_S or (phases.phase, phases.detail) != self._painted_phase:
            self._painted_at = now
            self.update()
        else:
            self._stale = True  # painted at the next tick past the 4 Hz, not at the next event

    def owed(self) -> bool:
        """Events came since the panels were last painted, and their 4 Hz allows a paint now (a
        burst's last events show at once, not at the next event or second)."""
        return self._stale and self._clock() - self._painted_at >= PANELS_EVERY_S

    def update(self) -> None:
        """Paint the provider bar, the run panel, the lane panel and the footer from the view
        (the drain does at 4 Hz; a key that changes what they say does at once)."""
        if not self._provider_bar.is_attached:  # the app shuts down: its widgets are pruned
            return
        source = self._source
        self._stale = False
        self._provider_bar.update_from(source)
        phases = source.view.phases
        phase, detail = phases.phase, phases.detail
        notes: list[tuple[int, str]] = []
        if source.attached:  # who drives the journal, said once; how to go on, when nobody does
            if not source.running and phase in ("RUNNING", "PAUSED", "STARTING"):
                phase, detail = "NOT RUNNING", counts_detail(source.states)
            notes.append((1, source.liveness(short=0 < self._run_panel.content_size.width < 36)))
            if source.resumable:  # (a stopped writer's lock would refuse a resume: none is offered)
                states = source.states.values()
                unfinished = any(not state.is_final for state in states)
                failed = any(state is TaskState.FAILED for state in states)
                if unfinished or failed:
                    flag = " --retry-failed" if failed else ""
                    key = self._key_hint("app.retry_failed" if failed else "app.pause")
                    notes.append((1, f"{key}: resume it here, in the background"))
                    notes.append((7, f"or: swarm-tui resume {source.run_dir}{flag}"))
        self._painted_phase = (phases.phase, phases.detail)
        self._run_panel.update_from(
            source, self._grid, phase, detail, notes, max_lines=self._grid.fit_height, follow=self._follow.mode
        )
        self._update_lane()
        self._update_footer_lanes()
        narrow = self._app.size.width < NARROW_FOOTER_BELOW
        self._figures.update_from(source, self._currency, self.ended_elapsed_s, eta_s=source.eta_s(), narrow=narrow)

    def _update_lane(self) -> None:
        """The lane panel, in a run with provider batches; the grid gives it its rows when it
        appears (or grows)."""
        batches = self._source.view.figures.batches
        if not batches and not self._lane_lines:
            return  # a run without batches: nothing here changes its screen
        rows = self._lane_rows()
        self._lane_panel.update_from(batches, self._grid, self._source.stats, self._wall_clock(), rows)
        lines = self._lane_panel.lines(batches, rows)
        if lines != self._lane_lines:
            self._lane_lines = lines
            self.fit_grid()

    def _update_footer_lanes(self) -> None:
        """The footer's lines past its three (the batch lane's, the judge's, the cache's), as the
        run comes to have them (the grid gives them rows only past what the error log spares)."""
        lanes = footer_lanes(self._source.stats)
        if lanes != self._footer_lanes:
            self._footer_lanes = lanes
            self._stats_footer.show_lanes(lanes)
            self.fit_grid()
