"""Where a run's money went: its billed attempts priced, split by token kind, endpoint, lane,
service tier and outcome, and the cost fields of `summary.json`.

Apart from `pricing` (what a token costs) because this reads a run: the journal's attempts and
the prices its plan recorded when it opened, so a summary written later (a resumed run, `swarm-tui
export`) bills at the prices the run was sent at, not at today's table.

The attempts are read from the journal's event log, which keeps each attempt whole (its cache
writes and the tier that served it, besides the tokens the `attempts` table has); a journal
without a log (schema 1, read as it is) gives its `attempts` rows, every one at the default tier.
Every split adds up to the billed total: the token kinds (`input_usd` + `cached_input_usd` +
`cache_write_usd` + `output_usd`, reasoning shown apart as part of the output), the lanes
(`by_lane`) and the tiers (`by_tier`); `at_default_tier_usd` is what the same tokens would have
cost live at the default tier, so what Flex and the batch lane saved can be read off.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from swarm_tui.core.errors import InputError
from swarm_tui.core.events import (
    AgentStepped,
    AttemptEnded,
    PhaseAttempt,
    TaskCancelled,
    TaskFailed,
    TaskRetrying,
    TaskSucceeded,
)
from swarm_tui.core.lanes import BATCH, BATCH_SUFFIX, LIVE, is_batch_endpoint, lane_of
from swarm_tui.core.tiers import BATCH_TIER, BILLED_TIERS, DEFAULT, FLEX, PRIORITY, tier_of
from swarm_tui.core.usage import Usage
from swarm_tui.pricing import CostParts, Price, PriceTable, cost_per_minute, projected_total
from swarm_tui.records import CostBreakdown, RunPlan, SpendFigures, Summary

if TYPE_CHECKING:
    from swarm_tui.journal import Journal
    from swarm_tui.pricing.currency import DisplayCurrency

__all__ = ["billed_attempts", "run_cost_details", "summary_cost_fields", "tier_text"]

ATTEMPT_EVENTS = (TaskSucceeded, TaskFailed, TaskRetrying, AttemptEnded, PhaseAttempt, TaskCancelled, AgentStepped)
"""The logged events that carry an attempt: each writes one row of the `attempts` table."""


def billed_attempts(journal: Journal) -> Iterator[dict[str, Any]]:
    """The run's attempts as rows (the `attempts` table's keys, with `cache_write_tokens`,
    `cache_write_1h_tokens` and `service_tier`): from the event log when the journal has one."""
    if not journal.history.has_log():
        yield from journal.queries.attempts_since(0)
        return
    for _, event in journal.history.logged(*ATTEMPT_EVENTS):
        attempt = event.attempt if isinstance(event, ATTEMPT_EVENTS) else None
        if attempt is None:  # a task cancelled before its call went out
            continue
        usage = attempt.usage
        yield {
            "endpoint": attempt.endpoint,
            "outcome": attempt.outcome,
            "prompt_tokens": usage.prompt,
            "completion_tokens": usage.completion,
            "cached_tokens": usage.cached,
            "reasoning_tokens": usage.reasoning,
            "cache_write_tokens": usage.cache_write,
            "cache_write_1h_tokens": usage.cache_write_1h,
            "cost_usd": attempt.cost_usd,
            "service_tier": attempt.service_tier,
        }


def run_cost_details(attempts: Iterable[dict[str, Any]], price_for: Callable[[str], Price | None]) -> dict[str, Any]:
    """Break a run's billed attempts (journal rows, `billed_attempts`) down by token kind,
    endpoint, lane, tier and outcome.

    `price_for(endpoint)` gives each endpoint's price (a batch endpoint's: its batch rate).
    Attempts are billed whatever their outcome; `overhead_usd` is what attempts that did not
    deliver their task's result cost (retried, failed, hedges lost, cancelled); `by_lane` splits
    the billed USD into `live` and `batch` (attempts whose endpoint ends with `/batch`), `by_tier`
    into the service tiers, the batch lane's as `batch`.
    """
    parts = CostParts()
    by_endpoint: dict[str, dict[str, Any]] = {}
    by_lane = dict.fromkeys((LIVE, BATCH), 0.0)
    by_tier = dict.fromkeys(BILLED_TIERS, 0.0)
    overhead = at_default = 0.0
    unpriced = 0
    for row in attempts:
        endpoint = row.get("endpoint") or "?"
        usage = _usage(row)
        slot = by_endpoint.setdefault(
            endpoint, {"attempts": 0, "cost_usd": 0.0, "prompt": 0, "cached": 0, "cache_write": 0, "completion": 0}
        )
        slot["attempts"] += 1
        slot["prompt"] += usage.prompt
        slot["cached"] += usage.cached
        slot["cache_write"] += usage.written
        slot["completion"] += usage.completion
        cost = row.get("cost_usd")
        if cost is None:
            if usage.total:
                unpriced += 1
            continue
        tier = tier_of(endpoint, row.get("service_tier"))
        slot["cost_usd"] += cost
        lane = lane_of(endpoint)  # `cache`: a replay, cost 0
        by_lane[lane] = by_lane.get(lane, 0.0) + cost
        by_tier[tier if tier in by_tier else DEFAULT] += cost
        if row.get("outcome") != "ok":
            overhead += cost
        price = price_for(endpoint)
        if price is not None:
            billed = price if tier in (DEFAULT, BATCH_TIER) else price.billed_at(tier)
            parts = parts + (billed or price).breakdown(usage)
        live = price_for(endpoint.removesuffix(BATCH_SUFFIX)) if tier == BATCH_TIER else price
        at_default += live.cost(usage) if live is not None else cost
    for endpoint, slot in by_endpoint.items():
        slot["cost_usd"] = round(slot["cost_usd"], 6)
        price = price_for(endpoint)
        slot["price"] = price.to_dict() if price else None
    return {
        "input_usd": round(parts.input_usd, 6),
        "cached_input_usd": round(parts.cached_input_usd, 6),
        "cache_write_usd": round(parts.cache_write_usd, 6),
        "output_usd": round(parts.output_usd, 6),
        "reasoning_usd": round(parts.reasoning_usd, 6),
        "cached_savings_usd": round(parts.cached_savings_usd, 6),
        "overhead_usd": round(overhead, 6),
        "unpriced_attempts": unpriced,
        "by_endpoint": by_endpoint,
        "by_lane": {lane: round(usd, 6) for lane, usd in by_lane.items()},
        "by_tier": {tier: round(usd, 6) for tier, usd in by_tier.items()},
        "at_default_tier_usd": round(at_default, 6),
    }


def _usage(row: dict[str, Any]) -> Usage:
    return Usage(
        prompt=row.get("prompt_tokens") or 0,
        completion=row.get("completion_tokens") or 0,
        cached=row.get("cached_tokens") or 0,
        reasoning=row.get("reasoning_tokens") or 0,
        cache_write=row.get("cache_write_tokens") or 0,
        cache_write_1h=row.get("cache_write_1h_tokens") or 0,
    )


def summary_cost_fields(
    journal: Journal,
    plan: RunPlan,
    *,
    cost_usd: float | None,
    makespan_s: float | None,
    finished: int,
    unfinished: int,
    currency: DisplayCurrency,
) -> SpendFigures:
    """The cost fields of `summary.json`, from a journal (read-only use) and the run's plan (its
    model, endpoint, tier, and the prices it recorded when it opened): spend rate, projected total,
    the cost in `currency` (chosen when the run opened), and where the money went (`run_cost_details`)."""
    model, profile = plan.model, plan.profile
    try:
        table = PriceTable.builtin(plan.prices)
    except InputError:
        table = PriceTable.builtin()

    @functools.cache
    def price_for(endpoint: str) -> Price | None:
        provider = endpoint.split("/")[0]
        if endpoint.endswith("/fallback"):
            return table.lookup(profile.fallback_model or model, provider)
        live = table.lookup(model, provider)
        if live is not None and is_batch_endpoint(endpoint):
            # a batch-lane attempt of the primary: its batch rate (the live one, an upper bound,
            # when the provider publishes none: what the batch lane bills it at then)
            return live.batch_price() or live
        return live

    details = run_cost_details(billed_attempts(journal), price_for)
    details["service_tier"] = profile.service_tier or DEFAULT
    details["currency"] = {**currency.to_dict(), "amount": _round(currency.amount(cost_usd))}
    return SpendFigures(
        cost_per_min_usd=_round(cost_per_minute(cost_usd, makespan_s)),
        cost_projected_usd=_round(projected_total(cost_usd, finished, unfinished)),
        cost_display=currency.format(cost_usd) if cost_usd is not None else f"price unknown for model {model!r}",
        cost_breakdown=CostBreakdown.from_json(details),
    )


def tier_text(summary: Summary) -> str | None:
    """One line of what a run billed at a service tier other than the default, against what the
    same tokens cost at the default tier; None when no call was (or the cost is unknown)."""
    details = summary.spend.cost_breakdown if summary.spend is not None else None
    by_tier = {tier: usd for tier, usd in details.by_tier.items() if usd} if details is not None else {}
    total, at_default = summary.cost_usd, details.at_default_tier_usd if details is not None else None
    if total is None or not at_default or not set(by_tier) & {FLEX, PRIORITY}:
        return None
    parts = ", ".join(f"{tier} ${usd:.4f}" for tier, usd in by_tier.items())
    change = (at_default - total) / at_default
    side = f"{change:.0%} less" if change >= 0 else f"{-change:.0%} more"
    return f"service tier: {parts}; ${total:.4f} billed, ${at_default:.4f} at the default tier ({side})"


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)
