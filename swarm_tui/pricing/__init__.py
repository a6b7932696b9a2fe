"""Prices and the cost of what was billed.

Cost is computed per attempt from normalised usage (`core.usage.Usage`), so failed-but-billed
and hedged attempts count, each kind of token at its own rate, at the tier that served the call
(`Price.for_tier`): `price` says what a token costs and what a usage costs, `rows` reads a price
row from TOML (the built-in table's and the user's overrides alike), `table` is the table and its
lookups by provider and model, `figures` the run-level spend rate and projection. A model
without a known price costs `None` ("price unknown"), never $0.

Where a run's money went (its attempts priced and split, the cost fields of summary.json) is
`run_cost`'s; this package knows what a token costs, not what a run spent. It imports nothing of
the engine, the journal or Textual (import-linter contract `pricing-below`).
"""

from __future__ import annotations

from swarm_tui.pricing.figures import cost_per_minute, projected_total
from swarm_tui.pricing.price import (
    AT_BATCH_RATES,
    EXCESS,
    PER_TOKENS,
    WHOLE,
    CostParts,
    LongContext,
    Price,
    TierRates,
    answer_cost,
    billable_output,
)
from swarm_tui.pricing.rows import BATCH_FIELDS, CACHE_FIELDS, ENTRY_FIELDS, PRICE_FIELDS
from swarm_tui.pricing.table import OFFICIAL, Offer, PriceTable, TierRule

__all__ = [
    "AT_BATCH_RATES",
    "BATCH_FIELDS",
    "CACHE_FIELDS",
    "ENTRY_FIELDS",
    "EXCESS",
    "OFFICIAL",
    "PER_TOKENS",
    "PRICE_FIELDS",
    "WHOLE",
    "CostParts",
    "LongContext",
    "Offer",
    "Price",
    "PriceTable",
    "TierRates",
    "TierRule",
    "answer_cost",
    "billable_output",
    "cost_per_minute",
    "projected_total",
]
