"""The aggregate screen: what the swarm's L4 aggregator wrote (aggregate.md), and the plan."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Markdown, Static

from swarm_tui.ui.keys import bindings_for
from swarm_tui.ui.widgets.footer.key_footer import KeyFooter


class AggregateScreen(Screen[None]):
    """Shows `aggregate.md` of the run directory; `g` or Escape goes back to the grid."""

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("aggregate")

    DEFAULT_CSS = """
    AggregateScreen #aggregate-title { background: $panel; padding: 0 1; text-style: bold; }
    AggregateScreen VerticalScroll { padding: 0 1; }
    """

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = run_dir

    def compose(self) -> ComposeResult:
        path = self.run_dir / "aggregate.md"
        yield Static(f"Aggregate · {path}", id="aggregate-title", markup=False)
        with VerticalScroll():
            if path.exists():
                yield Markdown(path.read_text(encoding="utf-8"))
            else:
                yield Static(
                    "No aggregate yet: it is written when the workers of the last round are done.", markup=False
                )
        yield KeyFooter()
