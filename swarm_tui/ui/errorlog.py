"""The error log: one row per failed attempt, newest at the bottom; Enter retries that agent.

A `DataTable` rather than a `Log`/`RichLog`: each failure is a record with fields (time,
agent, class, status, what happens next, message) that line up in columns at any width, and
the rows must be selectable, since Enter on a row retries that agent. Rows are appended and
not rewritten, but for the "next" cell of a retry still to come: it counts down once a second
and says "retried" when the agent is in flight again, so the log agrees with the grid (there
are only as many such rows as agents waiting out a backoff). The table keeps at most
`MAX_ROWS`: past that, it is rebuilt from its newest rows in one go (`remove_row` is linear).

Provider text is untrusted: every cell is a `rich.text.Text`, never markup, so an error
message with `[brackets]` shows as written.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from ..engine.events import Attempt
from .format import clock_time, one_line

MAX_ROWS = 500
COLUMNS = (("time", 8), ("agent", 5), ("error", 14), ("st", 3), ("next", 13))
PRUNE_SLACK = 100


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt, as the log shows it, with what happens next."""

    attempt: Attempt
    next_step: str
    gave_up: bool = False
    retry_due: float | None = None
    """When the retry is due (the app's clock), for the countdown; None when not a pending retry."""

    @classmethod
    def retrying(cls, attempt: Attempt, delay_s: float, now: float | None = None) -> Failure:
        """NaN delay: a retry is coming but its delay is unknown (an attached view)."""
        if math.isnan(delay_s):
            return cls(attempt, "retrying")
        return cls(attempt, retry_countdown(delay_s), retry_due=None if now is None else now + delay_s)

    @classmethod
    def final(cls, attempt: Attempt) -> Failure:
        return cls(attempt, "gave up", gave_up=True)

    @classmethod
    def side(cls, attempt: Attempt) -> Failure:
        """A hedged pair's call that failed: the other call decides the task."""
        return cls(attempt, "other call on")

    @property
    def index(self) -> int:
        return self.attempt.index

    def cells(self, message_width: int = 300) -> tuple[Text, ...]:
        a = self.attempt
        error = a.error
        kind = str(error.kind) if error else a.outcome
        message = one_line(error.message if error else "", max(4, message_width))
        ended = a.started_at + a.latency_ms / 1000.0
        return (
            Text(clock_time(ended)),
            Text(f"#{a.index + 1}", justify="right"),
            Text(kind),
            Text(str(a.status) if a.status else "-", justify="right"),
            Text(self.next_step, style="bold" if self.gave_up else ""),
            Text(message),
        )


def retry_countdown(remaining_s: float) -> str:
    return f"retry in {remaining_s:.1f}s" if remaining_s > 0 else "retry: next slot"


class ErrorLog(DataTable, inherit_bindings=False):
    """Failed attempts; Enter (or a click on a selected row) asks to retry that agent.

    Its keys are its own (`errorlog.*` ids, remappable): a table's row keys, Home/End to the
    first/last row (the columns fit the width, so a table's column keys had nothing to do)."""

    DEFAULT_CSS = """
    ErrorLog { height: 1fr; min-height: 3; background: $surface; scrollbar-size-vertical: 1; }
    ErrorLog > .datatable--header { background: $panel; color: $text-muted; text-style: bold; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Cursor up", id="errorlog.cursor_up", show=False),
        Binding("down", "cursor_down", "Cursor down", id="errorlog.cursor_down", show=False),
        Binding("pageup", "page_up", "Page up", id="errorlog.page_up", show=False),
        Binding("pagedown", "page_down", "Page down", id="errorlog.page_down", show=False),
        Binding("home,ctrl+home", "scroll_top", "First", id="errorlog.first", show=False),
        Binding("end,ctrl+end", "scroll_bottom", "Last", id="errorlog.last", show=False),
        Binding("enter", "select_cursor", "Retry agent", id="errorlog.retry"),
    ]

    class RetryRequested(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True, show_row_labels=False)
        self._entries: deque[Failure] = deque()
        self._agent_of: dict[object, int] = {}
        self._pending: dict[str, tuple[int, float]] = {}
        """Rows whose retry is still to come: key -> (agent index, due time)."""
        self._next_key = 0
        self.failures_seen = 0

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for label, width in COLUMNS:
            self.add_column(label, width=width, key=label)
        self.add_column("message", width=self._message_width)

    @property
    def _message_width(self) -> int:
        """What is left of the width for the message: no horizontal scrolling, the full text is
        in the agent's detail."""
        fixed = sum(width + 2 * self.cell_padding for _, width in COLUMNS) + 2 * self.cell_padding
        return max(10, self.size.width - fixed - self.styles.scrollbar_size_vertical)

    def on_resize(self) -> None:
        width = self._message_width
        columns = list(self.columns.values())
        if columns and columns[-1].width != width:
            entries = list(self._entries)
            self._entries.clear()
            self._agent_of.clear()
            self._pending.clear()
            self.clear(columns=True)
            self._add_columns()
            self._append(entries, follow=True)

    def add_failures(self, failures: list[Failure]) -> None:
        if not failures:
            return
        self.failures_seen += len(failures)
        follow = self.row_count == 0 or self.cursor_row >= self.row_count - 1
        if len(self._entries) + len(failures) > MAX_ROWS + PRUNE_SLACK:
            keep = (list(self._entries) + failures)[-MAX_ROWS:]
            self._entries.clear()
            self._agent_of.clear()
            self._pending.clear()
            self.clear()
            failures = keep
        self._append(failures, follow)

    def tick(self, now: float) -> None:
        """Once a second: the countdowns of the retries still to come."""
        for key, (_, due) in self._pending.items():
            self._set_next(key, retry_countdown(due - now))

    def agent_started(self, index: int) -> None:
        """An agent is in flight again: its pending retry rows say so (and stop counting)."""
        if not self._pending:
            return
        for key in [k for k, (i, _) in self._pending.items() if i == index]:
            del self._pending[key]
            self._set_next(key, "retried")

    def _set_next(self, key: str, text: str) -> None:
        try:
            self.update_cell(key, "next", Text(text))
        except Exception:  # the row was pruned meanwhile
            self._pending.pop(key, None)

    def _append(self, failures: list[Failure], follow: bool) -> None:
        width = self._message_width
        for failure in failures:
            key = str(self._next_key)
            self._next_key += 1
            self._entries.append(failure)
            self._agent_of[key] = failure.index
            if failure.retry_due is not None:
                self._pending[key] = (failure.index, failure.retry_due)
            self.add_row(*failure.cells(width), key=key)
        if follow and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False, scroll=True)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        index = self._agent_of.get(event.row_key.value)
        if index is not None:
            self.post_message(self.RetryRequested(index))
