"""The projection as text: the cells of its table (the TUI's `$` screen shows them in a
DataTable) and `format_table`, what `swarm-tui estimate` prints within 80 columns."""

from __future__ import annotations

import textwrap

from swarm_tui.core.lanes import LIVE
from swarm_tui.core.tiers import DEFAULT
from swarm_tui.estimate.scenario import Estimate
from swarm_tui.pricing.currency import format_usd


def tokens_text(n: float) -> str:
    """`307.2M`, `1.5B`, `12.3k`, `950`."""
    for limit, div, suffix in ((1e3, 1, ""), (1e6, 1e3, "k"), (1e9, 1e6, "M"), (float("inf"), 1e9, "B")):
        if abs(n) < limit:
            return f"{n:,.0f}" if not suffix else f"{n / div:,.1f}{suffix}"
    return str(n)  # pragma: no cover


def table_cells(
    estimate: Estimate, *, tokens: bool = True, narrow: bool = False
) -> tuple[list[str], list[list[str]], dict[str, str]]:
    """(headers, one row of cells per way a provider bills the tokens, billing notes) of the
    projection table: what `format_table` prints (`narrow`: its short headers) and the TUI's `$`
    screen shows (`tokens=False`: without the token columns, which are the same on every row).

    Each provider row of a model gives a line per lane and tier it has a rate for (`EstimateRow.
    ways`): live at the default tier, at Flex, at Priority, and the batch lane. `saving vs
    priciest` compares each with the model's priciest offer at the default tier (negative: dearer).
    A local cost at another rate than the display currency's is marked `*`; the notes say which
    provider bills at which rate."""
    cur = estimate.currency
    u = estimate.usage
    prices = ["in/1M", "out/1M"] if narrow else ["in $/1M", "out $/1M"]
    headers = ["model", "provider", "lane", "tier", *prices]
    headers += ["input tok", "output tok"] if tokens else []
    headers.append("cost USD")
    if cur.shows_local:
        headers.append(f"cost {cur.code}")
    headers.append("saving" if narrow else "saving vs priciest")
    rows: list[list[str]] = []
    billed_notes: dict[str, str] = {}
    for row in estimate.rows:
        top = row.cost_usd + row.saving_usd  # the model's priciest default-tier offer
        for lane, tier, price, cost in row.ways():
            cells = [row.model, row.provider, lane, tier if lane == LIVE else NO_TIER]
            cells += [price_text(price.input), price_text(price.output)]
            cells += [tokens_text(u.prompt), tokens_text(u.completion)] if tokens else []
            cells.append(format_usd(cost))
            if cur.shows_local:
                local = row.currency.local(cost)
                if row.currency.rate != cur.rate:
                    local += "*"
                    billed_notes[row.provider] = row.currency.rate_text()
                cells.append(local)
            if row.priciest and tier == DEFAULT:
                cells.append("priciest" if narrow else "(priciest)")
            elif tier == DEFAULT and row.saving_usd <= 0:
                cells.append("-")
            else:
                cells.append(f"{(top - cost) / top:.1%}" if top > 0 else "-")
            rows.append(cells)
    return headers, rows, billed_notes


TABLE_WIDTH = 80
"""`format_table` fits a terminal of 80 columns: the model heads its rows, the notes wrap."""


def format_table(estimate: Estimate) -> str:
    s = estimate.scenario
    u = estimate.usage
    cur = estimate.currency
    lines = [
        f"Monthly projection: {s.agents:,} agents x {_num(s.tasks_per_day)} tasks/day x {_num(s.days)} days"
        f" = {_num(s.tasks)} tasks",
        f"Per task: {_num(s.input_tokens)} input tokens ({s.cached_share:.0%} cached)"
        f" + {_num(s.output_tokens)} output tokens",
        f"Tokens: {tokens_text(u.prompt)} input ({tokens_text(u.cached)} cached) + {tokens_text(u.completion)} output",
    ]
    show_local = cur.shows_local
    headers, table, billed_notes = table_cells(estimate, tokens=False, narrow=True)
    headers, table = headers[1:], [cells[1:] for cells in table]  # the model heads its rows instead
    right = set(range(3, len(headers)))
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]

    def render(cells: list[str]) -> str:
        return (
            "  "
            + "  ".join(
                c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()
        )

    lines.append("")
    lines.append(render(headers))
    models = [row.model for row in estimate.rows for _ in row.ways()]
    previous = None
    for model, cells in zip(models, table, strict=True):
        if model != previous:
            if previous is not None:
                lines.append("")
            lines.append(model)
        previous = model
        lines.append(render(cells))
    lines.append("")
    notes: list[str] = []
    cheapest, priciest = estimate.cheapest, estimate.priciest
    if len({r.model for r in estimate.rows}) > 1 and priciest.cost_usd > cheapest.cost_usd:
        notes.append(
            f"Cheapest: {cheapest.model} @ {cheapest.provider} {format_usd(cheapest.cost_usd)}, "
            f"{format_usd(priciest.cost_usd - cheapest.cost_usd)} "
            f"({(priciest.cost_usd - cheapest.cost_usd) / priciest.cost_usd:.1%}) less than the priciest, "
            f"{priciest.model} @ {priciest.provider} {format_usd(priciest.cost_usd)}"
        )
    notes.append(
        "Lane live or batch (the provider's Batch API, within 24 h); tier default, flex (the batch rate, "
        "answered live: slower, sometimes unavailable) or priority (faster, at a premium), where the provider "
        "publishes the rate. Saving: against the model's priciest offer at the default tier."
    )
    if show_local:
        basis = f"{cur.rate_text()} ({cur.basis})" if cur.basis else cur.rate_text()
        if billed_notes:
            bills = ", ".join(f"{p} bills {r}" for p, r in sorted(billed_notes.items()))
            notes.append(f"{cur.code} at {basis}; * {bills} (price table [billing])")
        else:
            notes.append(f"{cur.code} at {basis}")
    notes.append(
        f"Prices: USD per 1M tokens, built-in table updated {estimate.prices_updated or '?'} "
        "(official list prices and the source article's relay prices); override in your config [prices]."
    )
    notes += [f"Note: {note}" for note in estimate.notes]
    for note in notes:
        lines += textwrap.wrap(note, TABLE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(lines)


NO_TIER = "—"
"""The tier column of the batch lane's row (the batch is its own rate, not a service tier)."""


def price_text(value: float) -> str:
    """USD per 1M tokens: `8.00`, `0.50`, `0.625`, `0.028`, `0.0433` (never rounded away: a half
    of $1.25 is $0.625, not $0.62)."""
    cents = value * 100
    if value == 0 or (value >= 0.1 and abs(cents - round(cents)) < 1e-9):
        return f"{value:.2f}"
    return f"{value:.4g}"


def _num(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
