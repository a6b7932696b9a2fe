"""The cost projection screen (`$`): this run's per-task tokens, priced per month on every model.

The same projection as `swarm-tui estimate --from-run`, built from the live `RunStats` so it can
be read mid-run: the article's scenario (100 agents x 50 tasks a day x 30 days) with the tokens
this swarm actually spends per finished task.

On screen the prices are a `DataTable`, not the command's text table: the model column stays
put while ←/→ scroll the others, so every column (cost in the display currency, the saving, the
cost at the provider's batch rate and what the batch lane saves, `—` where no batch rate is
published) can be reached at 80 columns; the token columns, the same on every row, are stated
once above.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from swarm_tui.config import Config
from swarm_tui.core.errors import InputError
from swarm_tui.engine import RunStats
from swarm_tui.estimate import Estimate, Scenario, build_estimate, format_table, scenario_from_usage, table_cells
from swarm_tui.pricing import PriceTable
from swarm_tui.pricing.currency import DisplayCurrency
from swarm_tui.ui.keys import bindings_for
from swarm_tui.ui.widgets.footer.key_footer import KeyFooter


def projection(stats: RunStats, config: Config, currency: DisplayCurrency) -> Estimate | str:
    """The projection, or why there is none yet."""
    try:
        scenario = scenario_from_usage(stats.usage, stats.done, Scenario())
        table = PriceTable.builtin(config.prices, billing=config.billing, source=config.path)
        return build_estimate(scenario, table=table, currency=currency)
    except InputError as exc:
        return f"No projection yet: {exc}"


def summary_and_notes(text: str) -> tuple[str, str]:
    """The lines `format_table` prints above its table (the scenario, the tokens) and below it."""
    blocks = text.split("\n\n")
    return blocks[0], blocks[-1] if len(blocks) > 2 else ""


class EstimateScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = bindings_for("estimate")

    DEFAULT_CSS = """
    EstimateScreen #estimate-title { background: $panel; padding: 0 1; text-style: bold; }
    EstimateScreen #estimate-summary { padding: 0 1; }
    EstimateScreen #estimate-table { height: 1fr; margin: 1 1 0 1; }
    EstimateScreen #estimate-notes { height: auto; max-height: 6; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, stats: RunStats, config: Config, currency: DisplayCurrency) -> None:
        super().__init__()
        self._estimate = projection(stats, config, currency)

    def compose(self) -> ComposeResult:
        yield Static(
            "Monthly cost projection · this run's tokens per task · ←/→ scroll the table "
            "(swarm-tui estimate --help for other scenarios)",
            id="estimate-title",
            markup=False,
        )
        estimate = self._estimate
        if isinstance(estimate, str):
            yield Static(Text(estimate), id="estimate-summary")
        else:
            summary, notes = summary_and_notes(format_table(estimate))
            yield Static(Text(summary), id="estimate-summary")
            yield DataTable(id="estimate-table", cursor_type="row", zebra_stripes=True, fixed_columns=1)
            yield Static(Text(notes), id="estimate-notes")
        yield KeyFooter()

    def on_mount(self) -> None:
        if isinstance(self._estimate, str):
            return
        headers, rows, _ = table_cells(self._estimate, tokens=False)  # token columns: stated above
        table = self.query_one(DataTable)
        for n, header in enumerate(headers):
            table.add_column(Text(header, justify="left" if n < 2 else "right"), key=header)
        for cells in rows:
            table.add_row(*(Text(cell, justify="left" if n < 2 else "right") for n, cell in enumerate(cells)))
        table.focus()
