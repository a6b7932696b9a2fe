"""The lane panel, under the grid while the run has provider batches: the batch lane's legend and
its latest batches, one a line. It takes its rows from the grid (the console's layout fits the
grid to what the panel leaves) and has no height at all in a run without batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text

from swarm_tui.ui import format as fmt
from swarm_tui.ui.widgets.grid.agent_grid import BATCH_GLYPH, AgentGrid
from swarm_tui.ui.widgets.panels.text_panel import TextPanel

if TYPE_CHECKING:
    from swarm_tui.engine import RunStats
    from swarm_tui.view.figures import BatchView

BATCH_WINDOW = "24h"
"""The completion window the batch lane asks for (OpenAI's only one)."""


class LanePanel(TextPanel):
    """Under the grid while the run has provider batches (`--lane batch|auto`): the batch
    colour's legend with the lines waiting, then the latest batches, one a line: id, status,
    requests done and failed of the batch's, time in the provider's 24 h window, next poll.

    It reads the run view's `RunFigures.batches`, kept from the events alone, so a live view and an
    attached one show the same lines. Hidden (no height at all) in a run without batches."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lane-panel--title",
        "lane-panel--dim",
        "lane-panel--bad",
        "lane-panel--good",
        "lane-panel--warn",
    }

    DEFAULT_CSS = """
    LanePanel { height: auto; padding: 0 2; display: none; }
    LanePanel > .lane-panel--title { color: $primary; text-style: bold; }
    LanePanel > .lane-panel--dim { color: $text-muted; }
    LanePanel > .lane-panel--bad { color: $error; text-style: bold; }
    LanePanel > .lane-panel--good { color: $success; }
    LanePanel > .lane-panel--warn { color: $warning; }
    """

    @staticmethod
    def shown(batches: Mapping[str, BatchView], rows: int) -> list[BatchView]:
        """The batches worth a line, at most `rows`: every open one first, then the latest ended,
        in the order they were submitted."""
        views = list(batches.values())
        open_ = [v for v in views if v.ended is None]
        keep = set(map(id, open_[-rows:]))
        for view in reversed(views):
            if len(keep) >= rows:
                break
            keep.add(id(view))
        return [v for v in views if id(v) in keep]

    def update_from(
        self, batches: Mapping[str, BatchView], grid: AgentGrid, stats: RunStats, now: float, rows: int = 2
    ) -> None:
        """`now`: epoch seconds (the batches' times are the provider's wall clock, not the run's)."""
        if not batches:
            self.display = False
            return
        self.display = True
        style = self.get_component_rich_style
        dim = style("lane-panel--dim")
        shown = self.shown(batches, rows)
        open_count = sum(1 for v in batches.values() if v.ended is None)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{BATCH_GLYPH} ", grid.batch_style())
        text.append(f" {stats.batch_waiting} of {stats.batch_sent} batch lines waiting", "bold")
        text.append(f" · {len(batches)} batch{'es' if len(batches) != 1 else ''}", "")
        if len(batches) > 1:
            text.append(f" ({open_count} open)", dim)
        if len(shown) < len(batches):
            text.append(f", latest {len(shown)} shown", dim)
        hint = f" · half price, back within {BATCH_WINDOW}"
        width = self.content_size.width  # (0 before its first layout: then the panel's ellipsis cuts)
        if not width or text.cell_len + len(hint) <= width:  # the lane's promise, where it fits
            text.append(hint, dim)
        digits = len(str(max(v.requests for v in shown)))
        for view in shown:
            text.append("\n")
            self._batch_line(text, view, digits, now)
        self.show(text)

    def _batch_line(self, text: Text, view: BatchView, digits: int, now: float) -> None:
        style = self.get_component_rich_style
        dim, bad = style("lane-panel--dim"), style("lane-panel--bad")
        ended = view.ended
        status = view.status.replace("_", " ")
        if ended is None:
            status_style = style("lane-panel--warn") if view.status == "cancelling" else ""
        else:
            status_style = style("lane-panel--good" if view.status == "completed" else "lane-panel--bad")
        text.append(f"{fmt.short_batch_id(view.batch_id):<16}", dim)
        text.append(f"{status:<12}", status_style)
        done = ended.succeeded if ended is not None else view.completed
        text.append(f"{done:>{digits}}/{view.requests:<{digits}}")
        text.append(" done", dim)
        failed = ended.failed if ended is not None else view.failed
        if failed:
            text.append(f" {failed} failed", bad)
        if ended is not None:
            if ended.requeued:
                text.append(f" {ended.requeued} sent again", style("lane-panel--warn"))
            if ended.unfinished:
                text.append(f" {ended.unfinished} unfinished", style("lane-panel--warn"))
            return
        text.append(f"  {fmt.span(now - view.submitted_at)} of {BATCH_WINDOW}", dim)
        if view.next_poll_s is not None and view.polled_at is not None:
            due = view.polled_at + view.next_poll_s - now
            text.append(f" · poll in {fmt.span(due)}" if due >= 1 else " · polling", dim)

    def lines(self, batches: Mapping[str, BatchView], rows: int) -> int:
        """The panel's height for these batches (0: hidden)."""
        return 1 + len(self.shown(batches, rows)) if batches else 0
