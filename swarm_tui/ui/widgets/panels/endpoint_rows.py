"""The run panel's endpoint rows: one compact row per door of a routed run, under a header.

Each row: the door's name (`✕` after it, in the error style, while its breaker is open), what
is in flight against its own limit, its answers in the last minute (with the RPM it learned or
was told, where there is room), the p95 latency of its answers, its 429s and other errors, and
what it cost. The figures are the run view's (`view.endpoints.EndpointFigures`), so a live view
and an attached one paint the same rows.

Columns go before anything wraps: the widest layout that fits the panel is used, the learned
RPM going first, then the 429s (counted into the errors), the cost, the p95 and the rate; the
name and the in-flight figures stay to the last. A run of one endpoint has no rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.style import Style
from rich.text import Text

from swarm_tui.ui import format as fmt
from swarm_tui.view.endpoints import DoorFigures, EndpointFigures

HEADER = "door"
"""The name column's header."""
OPEN_GLYPH = "✕"
"""After an open door's name (its breaker sends new attempts elsewhere): read without colour too."""
NAME_WIDTH = 10
"""The longest a door's name is shown (a longer one ends in "…")."""
MIN_NAME = 5
"""Below this the next column goes rather than the name shrink further."""

Cell = tuple[str, bool]
"""A cell's text and whether it is bad news (painted in the error style)."""
Column = tuple[str, Callable[[DoorFigures, int], Cell]]
"""A header and how a door's cell reads (from the door and its answers of the last minute)."""


def _in_flight(door: DoorFigures, rpm: int) -> Cell:
    return f"{door.in_flight}/{door.limit if door.limit is not None else '-'}", False


def _rpm(door: DoorFigures, rpm: int) -> Cell:
    return str(rpm), False


def _rpm_of_limit(door: DoorFigures, rpm: int) -> Cell:
    limit = fmt.si(door.rpm_limit, 5).strip() if door.rpm_limit else "-"
    return f"{rpm}/{limit}", False


def _p95(door: DoorFigures, rpm: int) -> Cell:
    return fmt.latency(door.p95_ms, 0).strip(), False


def _limited(door: DoorFigures, rpm: int) -> Cell:
    return str(door.rate_limited), door.rate_limited > 0


def _errors(door: DoorFigures, rpm: int) -> Cell:
    return str(door.errors), door.errors > 0


def _failed(door: DoorFigures, rpm: int) -> Cell:
    failed = door.errors + door.rate_limited
    return str(failed), failed > 0


def _cost(door: DoorFigures, rpm: int) -> Cell:
    cost = fmt.usd(door.cost_usd, 0).strip()
    return (cost if door.cost_known else f"≥{cost}"), False


IN_FLIGHT: Column = ("in/lim", _in_flight)
LAYOUTS: tuple[tuple[Column, ...], ...] = (
    (IN_FLIGHT, ("rpm/lim", _rpm_of_limit), ("p95", _p95), ("429", _limited), ("err", _errors), ("cost", _cost)),
    (IN_FLIGHT, ("rpm", _rpm), ("p95", _p95), ("429", _limited), ("err", _errors), ("cost", _cost)),
    (IN_FLIGHT, ("rpm", _rpm), ("p95", _p95), ("err", _failed), ("cost", _cost)),
    (IN_FLIGHT, ("rpm", _rpm), ("p95", _p95), ("err", _failed)),
    (IN_FLIGHT, ("rpm", _rpm), ("err", _failed)),
    (IN_FLIGHT, ("err", _failed)),
    (IN_FLIGHT,),
)
"""Widest first: the first whose cells fit the panel's width is painted."""


def endpoint_lines(endpoints: EndpointFigures, now: float | None, width: int, *, dim: Style, bad: Style) -> list[Text]:
    """The header and a row per door, each at most `width` cells (0: no limit); none for a run of
    one endpoint. `now`: the time the last minute's answers are counted to (None: the last answer's)."""
    if not endpoints.routed:
        return []
    doors = endpoints.rows(now)
    longest = min(NAME_WIDTH, max(len(HEADER), *(len(door.name) for door, _ in doors)))
    for n, layout in enumerate(LAYOUTS):
        table = [[(header, False) for header, _ in layout]]
        table += [[cell(door, rpm) for _, cell in layout] for door, rpm in doors]
        widths = [max(len(row[c][0]) for row in table) for c in range(len(layout))]
        rest = sum(widths) + len(widths)  # a space before each column
        name_width = min(longest, width - rest) if width else longest
        if name_width >= min(longest, MIN_NAME) or n == len(LAYOUTS) - 1:
            return _painted(table, widths, [door for door, _ in doors], max(1, name_width), dim, bad)
    return []  # (the last layout always fits: unreachable)


def _painted(
    table: list[list[Cell]],
    widths: Sequence[int],
    doors: Sequence[DoorFigures],
    name_width: int,
    dim: Style,
    bad: Style,
) -> list[Text]:
    header = Text(_name(HEADER, name_width, False), dim)
    for (text, _), width in zip(table[0], widths, strict=True):
        header.append(f" {text:>{width}}", dim)
    lines = [header]
    for door, row in zip(doors, table[1:], strict=True):
        line = Text()
        line.append(_name(door.name, name_width, door.open), bad if door.open else "")
        for (text, alarming), width in zip(row, widths, strict=True):
            line.append(f" {text:>{width}}", bad if alarming else "")
        lines.append(line)
    return lines


def _name(name: str, width: int, open_: bool) -> str:
    """A door's name in `width` cells: cut with "…" when longer, `✕` after it while it is open."""
    room = width - 1 if open_ and width > 1 else width
    shown = name if len(name) <= room else name[: max(0, room - 1)] + "…"
    return f"{shown}{OPEN_GLYPH if open_ and width > 1 else ''}".ljust(width)
