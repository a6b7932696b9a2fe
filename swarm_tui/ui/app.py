"""The swarm-tui console: the app's keys, what the panes ask of it, and its factory.

`SwarmApp` is three layers, one concern each: `console.py` (layout, themes, the event drain),
`steering.py` (what the keys do, and which make sense now), this module (the bindings, with
ids a user may remap, and the messages of the grid and the error log). `launch.py` runs it
for the CLI.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import App
from textual.binding import Binding, BindingType
from textual.dom import DOMNode

from ..config import Config
from ..session import SwarmSession
from .aggregate import AggregateScreen
from .commands import SwarmCommands
from .console import REFRESH_HZ
from .detail import AgentDetailScreen
from .dialogs import ConfirmScreen, HelpScreen
from .errorlog import ErrorLog
from .estimate import EstimateScreen
from .format import short_path
from .grid import AgentGrid
from .keys import KeyRow, help_rows
from .provider import ProviderScreen
from .source import LiveRun, RunSource
from .steering import Steering, concurrency_step

__all__ = ["KEY_SCOPES", "SwarmApp", "concurrency_step", "make_app"]

CONCURRENCY = Binding.Group("Limit", compact=True)


class SwarmApp(Steering):
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
        Binding("f", "follow", "Follow", id="app.follow", show=False),
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
        self.push_screen(AgentDetailScreen(self.source, event.index, self.attempts_in_flight))

    @on(AgentGrid.CursorMoved)
    def _cursor_moved(self, event: AgentGrid.CursorMoved) -> None:
        if event.by_user and self.follow is not None:
            self.follow = None
            self.notify("Follow off: you moved the cursor.", timeout=2)
        self._update_panels()
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
        bell=bell,
    )
