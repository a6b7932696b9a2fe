"""The error log: one row per failed attempt, newest at the bottom, to triage from.

A `DataTable` rather than a `Log`/`RichLog`: each failure is a record with fields (time,
agent, class, status, what happens next, message) that line up in columns at any width, and
rows are selected: Enter opens the row's agent (its detail has every attempt and the full
message) and sends nothing; `R` retries it, and the log's title says first what that will cost
(the agent's last attempt, or the run's mean per answer). `c` shows one error class at a time;
`u` groups repeats (the same class, status and message, digits aside) into one row that counts
them, whose `R` retries every failed agent of the group.

A row's "next" cell says what became of its agent, from the agent's state now (the app tells
the log which agents changed): a retry still to come counts down once a second, then reads
"next slot" while it waits for one; an agent in flight again reads "retried", one that
succeeded since "retried: done", so the log never disagrees with the grid, after a resume
either. Calls outside the grid (the planner, the aggregator) have rows too, named by their
step. The table keeps at most `MAX_ROWS`: past that, it is rebuilt from its newest rows in one
go (`remove_row` is linear).

Provider text is untrusted: every cell is a `rich.text.Text`, never markup, so an error
message with `[brackets]` shows as written; a cell too narrow for its text ends in "…".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from rich.text import Text
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import DataTable

from swarm_tui.core.events import TaskState
from swarm_tui.ui.format import clock_time, one_line, span
from swarm_tui.ui.keys import bindings_for
from swarm_tui.view.agents import STATE_LABELS
from swarm_tui.view.failures import Failure

MAX_ROWS = 500
COLUMNS: tuple[tuple[str, int], ...] = (("time", 8), ("agent", 5), ("error", 14), ("st", 3), ("next", 13))
NO_TIME_BELOW = 72
"""Below this width the log leaves out the time column (the message keeps some room)."""
PRUNE_SLACK = 100
NEXT_SLOT = "next slot"
"""A retry whose backoff is over, waiting for a free slot."""

__all__ = ["COLUMNS", "ErrorLog", "Failure", "retry_countdown", "what_became"]


def failure_cells(
    failure: Failure, next_text: str, message_width: int = 300, *, endpoint: bool = False
) -> dict[str, Text]:
    """A failure's row, cell by column (`endpoint`: its message begins with the endpoint that
    answered it, as in a routed run)."""
    a = failure.attempt
    ended = a.started_at + a.latency_ms / 1000.0
    return {
        "time": cell(clock_time(ended)),
        "agent": cell(failure.agent_label, justify="right"),
        "error": cell(failure.error_class),
        "st": cell(str(a.status) if a.status else "-", justify="right"),
        "next": cell(next_text, style="bold" if next_text == "gave up" else ""),
        "message": cell(
            one_line(f"{a.endpoint}: {failure.message}" if endpoint else failure.message, max(4, message_width))
        ),
    }


def cell(text: str, *, justify: str = "left", style: str = "") -> Text:
    """A cell's text: literal (never markup), one line, "…" where the column cuts it."""
    return Text(text, style=style, justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]


def retry_countdown(remaining_s: float) -> str:
    """At most 13 characters (the column): `retry in 1.5s`, `retry in 42s`, `in 2h00m`."""
    if remaining_s <= 0:
        return NEXT_SLOT
    if round(remaining_s, 1) < 10:
        return f"retry in {remaining_s:.1f}s"
    text = f"retry in {span(remaining_s)}"
    return text if len(text) <= 13 else f"in {span(remaining_s)}"


