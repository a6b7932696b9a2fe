"""What the grid's cursor follows (`f`): nothing, the first agent in flight, or the last failure.

The app's part that owns the mode: `f` cycles it (steering), each paint moves the cursor by it
(the painter), a cursor key the user presses ends it, and the run panel names it. The cursor
itself is the grid's; this only says where it goes.
"""

from __future__ import annotations

from swarm_tui.core.events import TaskState
from swarm_tui.frontend.source import RunSource
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid

FOLLOW_MODES: tuple[str | None, ...] = (None, "active", "failed")
"""What the grid's cursor follows (`f` cycles): nothing, the first agent in flight, the last failure."""
SAID = {
    None: "Follow off: the cursor stays where you put it.",
    "active": "Following the active agents: the cursor moves to the first one in flight.",
    "failed": "Following failures: the cursor moves to each agent that fails.",
}
"""What `f` says of each mode as it takes it."""
IN_FLIGHT = (TaskState.RUNNING, TaskState.RETRYING)


class CursorFollow:
    """The follow mode of one grid over one run (see the module's notes)."""

    def __init__(self, grid: AgentGrid, source: RunSource) -> None:
        self._grid = grid
        self._source = source
        self.mode: str | None = None
        """None, "active" or "failed"."""

    def cycle(self) -> str:
        """The next mode (`f`); what it does, to say."""
        position = FOLLOW_MODES.index(self.mode) if self.mode in FOLLOW_MODES else 0
        self.mode = FOLLOW_MODES[(position + 1) % len(FOLLOW_MODES)]
        return SAID[self.mode]

    def stop(self) -> bool:
        """The user moved the cursor: following ends. True when it was on."""
        if self.mode is None:
            return False
        self.mode = None
        return True

    def apply(self, force: bool = False) -> None:
        """The cursor on the first agent in flight (moved when the one it is on is no longer
        active, or at once when `force`d), or on the last agent that failed."""
        states, grid = self._source.states, self._grid
        if self.mode == "active":
            here = grid.cursor_index
            if here is not None and states.get(here) in IN_FLIGHT and not force:
                return
            for position in range(grid.count):
                index = grid.index_at(position)
                if states.get(index) in IN_FLIGHT:
                    grid.move_to(index)
                    return
        elif self.mode == "failed":
            last_failed = self._source.view.agents.last_failed
            if last_failed is not None and grid.cursor_index != last_failed:
                grid.move_to(last_failed)
