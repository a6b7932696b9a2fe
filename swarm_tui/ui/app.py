"""The swarm-tui console: the app's keys, what the panes ask of it, and its factory.

`SwarmApp` is three layers, one concern each: `console.py` (layout, themes, panels) and
`drain.py` (painting what the run's `RunView` says changed), `steering.py` (what the keys do,
and which make sense now), this module (the bindings, made from the actions table with ids a
user may remap, and the messages of the grid and the error log). `launch.py` runs it for the CLI.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import App
from textual.binding import BindingType
from textual.dom import DOMNode

from swarm_tui.config import Config
from swarm_tui.frontend.live import LiveRun
from swarm_tui.frontend.source import RunSource
from swarm_tui.run.session import SwarmSession
from swarm_tui.ui.commands import SwarmCommands
from swarm_tui.ui.console import REFRESH_HZ
from swarm_tui.ui.format import short_path
from swarm_tui.ui.keys import KeyRow, bindings_for, help_rows
from swarm_tui.ui.screens.aggregate import AggregateScreen
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.screens.dialogs import ConfirmScreen, HelpScreen
from swarm_tui.ui.screens.estimate import EstimateScreen
from swarm_tui.ui.screens.provider import ProviderScreen
from swarm_tui.ui.steering import Steering, concurrency_step
from swarm_tui.ui.widgets.errorlog.error_log import ErrorLog
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid

__all__ = ["KEY_SCOPES", "SwarmApp", "concurrency_step", "make_app"]


class SwarmApp(Steering):
    """Watch and steer one swarm run. The result (`run_async()`'s value) is the exit code."""

    TITLE = "swarm-tui"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {SwarmCommands}

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("app")
    """The app's actions' keys, from the actions table (`view/actions.py`), ids and all."""

    def key_scopes(self) -> list[type]:
        return [scope for _, scope in KEY_SCOPES]

    def key_help(self) -> list[tuple[str, list[KeyRow]]]:
        """Every binding with an id, grouped by where it applies: its keys as bound now (the
        keymap may have moved them), its id, what it does."""
        return [(where, help_rows(scope, self.keymap)) for where, scope in KEY_SCOPES]

    def action_help(self) -> None:
        self.push_screen(
            HelpScreen(self.key_help(), str(self.source.run_dir), short_path(self.config.path), self.keymap_problems)
        )

    # ----------------------------------------------------------------- messages from widgets

    @on(AgentGrid.Opened)
    def _open_detail(self, event: AgentGrid.Opened) -> None:
        self.push_screen(AgentDetailScreen(self.source, event.index))

    @on(AgentGrid.CursorMoved)
    def _cursor_moved(self, event: AgentGrid.CursorMoved) -> None:
        if event.by_user and self.follow is not None:
            self.follow = None
            self.notify("Follow off: you moved the cursor.", timeout=2)
        self.update_panels()
        self._refresh_bindings_if_changed()

    @on(ErrorLog.OpenRequested)
    def _open_from_log(self, event: ErrorLog.OpenRequested) -> None:
        """Enter on an error-log row: that agent's detail (nothing is sent); a planner's or an
        aggregator's row, which has no agent: its failure in full."""
        failure = event.failure
        if failure.kind == "step":
            attempt = failure.attempt
            self.notify(
                f"{failure.agent_label} call {attempt.number}, {attempt.outcome}: {failure.error_class} "
                f"{attempt.status or ''}\n{failure.message}",
                title="Step error",
                severity="error",
                timeout=30,
                markup=False,
            )
            return
        self.open_agent(event.index)

    @on(ErrorLog.RetryRequested)
    def _retry_from_log(self, event: ErrorLog.RetryRequested) -> None:
        self.grid.move_to(event.index)
        self.retry_agents(event.indices)


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
