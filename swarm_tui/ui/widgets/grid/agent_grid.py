"""The agent grid: every agent of the swarm as one coloured cell, in one line-drawn widget.

Why one widget and not a widget per agent: 100 `Static`s cost 6-10x the CPU of one widget
that draws itself line by line, and thousands of agents would not be possible at all. The
grid draws each row of cells as one `Strip`, caches it, and redraws only the rows whose
agents changed (`update_cells`), so an event costs a dict lookup until the next paint.

Colours come from component classes (`agent-grid--succeeded` ...) whose CSS uses the theme's
`$swarm-*` variables, so a theme recolours the grid. Every cell also carries its state's glyph
(`.` queued, `>` running, `~` retrying, `?` re-asking: its answer could not be used and is asked
again, `o` done, `x` failed, `-` cancelled), so that states
differ in their text too: without colour (`NO_COLOR`, a monochrome terminal, a colour-blind
eye) a failed, a running and a done cell still read apart. Layout (`fit`):

* up to 100 agents: 10 columns (a 10x10 square for the demo) of numbered cells, `o  42` where
  there is room, `o 42` where the run panel would be too narrow otherwise (80x24); where even
  that does not fit (60x20) one-character cells, as many columns as keep every row on screen;
* more: as many numbered columns as fit while all rows fit on screen, otherwise compact
  one-character cells (the glyph alone); the grid scrolls when even that does not fit, and
  says which agents it shows (`visible_range`).

Multi-step agents (a job with tools): a running agent that has taken a step shows the step it
is on, and whether it is thinking (its model call in flight: the running colour, `:`) or in
its tools (from `AgentStepped` to its next `AttemptStarted`: the tool colour, `*`), or waits
out a backoff (`~`); the mark takes the glyph's place:

* a cell with room for two more characters than the number: `42:3` thinking at step 3,
  `42*3` running step 3's tools (`42:+` from step 10 on where the digits do not fit);
* a narrow cell: `:3`, `*3` in place of the number while the agent runs (its place in the
  grid, and the run panel's cursor line, say which agent it is);
* a compact cell: `>` thinking, `*` in its tools.

The layout never changes for steps: a run's cells stay where they are.

The batch lane (`--lane batch|auto`): a task carried as a line of a provider batch is running
too, but for minutes or hours, at the provider's pace, not ours: from `BatchSubmitted` until
its line comes back its cell has its own colour (`$swarm-batch`) and glyph (`=`), so the live
calls stand apart from the lines waiting in a batch.

The response cache (`--cache`): a done agent whose answer was replayed from the cache (nothing
sent, cost 0) has its own colour (`$swarm-cached`) and glyph (`c`); a low score still wins.

The judge (`--judge`, a job's `[judge]`): a done agent whose answer the judge scored is
underlined; one scored at or below `LOW_SCORE` (at best "usable with edits", by the default
rubric) takes the low-score colour (`$swarm-low-score`) and glyph (`!`), so a falling quality
shows in the grid, not only in the run panel's score. In the heat view a judged cell keeps its
latency colour and its underline.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import BindingType
from textual.color import Color
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from swarm_tui.core.events import TaskState
from swarm_tui.ui.contrast import readable_on
from swarm_tui.ui.keys import bindings_for
from swarm_tui.ui.widgets.grid.cells import (
    BATCH_GLYPH,
    DEPTH_MARKS,
    GLYPHS,
    KIND_GLYPHS,
    LOW_GLYPH,
    LOW_SCORE,
    MANY_STEPS,
    RETRY_MARK,
    STATE_LABELS,
    STATES,
    STEP_STATES,
    THINKING_MARK,
    TOOL_GLYPH,
    TOOL_MARK,
)
from swarm_tui.ui.widgets.grid.layout import choose_layout
from swarm_tui.view.agents import AgentFacts
from swarm_tui.view.family import AgentTree

__all__ = ["BATCH_GLYPH", "GLYPHS", "LOW_GLYPH", "LOW_SCORE", "STATES", "STATE_LABELS", "TOOL_GLYPH", "AgentGrid"]

HEAT_LEVELS = 5


def state_class(state: TaskState) -> str:
    return f"agent-grid--{state.value}"


class AgentGrid(ScrollView, can_focus=True, inherit_bindings=False):
    """Agents as cells coloured by state (or by latency, in the heat view), with a cursor; what
    each cell shows besides its state (step, tools, batch line, score, latency) is the run view's
    (`facts`).

    Its keys are its own (`grid.*` ids, remappable), not a scroll view's: the cursor scrolls."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(state_class(s) for s in STATES),
        *(f"agent-grid--heat-{n}" for n in range(1, HEAT_LEVELS + 1)),
        "agent-grid--cursor",
        "agent-grid--tool",
        "agent-grid--batch",
        "agent-grid--cached",
        "agent-grid--judged",
        "agent-grid--low-score",
        "agent-grid--silent",
    }

    DEFAULT_CSS = """
    AgentGrid {
        width: auto;
        height: auto;
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
        background: $surface;
    }
    AgentGrid > .agent-grid--queued { background: $swarm-queued; color: auto 85%; }
    AgentGrid > .agent-grid--running { background: $swarm-running; color: auto 95%; }
    AgentGrid > .agent-grid--retrying { background: $swarm-retrying; color: auto 95%; }
    AgentGrid > .agent-grid--succeeded { background: $swarm-succeeded; color: auto 95%; }
    AgentGrid > .agent-grid--failed { background: $swarm-failed; color: auto 95%; text-style: bold; }
    AgentGrid > .agent-grid--cancelled { background: $swarm-cancelled; color: auto 85%; }
    AgentGrid > .agent-grid--heat-1 { background: $swarm-heat-1; color: auto 95%; }
    AgentGrid > .agent-grid--heat-2 { background: $swarm-heat-2; color: auto 95%; }
    AgentGrid > .agent-grid--heat-3 { background: $swarm-heat-3; color: auto 95%; }
    AgentGrid > .agent-grid--heat-4 { background: $swarm-heat-4; color: auto 95%; }
    AgentGrid > .agent-grid--heat-5 { background: $swarm-heat-5; color: auto 95%; }
    AgentGrid > .agent-grid--tool { background: $swarm-tool; color: auto 95%; }
    AgentGrid > .agent-grid--batch { background: $swarm-batch; color: auto 95%; }
    AgentGrid > .agent-grid--cached { background: $swarm-cached; color: auto 95%; }
    AgentGrid > .agent-grid--low-score { background: $swarm-low-score; color: auto 95%; }
    AgentGrid > .agent-grid--silent { background: $warning; color: auto 95%; text-style: bold; }
    AgentGrid > .agent-grid--judged { text-style: underline; }
    AgentGrid > .agent-grid--cursor { text-style: reverse bold; }
    AgentGrid:blur > .agent-grid--cursor { text-style: bold underline; }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("grid")

    cursor: reactive[int] = reactive(0, always_update=False, layout=False)
    """Position (not task index) of the cell under the cursor."""
    heat: reactive[bool] = reactive(False)

    class Opened(Message):
        """Enter (or a double click) on an agent's cell."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    class CursorMoved(Message):
        def __init__(self, index: int, by_user: bool = False) -> None:
            super().__init__()
            self.index = index
            self.by_user = by_user
            """A key or a click of the user's moved it (the app's follow mode ends then)."""

    def __init__(
        self,
        indices: Sequence[int],
        states: Mapping[int, TaskState],
        facts: AgentFacts | None = None,
        tree: AgentTree | None = None,
        silent: Mapping[int, object] | None = None,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._states = states
        self.facts = facts if facts is not None else AgentFacts()
        """The agents' facts the cells show (the run view's: the app feeds it, the grid only reads)."""
        self.family = tree if tree is not None else AgentTree()
        """The agents an orchestrator spawned (the run view's): a spawned agent's cell has its depth mark."""
        self.silent: Mapping[int, object] = silent if silent is not None else {}
        """The agents whose call is flagged silent (the run view's liveness): their cells say so."""
        self._set_indices(indices)
        self._step_inside = False
        """Cells have room for `:step` after the number; otherwise the step takes the number's place."""
        self._heat_bounds: list[float] = []
        self._rows: dict[int, Strip] = {}
        self._styles: dict[object, Style] | None = None
        """Cell styles from the component classes, until the styles (theme) change."""
        self.columns = min(10, max(1, len(self._indices)))
        self.cell_width = self._digits
        self.row_gap = 0
        self.compact = False
        self._layout_narrow_panel = False
        self._user_move = False
        """The next cursor change comes from the user's key or click (not from the app's follow)."""
        self._fit_to = (80, 10, 80)
        self._apply_layout()

    # ----------------------------------------------------------------- layout

    def _set_indices(self, indices: Sequence[int]) -> None:
        self._indices = list(indices)
        self._position = {index: pos for pos, index in enumerate(self._indices)}
        self._digits = len(str(max(self._indices) + 1)) if self._indices else 1

    def set_indices(self, indices: Sequence[int]) -> None:
        """The agents changed (tasks joined the run): lay the grid out again."""
        self._set_indices(indices)
        self.cursor = min(self.cursor, max(0, self.count - 1))
        self._apply_layout()

    @property
    def count(self) -> int:
        return len(self._indices)

    @property
    def rows(self) -> int:
        return -(-self.count // self.columns) if self.count else 0

    @property
    def pitch(self) -> int:
        """Screen columns from one cell to the next (cell + one gap)."""
        return self.cell_width + 1

    def fit(self, width: int, height: int, narrow_width: int | None = None) -> None:
        """Lay the cells out for at most `width` x `height` cells of screen beside a run panel
        of full width, or `narrow_width` beside a narrow one (the console's `ConsoleLayout`
        gives the room; `layout.py` chooses the cells' shape)."""
        fit_to = (max(8, width), max(3, height), max(8, narrow_width or width))
        if fit_to != self._fit_to:
            self._fit_to = fit_to
            self._apply_layout()

    @property
    def fit_height(self) -> int:
        """The rows the app gives the grid (and the panel beside it) at this terminal size."""
        return self._fit_to[1]

    @property
    def narrow_panel(self) -> bool:
        """The grid took the room of a full run panel: the panel beside it is narrow."""
        return self._layout_narrow_panel

    def _apply_layout(self) -> None:
        width, height, narrow_width = self._fit_to
        layout = choose_layout(self.count, self._digits, width, height, narrow_width)
        self.columns, self.cell_width, self.row_gap = layout.columns, layout.cell_width, layout.row_gap
        self.compact = layout.compact
        self._layout_narrow_panel = layout.narrow_panel
        digits = self._digits
        self._step_inside = not self.compact and self.cell_width >= digits + 2
        lines = self.rows * (1 + self.row_gap) - self.row_gap
        self.virtual_size = Size(self.columns * self.pitch - 1, max(1, lines))
        self.styles.max_height = height
        self._rows.clear()
        self.refresh(layout=True)

    def visible_range(self) -> tuple[int, int] | None:
        """The first and last position (not task index) of the rows on screen, while the grid
        scrolls; None when every row is shown."""
        lines = self.rows * (1 + self.row_gap) - self.row_gap
        shown = self.size.height
        if not self.count or shown <= 0 or lines <= shown:
            return None
        top = self.scroll_offset.y
        first_row = -(-top // (1 + self.row_gap))
        last_row = min(self.rows - 1, (top + shown - 1) // (1 + self.row_gap))
        return first_row * self.columns, min(self.count - 1, (last_row + 1) * self.columns - 1)

    def index_at(self, position: int) -> int:
        """The task index at a grid position."""
        return self._indices[position]

    def _row_line(self, row: int) -> int:
        return row * (1 + self.row_gap)

    # ----------------------------------------------------------------- data

    def update_cells(self, indices: set[int] | list[int]) -> None:
        """Agents whose state (or latency) changed: redraw their rows on the next paint."""
        rows = {self._position[i] // self.columns for i in indices if i in self._position}
        for row in rows:
            if self._rows.pop(row, None) is not None:
                self.refresh_line(self._row_line(row))

    @property
    def step_beside_number(self) -> bool:
        """Cells show `42:3` (else `:3`, or only `>`/`*` when compact)."""
        return self._step_inside

    def set_heat_bounds(self, bounds: list[float]) -> None:
        """Latency quantiles splitting the heat levels; a redraw of the whole grid in heat view."""
        if bounds != self._heat_bounds:
            self._heat_bounds = bounds
            if self.heat:
                self.invalidate()

    @property
    def heat_bounds(self) -> list[float]:
        """The latencies (ms) between the heat levels: level 1 is below the first, 5 at or above the last."""
        return list(self._heat_bounds)

    def invalidate(self) -> None:
        self._rows.clear()
        self.refresh()

    def watch_heat(self) -> None:
        self.invalidate()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rows.clear()
        self._styles = None

    @property
    def cursor_index(self) -> int | None:
        return self._indices[self.cursor] if self._indices else None

    def move_to(self, index: int) -> None:
        if index in self._position:
            self.cursor = self._position[index]

    # ----------------------------------------------------------------- drawing

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        line = y + scroll_y
        width = self.size.width
        base = self._cell_styles()["base"]
        row, gap = divmod(line, 1 + self.row_gap)
        if gap or row >= self.rows:
            return Strip.blank(width, base)
        strip = self._rows.get(row)
        if strip is None:
            strip = self._rows[row] = self._render_row(row, base)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _render_row(self, row: int, base: Style) -> Strip:
        styles = self._cell_styles()
        cursor_style = styles["cursor"]
        segments: list[Segment] = []
        gap = Segment(" ", base)
        start = row * self.columns
        facts = self.facts
        silent = self.silent
        latencies = facts.latency
        for pos in range(start, min(start + self.columns, self.count)):
            index = self._indices[pos]
            state = self._states.get(index, TaskState.QUEUED)
            step = facts.step_of(index) if facts.stepping and state in STEP_STATES else None
            in_tools = step is not None and step[1] is not None and state is TaskState.RUNNING
            batched = state is TaskState.RUNNING and facts.is_in_batch(index)
            score = facts.score_of(index) if state is TaskState.SUCCEEDED else None
            low = score is not None and score <= LOW_SCORE
            cached = facts.caching and state is TaskState.SUCCEEDED and facts.is_from_cache(index)
            reasking = state in STEP_STATES and step is None and facts.is_reasking(index)
            quiet = state is TaskState.RUNNING and index in silent
            kind = (
                "silent"
                if quiet
                else "batch"
                if batched
                else "tool"
                if in_tools
                else "low-score"
                if low
                else "cached"
                if cached
                else "reasking"
                if reasking
                else state
            )
            style = styles[TaskState.RETRYING if kind == "reasking" else kind]
            if self.heat and (latency := latencies.get(index)) is not None and self._heat_bounds:
                style = styles[f"heat-{1 + bisect_right(self._heat_bounds, latency)}"]
            if score is not None:
                style = style + styles["judged"]
            if pos == self.cursor:
                style = style + cursor_style
            text = self._cell_text(index, state, step[0] if step else None, in_tools, kind)
            if pos > start:
                segments.append(gap)
            segments.append(Segment(text, style))
        return Strip(segments).simplify()

    def _cell_text(self, index: int, state: TaskState, step: int | None, in_tools: bool, kind: object = None) -> str:
        """The cell's text: its glyph (its kind's: batch, tool, low score, cached; else its
        state's) or its step, and its number, as wide as the cell."""
        width = self.cell_width
        glyph = KIND_GLYPHS.get(kind) or GLYPHS[state]
        if self.compact:
            return glyph
        number = str(index + 1)
        if step is None:
            spaced = width >= self._digits + 2
            depth = self.family.depth.get(index, 0) if spaced else 0
            gap = DEPTH_MARKS[min(depth, len(DEPTH_MARKS) - 1)] or " " if spaced else ""
            return f"{glyph}{gap}{number:>{self._digits}}".ljust(width)
        head = number if self._step_inside else ""
        mark = TOOL_MARK if in_tools else RETRY_MARK if state is TaskState.RETRYING else THINKING_MARK
        label = f"{head}{mark}{step}"
        return (label if len(label) <= width else f"{head}{mark}{MANY_STEPS}").rjust(width)

    def cell_sample(self, index: int, step: int, in_tools: bool) -> tuple[str, Style]:
        """Agent `index` running at `step`, as its cell would show it: for legends elsewhere."""
        text = self._cell_text(index, TaskState.RUNNING, step, in_tools)
        return text, self._cell_styles()["tool" if in_tools else TaskState.RUNNING]

    def _cell_styles(self) -> dict[object, Style]:
        if self._styles is None:
            styles: dict[object, Style] = {s: self._cell_style(state_class(s)) for s in STATES}
            for n in range(1, HEAT_LEVELS + 1):
                styles[f"heat-{n}"] = self._cell_style(f"agent-grid--heat-{n}")
            styles["tool"] = self._cell_style("agent-grid--tool")
            styles["batch"] = self._cell_style("agent-grid--batch")
            styles["cached"] = self._cell_style("agent-grid--cached")
            styles["low-score"] = self._cell_style("agent-grid--low-score")
            styles["silent"] = self._cell_style("agent-grid--silent")
            styles["judged"] = self.get_component_rich_style("agent-grid--judged", partial=True)
            styles["cursor"] = self.get_component_rich_style("agent-grid--cursor", partial=True)
            styles["base"] = self.rich_style
            self._styles = styles
        return self._styles

    def _cell_style(self, component: str) -> Style:
        """A cell's style, its number in black or white by WCAG contrast with the cell colour
        (Textual's `auto` goes by brightness and leaves white on a mid green)."""
        style = self.get_component_rich_style(component)
        if style.bgcolor is None:
            return style
        background = Color.from_rich_color(style.bgcolor)
        return style + Style(color=readable_on(background).rich_color)

    def state_style(self, state: TaskState) -> Style:
        """The cell style of a state, for legends drawn by other widgets."""
        return self._cell_styles()[state]

    def tool_style(self) -> Style:
        """The cell style of an agent running its tools, for legends drawn by other widgets."""
        return self._cell_styles()["tool"]

    def batch_style(self) -> Style:
        """The cell style of a task waiting in a provider batch, for legends drawn by other widgets."""
        return self._cell_styles()["batch"]

    def cached_style(self) -> Style:
        """The cell style of a done agent whose answer came from the response cache, for legends."""
        return self._cell_styles()["cached"]

    def judged_style(self) -> Style:
        """The cell style of a done agent the judge scored (not low), for legends drawn by other widgets."""
        styles = self._cell_styles()
        return styles[TaskState.SUCCEEDED] + styles["judged"]

    def low_score_style(self) -> Style:
        """The cell style of a done agent the judge scored low, for legends drawn by other widgets."""
        styles = self._cell_styles()
        return styles["low-score"] + styles["judged"]

    def heat_style(self, level: int) -> Style:
        return self._cell_styles()[f"heat-{level}"]

    # ----------------------------------------------------------------- cursor

    def watch_cursor(self, old: int, new: int) -> None:
        for pos in (old, new):
            row = pos // self.columns
            if self._rows.pop(row, None) is not None:
                self.refresh_line(self._row_line(row))
        row = new // self.columns
        col = new % self.columns
        self.scroll_to_region(
            Region(col * self.pitch, self._row_line(row), self.cell_width, 1), animate=False, immediate=True
        )
        by_user, self._user_move = self._user_move, False
        if self._indices:
            self.post_message(self.CursorMoved(self._indices[new], by_user))

    def validate_cursor(self, cursor: int) -> int:
        return max(0, min(cursor, self.count - 1)) if self.count else 0

    def _move_by_user(self, position: int) -> None:
        """The user moved the cursor (a key, a click): said with the move, for the app's follow."""
        self._user_move = True
        try:
            self.cursor = position
        finally:
            self._user_move = False

    def action_move(self, dx: int, dy: int) -> None:
        if dx:
            self._move_by_user(self.cursor + dx)
        elif dy:
            target = self.cursor + dy * self.columns
            if 0 <= target < self.count or abs(dy) > 1:
                self._move_by_user(target)

    def action_jump(self, where: str) -> None:
        self._move_by_user(0 if where == "first" else self.count - 1)

    def action_open(self) -> None:
        if self._indices:
            self.post_message(self.Opened(self._indices[self.cursor]))

    def _position_at(self, x: int, y: int) -> int | None:
        scroll_x, scroll_y = self.scroll_offset
        col, within = divmod(x + scroll_x, self.pitch)
        row, gap = divmod(y + scroll_y, 1 + self.row_gap)
        if within >= self.cell_width or gap or col >= self.columns:
            return None
        pos = row * self.columns + col
        return pos if pos < self.count else None

    def on_click(self, event: events.Click) -> None:
        pos = self._position_at(event.x, event.y)
        if pos is None:
            return
        self._move_by_user(pos)
        if event.chain >= 2:
            self.action_open()
