"""Run-level figures of money: how fast a run spends, and what it will have cost at the end.

Apart from the price table because they read a run's totals, not a token's price: the footer,
the headless line and summary.json show them (`engine.stats.RunStats`, `run_cost`).
"""

from __future__ import annotations


def cost_per_minute(cost_usd: float | None, elapsed_s: float | None) -> float | None:
    """Spend rate; None when the cost is unknown or no time has passed."""
    if cost_usd is None or not elapsed_s or elapsed_s <= 0:
        return None
    return cost_usd * 60.0 / elapsed_s


def projected_total(cost_usd: float | None, finished: int, remaining: int) -> float | None:
    """The cost when the remaining tasks cost what the finished ones did on average (retries
    and failures included); None before the first task finished or when the price is unknown."""
    if cost_usd is None:
        return None
    if remaining <= 0:
        return cost_usd
    if finished <= 0:
        return None
    return cost_usd + cost_usd / finished * remaining
