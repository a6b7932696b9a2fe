"""The cost projection screen (`$`): this run's per-task tokens, priced per month on every model.

The same table as `swarm-tui estimate --from-run`, built from the live `RunStats` so it can be
read mid-run: the article's scenario (100 agents x 50 tasks a day x 30 days) with the tokens
this swarm actually spends per finished task.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widgets import Footer, Static

from ..config import Config
from ..currency import DisplayCurrency
from ..engine import RunStats
from ..errors import InputError
from ..estimate import Scenario, build_estimate, format_table, scenario_from_usage
from ..pricing import PriceTable


def projection_text(stats: RunStats, config: Config, currency: DisplayCurrency) -> str:
    """The table, or why there is none yet."""
    try:
        scenario = scenario_from_usage(stats.usage, stats.done, Scenario())
        table = PriceTable.builtin(config.prices, billing=config.billing, source=config.path)
        return format_table(build_estimate(scenario, table=table, currency=currency))
    except InputError as exc:
        return f"No projection yet: {exc}"


class EstimateScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,dollar_sign,q", "app.pop_screen", "Back", id="estimate.back"),
    ]

    DEFAULT_CSS = """
    EstimateScreen #estimate-title { background: $panel; padding: 0 1; text-style: bold; }
    EstimateScreen ScrollableContainer { padding: 0 1; }
    EstimateScreen #estimate-table { width: auto; }
    """

    def __init__(self, stats: RunStats, config: Config, currency: DisplayCurrency) -> None:
        super().__init__()
        self._text = projection_text(stats, config, currency)

    def compose(self) -> ComposeResult:
        yield Static("Monthly cost projection · this run's tokens per task, 100 agents x 50 tasks/day x 30 days "
                     "(swarm-tui estimate --help for other scenarios)", id="estimate-title", markup=False)
        with ScrollableContainer():
            yield Static(Text(self._text, no_wrap=True), id="estimate-table")
        yield Footer()