def what_became(failure: Failure, state: TaskState | None, latest: bool) -> str | None:
    """The "next" cell of a row from its agent's state now; None: the row's own words stand (a
    retry still to come, a hedge's loser, a step's call, an agent not known here)."""
    if failure.kind in ("side", "step") or state is None:
        return None
    if failure.kind == "silent":  # flagged, never cut for it: what came of the call
        return {TaskState.SUCCEEDED: "then done", TaskState.FAILED: "then failed"}.get(state)
    if state is TaskState.SUCCEEDED:
        return "retried: done"
    if state is TaskState.CANCELLED:
        return "cancelled"
    if failure.kind == "final":
        return None if state is TaskState.FAILED else "retried"
    if latest and state is TaskState.RETRYING:
        return None  # its retry is still to come
    return "retried"


@dataclass
class Row:
    """A row of the table: one failure, or a group of repeats (newest last)."""

    failures: list[Failure] = field(default_factory=list)

    @property
    def last(self) -> Failure:
        return self.failures[-1]

    @property
    def agents(self) -> list[int]:
        return list(dict.fromkeys(f.index for f in self.failures if f.kind != "step"))


class ErrorLog(DataTable, inherit_bindings=False):
    """Failed attempts: Enter opens the row's agent, `R` retries it, `c` filters by class, `u`
    groups repeats. Its keys are its own (`errorlog.*` ids, remappable)."""

    DEFAULT_CSS = """
    ErrorLog { height: 1fr; min-height: 3; background: $surface; scrollbar-size-vertical: 1; }
    ErrorLog > .datatable--header { background: $panel; color: $text-muted; text-style: bold; }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("errorlog")

    class OpenRequested(Message):
        """Enter on a row: show its agent (a step's row: its failure in full). Nothing is sent."""

        def __init__(self, index: int, failure: Failure) -> None:
            super().__init__()
            self.index = index
            self.failure = failure

    class RetryRequested(Message):
        def __init__(self, indices: list[int]) -> None:
            super().__init__()
            self.indices = indices

        @property
        def index(self) -> int:
            return self.indices[0]

    class RowChosen(Message):
        """The cursor is on another row (the app says what retrying it would cost)."""

        def __init__(self, agents: list[int]) -> None:
            super().__init__()
            self.agents = agents

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True, show_row_labels=False)
        self._failures: list[Failure] = []
        """Every failure kept (the newest `MAX_ROWS`), in the order they came."""
        self._rows: dict[str, Row] = {}
        self._row_of_agent: dict[int, set[str]] = {}
        self._latest: dict[int, Failure] = {}
        """The newest failure of each agent: only it may still be a retry to come."""
        self._next_key = 0
        self._now = 0.0
        self.failures_seen = 0
        self._shown_columns = COLUMNS
        self.class_filter: str | None = None
        self.grouped = False
        self.state_of: Callable[[int], TaskState | None] = lambda index: None
        """The agent's state now (the app gives the run's)."""
        self.retry_hint: Callable[[list[int]], str] = lambda agents: ""
        """What retrying these agents would cost, in a few words (the app's)."""
        self.name_endpoints = False
        """Each message says which endpoint answered it (a routed run: the app sets it)."""
        self.clock: Callable[[], float] | None = None
        """The app's clock: a retry's countdown runs on it from when its row is shown (None: the
        row says the retry's delay and no countdown)."""

    def on_mount(self) -> None:
        self._add_columns()
        self._title()

    def _columns(self) -> tuple[tuple[str, int], ...]:
        """The fixed columns at this width (a narrow log leaves out the time)."""
        if 0 < self.size.width < NO_TIME_BELOW:
            return tuple(column for column in COLUMNS if column[0] != "time")
        return COLUMNS

    def _add_columns(self) -> None:
        self._shown_columns = self._columns()
        for label, width in self._shown_columns:
            self.add_column(label, width=width, key=label)
        self.add_column("message", width=self._message_width, key="message")

    @property
    def _message_width(self) -> int:
        """What is left of the width for the message: no horizontal scrolling, the full text is
        in the agent's detail."""
        fixed = sum(width + 2 * self.cell_padding for _, width in self._columns()) + 2 * self.cell_padding
        return max(8, self.size.width - fixed - self.styles.scrollbar_size_vertical)

    # ----------------------------------------------------------------- feeding

    def add_failures(self, failures: list[Failure]) -> None:
        if not failures:
            return
        if self.clock is not None:
            now = self.clock()
            failures = [failure.shown_at(now) for failure in failures]
        self.failures_seen += len(failures)
        for failure in failures:
            if failure.kind != "step":
                self._latest[failure.index] = failure
        self._failures.extend(failures)
        if len(self._failures) > MAX_ROWS + PRUNE_SLACK:
            del self._failures[: len(self._failures) - MAX_ROWS]
            self._rebuild()
            return
        follow = self.row_count == 0 or self.cursor_row >= self.row_count - 1
        for failure in failures:
            if self._shown(failure):
                self._place(failure)
        self._follow(follow)
        self._title()

    def tick(self, now: float) -> None:
        """Once a second: the countdowns of the retries still to come."""
        self._now = now
        for key, row in self._rows.items():
            if row.last.retry_due is not None:
                self._update_next(key, row)

    def agents_changed(self, indices: Iterable[int]) -> None:
        """These agents' states changed: their rows say what became of them."""
        keys = set()
        for index in indices:
            keys |= self._row_of_agent.get(index, set())
        for key in keys:
            row = self._rows.get(key)
            if row is not None:
                self._update_next(key, row)

    def agent_started(self, index: int) -> None:
        """An agent is in flight again: its rows say so."""
        self.agents_changed([index])

    # ----------------------------------------------------------------- rows

    def next_text(self, row: Row) -> str:
        failure = row.last
        if self.grouped and len(row.failures) > 1:
            agents = row.agents
            return f"{len(agents)} agents" if len(agents) > 1 else self._one_next(failure)
        return self._one_next(failure)

    def _one_next(self, failure: Failure) -> str:
        latest = self._latest.get(failure.index) is failure
        became = what_became(failure, self.state_of(failure.index), latest)
        if became is not None:
            return became
        if failure.retry_due is not None and latest:
            return retry_countdown(failure.retry_due - self._now)
        if failure.kind == "retry" and not latest:
            return "retried"
        if not failure.next_step and failure.delay_s is not None:
            return retry_countdown(failure.delay_s)
        return failure.next_step

    def _shown(self, failure: Failure) -> bool:
        return self.class_filter is None or failure.error_class == self.class_filter

    def _place(self, failure: Failure) -> None:
        """Add a row for `failure`, or (grouped) move its group's row to the bottom, counted."""
        if self.grouped:
            key = self._group_key(failure)
            row = self._rows.get(key)
            if row is not None:
                row.failures.append(failure)
                self.remove_row(key)
                self._add_row(key, row)
                return
            self._add_row(key, Row([failure]))
            return
        key = str(self._next_key)
        self._next_key += 1
        self._add_row(key, Row([failure]))

    @staticmethod
    def _group_key(failure: Failure) -> str:
        return "g:" + "\x00".join(failure.repeat_key)

    def _add_row(self, key: str, row: Row) -> None:
        self._rows[key] = row
        for index in row.agents:
            self._row_of_agent.setdefault(index, set()).add(key)
        self.add_row(*self._cells(row), key=key)

    def _cells(self, row: Row) -> tuple[Text, ...]:
        cells = failure_cells(row.last, self.next_text(row), self._message_width, endpoint=self.name_endpoints)
        if self.grouped and len(row.failures) > 1:
            cells["agent"] = cell(f"×{len(row.failures)}", justify="right")
        return tuple(cells[key] for key, _ in (*self._shown_columns, ("message", 0)))

    def _update_next(self, key: str, row: Row) -> None:
        text = self.next_text(row)
        try:
            if self.get_cell(key, "next").plain != text:
                self.update_cell(key, "next", cell(text, style="bold" if text == "gave up" else ""))
        except Exception:  # the row was pruned meanwhile
            self._rows.pop(key, None)

    def _rebuild(self) -> None:
        """Every row again: after a filter or grouping change, a prune, or a new width."""
        self._rows.clear()
        self._row_of_agent.clear()
        self.clear()
        for failure in self._failures:
            if self._shown(failure):
                self._place(failure)
        self._follow(True)
        self._title()

    def _follow(self, follow: bool) -> None:
        if follow and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False, scroll=True)

    def on_resize(self) -> None:
        width = self._message_width
        columns = list(self.columns.values())
        if columns and (columns[-1].width != width or self._columns() != self._shown_columns):
            self.clear(columns=True)
            self._add_columns()
            self._rebuild()
        self._title()

    # ----------------------------------------------------------------- the title: what the keys would do

    def _title(self) -> None:
        """The log's top border: how many failures, the filter, and what Enter and `R` do on the
        row under the cursor (what a retry costs), as much of it as the width holds."""
        row = self.current_row()
        parts = [f" errors {self.failures_seen}"]
        if self.class_filter is not None:
            parts.append(f"class {self.class_filter}")
        if self.grouped:
            parts.append("repeats grouped")
        if row is not None and row.last.kind != "step":
            agents = [i for i in row.agents if self.state_of(i) is TaskState.FAILED]
            who = f"#{row.last.index + 1}"
            parts.append(f"⏎ {who} detail")
            if agents:
                what = f"#{agents[0] + 1}" if len(agents) == 1 else f"{len(agents)} agents"
                cost = self.retry_hint(agents)
                parts.append(f"R retry {what}" + (f" {cost}" if cost else ""))
        width = self.size.width - 4
        title = parts[0]
        for part in parts[1:]:
            if width > 0 and len(title) + 3 + len(part) > width:
                break
            title += f" · {part}"
        self.border_title = title + " "

    def current_row(self) -> Row | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None
        return self._rows.get(key) if key is not None else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._title()
        row = self.current_row()
        if row is not None:
            self.post_message(self.RowChosen(row.agents))

    def refresh_title(self) -> None:
        """The agents' states changed (a retry now makes sense, or no longer): say so."""
        self._title()

    # ----------------------------------------------------------------- keys

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self._rows.get(event.row_key.value) if event.row_key.value is not None else None
        if row is not None:
            self.post_message(self.OpenRequested(row.last.index, row.last))

    def action_retry_row(self) -> None:
        """`R`: the row's failed agents again (what the title offers); a row whose agents have all
        come through since says so, once, and nothing is sent."""
        row = self.current_row()
        if row is None or row.last.kind == "step":
            return
        failed = [i for i in row.agents if self.state_of(i) is TaskState.FAILED]
        if failed:
            self.post_message(self.RetryRequested(failed))
            return
        index = row.last.index
        state = self.state_of(index)
        now = STATE_LABELS[state] if state is not None else "not failed"
        self.notify(f"Agent {index + 1} is {now}: nothing to retry (R retries a failed agent).", markup=False)

    def action_cycle_class(self) -> None:
        classes = sorted({f.error_class for f in self._failures})
        choices: list[str | None] = [None, *classes]
        position = choices.index(self.class_filter) if self.class_filter in choices else 0
        self.class_filter = choices[(position + 1) % len(choices)]
        self._rebuild()
        what = "every class" if self.class_filter is None else f"only {self.class_filter}"
        self.notify(f"Error log: {what} ({len(classes)} classes seen)", timeout=2, markup=False)

    def action_toggle_group(self) -> None:
        self.grouped = not self.grouped
        self._rebuild()
        self.notify(
            "Error log: repeats grouped (same class, status and message)" if self.grouped else "Error log: every row",
            timeout=2,
            markup=False,
        )

    def counts_by_class(self) -> Mapping[str, int]:
        counts: dict[str, int] = {}
        for failure in self._failures:
            counts[failure.error_class] = counts.get(failure.error_class, 0) + 1
        return counts
