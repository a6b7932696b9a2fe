"""Where a run's money went: its billed attempts priced, split by token kind, endpoint, lane and
outcome, and the cost fields of `summary.json`.

Apart from `pricing` (what a token costs) because this reads a run: the journal's attempts and
the prices its plan recorded when it opened, so a summary written later (a resumed run, `swarm-tui
summary`) bills at the prices the run was sent at, not at today's table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .core.lanes import BATCH, LIVE, is_batch_endpoint, lane_of
from .core.usage import Usage
from .errors import InputError
from .pricing import CostParts, Price, PriceTable, cost_per_minute, projected_total

if TYPE_CHECKING:
    from .currency import DisplayCurrency

__all__ = ["run_cost_details", "summary_cost_fields"]


def run_cost_details(attempts: Iterable[dict[str, Any]], price_for: Callable[[str], Price | None]) -> dict[str, Any]:
    """Break a run's billed attempts (journal rows) down by token kind, endpoint, lane and outcome.

    `price_for(endpoint)` gives each endpoint's price. Attempts are billed whatever their
    outcome; `overhead_usd` is what attempts that did not deliver their task's result cost
    (retried, failed, hedges lost, cancelled); `by_lane` splits the billed USD into `live` and
    `batch` (attempts whose endpoint ends with `/batch`).
    """
    parts = CostParts()
    by_endpoint: dict[str, dict[str, Any]] = {}
    by_lane = dict.fromkeys((LIVE, BATCH), 0.0)
    overhead = 0.0
    unpriced = 0
    for row in attempts:
        endpoint = row.get("endpoint") or "?"
        usage = Usage(
            prompt=row.get("prompt_tokens") or 0,
            completion=row.get("completion_tokens") or 0,
            cached=row.get("cached_tokens") or 0,
            reasoning=row.get("reasoning_tokens") or 0,
        )
        slot = by_endpoint.setdefault(
            endpoint, {"attempts": 0, "cost_usd": 0.0, "prompt": 0, "cached": 0, "completion": 0}
        )
        slot["attempts"] += 1
        slot["prompt"] += usage.prompt
        slot["cached"] += usage.cached
        slot["completion"] += usage.completion
        cost = row.get("cost_usd")
        price = price_for(endpoint)
        if cost is None:
            if usage.total:
                unpriced += 1
            continue
        slot["cost_usd"] += cost
        lane = lane_of(endpoint)  # `cache`: a replay, cost 0
        by_lane[lane] = by_lane.get(lane, 0.0) + cost
        if row.get("outcome") != "ok":
            overhead += cost
        if price is not None:
            parts = parts + price.breakdown(usage)
    for endpoint, slot in by_endpoint.items():
        slot["cost_usd"] = round(slot["cost_usd"], 6)
        price = price_for(endpoint)
        slot["price"] = price.to_dict() if price else None
    return {
        "input_usd": round(parts.input_usd, 6),
        "cached_input_usd": round(parts.cached_input_usd, 6),
        "output_usd": round(parts.output_usd, 6),
        "cached_savings_usd": round(parts.cached_savings_usd, 6),
        "overhead_usd": round(overhead, 6),
        "unpriced_attempts": unpriced,
        "by_endpoint": by_endpoint,
        "by_lane": {lane: round(usd, 6) for lane, usd in by_lane.items()},
    }


def summary_cost_fields(
    journal: Any,
    *,
    model: str | None,
    provider: str,
    cost_usd: float | None,
    makespan_s: float | None,
    finished: int,
    unfinished: int,
    currency: DisplayCurrency,
) -> dict[str, Any]:
    """The cost fields of `summary.json`, from a journal (read-only use): spend rate, projected
    total, the cost in `currency` (chosen when the run opened), and where the money went
    (`run_cost_details`)."""
    meta = journal.meta()
    plan = meta.get("plan") or {}
    prices = plan.get("prices") or {}
    fallback_model = (plan.get("profile") or {}).get("fallback_model")
    try:
        table = PriceTable.builtin(prices)
    except InputError:
        table = PriceTable.builtin()

    @functools.cache
    def price_for(endpoint: str) -> Price | None:
        provider = endpoint.split("/")[0]
        if endpoint.endswith("/fallback"):
            return table.lookup(fallback_model or model, provider)
        live = table.lookup(model, provider)
        if live is not None and is_batch_endpoint(endpoint):
            # a batch-lane attempt of the primary: its batch rate (the live one, an upper bound,
            # when the provider publishes none: what the batch lane bills it at then)
            return live.batch_price() or live
        return live

    details = run_cost_details(journal.attempts_since(0), price_for)
    details["currency"] = {**currency.to_dict(), "amount": _round(currency.amount(cost_usd))}
    per_min = cost_per_minute(cost_usd, makespan_s)
    return {
        "cost_per_min_usd": _round(per_min),
        "cost_projected_usd": _round(projected_total(cost_usd, finished, unfinished)),
        "cost_display": currency.format(cost_usd) if cost_usd is not None else f"price unknown for model {model!r}",
        "cost_breakdown": details,
    }


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)
