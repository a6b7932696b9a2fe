"""How the agent grid lays its cells out in the room the console gives it. Pure; no Textual.

Every numbered cell shows its state's glyph before the number (`o  42` wide, `o 42` narrow),
so the choice is between, in this order of preference:

1. wide numbered cells, beside a run panel of full width (`width`), every row on screen;
2. narrow numbered cells, beside a full panel, then beside a narrow one (`narrow_width`:
   what 80x24 leaves a 10x10 demo), every row on screen;
3. one-character cells (the glyph alone), as many columns as keep every row on screen;
4. numbered cells that scroll (a few agents on a very short screen), else compact ones.

Up to `NUMBERED_MAX` agents the numbered grid is a 10-column square (the demo's 10x10); more
take as many columns as fit. Widths count the grid's vertical scrollbar.
"""

from __future__ import annotations

from dataclasses import dataclass

NUMBERED_MAX = 100
"""Up to this many agents the numbered grid is a fixed 10-column square."""
SQUARE = 10
SCROLLBAR = 1


@dataclass(frozen=True, slots=True)
class GridLayout:
    columns: int
    cell_width: int
    row_gap: int = 0
    compact: bool = False
    narrow_panel: bool = False
    """The layout needs the run panel at its narrow width (the app gives the grid more room)."""

    @property
    def pitch(self) -> int:
        return self.cell_width + 1

    def rows(self, n: int) -> int:
        return -(-n // self.columns) if n else 0

    @property
    def width(self) -> int:
        """Screen columns the cells take (the scrollbar not counted)."""
        return self.columns * self.pitch - 1


def wide_cell(digits: int) -> int:
    """Glyph, space, number: `o  42`."""
    return digits + 2


def narrow_cell(digits: int) -> int:
    """Glyph and number: `o 42`."""
    return digits + 1


def choose_layout(n: int, digits: int, width: int, height: int, narrow_width: int | None = None) -> GridLayout:
    """The layout of `n` agents (numbers of `digits` digits) in at most `width` x `height`
    cells of screen beside a full run panel, or `narrow_width` beside a narrow one."""
    narrow_width = width if narrow_width is None else max(width, narrow_width)
    height = max(1, height)
    if n <= NUMBERED_MAX:
        columns = min(SQUARE, max(1, n))
        rows = -(-n // columns) if n else 1
        if rows <= height:
            for cell, room, narrow_panel in (
                (wide_cell(digits), width, False),
                (narrow_cell(digits), width, False),
                (narrow_cell(digits), narrow_width, True),
            ):
                layout = GridLayout(columns, cell, narrow_panel=narrow_panel)
                if layout.width <= room - SCROLLBAR:
                    gap = 1 if cell == wide_cell(digits) and 2 * rows - 1 <= height else 0
                    return GridLayout(columns, cell, gap, narrow_panel=narrow_panel)
        compact = _compact_in_view(n, height, width) or _compact_in_view(n, height, narrow_width, narrow_panel=True)
        if compact is not None:
            return compact
        layout = GridLayout(columns, narrow_cell(digits), narrow_panel=True)
        if layout.width <= narrow_width - SCROLLBAR:  # a short screen: the numbered square scrolls
            return layout
        return GridLayout(max(1, (width - SCROLLBAR + 1) // 2), 1, compact=True)
    usable = width - SCROLLBAR
    numbered = GridLayout(max(1, (usable + 1) // (narrow_cell(digits) + 1)), narrow_cell(digits))
    if numbered.rows(n) <= height:
        return numbered
    return GridLayout(max(1, (usable + 1) // 2), 1, compact=True)


def _compact_in_view(n: int, height: int, width: int, *, narrow_panel: bool = False) -> GridLayout | None:
    """One-character cells with every row on screen, as square as that allows (at least 10
    columns); None when they do not fit in `width`."""
    columns = max(min(SQUARE, n), -(-n // height))
    layout = GridLayout(columns, 1, compact=True, narrow_panel=narrow_panel)
    return layout if layout.width <= width - SCROLLBAR else None
