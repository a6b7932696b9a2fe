"""A workload and what it costs a month on every price-table row of the chosen models: the
scenario, its rows (one per model and provider, with the costs of each other way the provider
bills: Flex, Priority, the batch lane) and the estimate (`build_estimate`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from swarm_tui.core.errors import InputError
from swarm_tui.core.lanes import BATCH, LIVE
from swarm_tui.core.tiers import BATCH_TIER, DEFAULT, FLEX, PRIORITY
from swarm_tui.core.usage import Usage
from swarm_tui.pricing import Price, PriceTable
from swarm_tui.pricing.currency import USD, DisplayCurrency

SOURCE = "estimate"


@dataclass(frozen=True)
class Scenario:
    agents: int = 100
    tasks_per_day: float = 50
    input_tokens: float = 0
    """Prompt tokens per task (cached ones included). 0 by default, as in the article's scenario."""
    output_tokens: float = 2048
    cached_share: float = 0.0
    """Share of the input served from the provider's prefix cache (billed at the cached rate)."""
    days: float = 30
    measured_from: str | None = None
    """The run directory the per-task tokens were measured in, if any."""

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise InputError.single(SOURCE, problems[0][0], problems[0][1])

    def problems(self) -> list[tuple[str, str]]:
        out = []

        def number(value: Any) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

        if not number(self.agents) or self.agents < 1 or int(self.agents) != self.agents:
            out.append(("--agents", f"must be a whole number >= 1, not {self.agents!r}"))
        for name, value in (("--tasks-per-day", self.tasks_per_day), ("--days", self.days)):
            if not number(value) or value <= 0:
                out.append((name, f"must be a number > 0, not {value!r}"))
        for name, value in (("--input-tokens", self.input_tokens), ("--output-tokens", self.output_tokens)):
            if not number(value) or value < 0:
                out.append((name, f"must be a number of tokens >= 0, not {value!r}"))
        if not number(self.cached_share) or not 0 <= self.cached_share <= 1:
            out.append(("--cached-share", f"must be between 0 and 1 (e.g. 0.6 for 60%), not {self.cached_share!r}"))
        return out

    @property
    def tasks(self) -> float:
        return self.agents * self.tasks_per_day * self.days

    def usage(self) -> Usage:
        """The whole period's tokens (rounded to whole tokens)."""
        prompt = round(self.tasks * self.input_tokens)
        return Usage(
            prompt=prompt, completion=round(self.tasks * self.output_tokens), cached=round(prompt * self.cached_share)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "agents": self.agents,
            "tasks_per_day": self.tasks_per_day,
            "days": self.days,
            "input_tokens_per_task": self.input_tokens,
            "output_tokens_per_task": self.output_tokens,
            "cached_share": self.cached_share,
            "tasks": self.tasks,
            "measured_from": self.measured_from,
        }


@dataclass(frozen=True)
class EstimateRow:
    model: str
    provider: str
    price: Price
    cost_usd: float
    currency: DisplayCurrency
    """The display currency at this provider's rate (its billing rate when it has one)."""
    saving_usd: float = 0.0
    """Against the most expensive provider of the same model."""
    saving_share: float = 0.0
    priciest: bool = False
    batch_cost_usd: float | None = None
    """The same tokens at the provider's batch rate (`Price.batch_price`); None: none published."""
    flex_cost_usd: float | None = None
    """The same tokens live at the provider's Flex tier; None: no flex rate known."""
    priority_cost_usd: float | None = None
    """The same tokens live at the provider's Priority tier; None: no priority rate known."""

    def ways(self) -> list[tuple[str, str, Price, float]]:
        """(lane, tier, price, cost) of each way the provider bills these tokens, default first."""
        out = [(LIVE, DEFAULT, self.price, self.cost_usd)]
        for lane, tier, cost in ((LIVE, FLEX, self.flex_cost_usd), (LIVE, PRIORITY, self.priority_cost_usd),
                                 (BATCH, BATCH_TIER, self.batch_cost_usd)):  # fmt: skip
            price = self.price.for_tier(tier)
            if cost is not None and price is not None:
                out.append((lane, tier, price, cost))
        return out

    @property
    def display_amount(self) -> float | None:
        return self.currency.amount(self.cost_usd) if self.currency.shows_local else None

    @property
    def batch_saving_usd(self) -> float | None:
        """What the batch lane saves against the live price (None: no batch rate)."""
        return None if self.batch_cost_usd is None else self.cost_usd - self.batch_cost_usd

    @property
    def batch_saving_share(self) -> float | None:
        saving = self.batch_saving_usd
        if saving is None:
            return None
        return saving / self.cost_usd if self.cost_usd > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "provider": self.provider,
            "price": self.price.to_dict(),
            "cost_usd": round(self.cost_usd, 2),
            "cost_display": self.currency.format(self.cost_usd),
            "display": {**self.currency.to_dict(), "amount": _r2(self.display_amount)},
            "saving_usd": round(self.saving_usd, 2),
            "saving_share": round(self.saving_share, 4),
            "priciest_of_model": self.priciest,
            "batch_cost_usd": _r2(self.batch_cost_usd),
            "batch_saving_usd": _r2(self.batch_saving_usd),
            "batch_saving_share": None if self.batch_saving_share is None else round(self.batch_saving_share, 4),
            "tier_costs_usd": {tier: round(cost, 2) for _, tier, _, cost in self.ways()},
        }


@dataclass(frozen=True)
class Estimate:
    scenario: Scenario
    usage: Usage
    rows: list[EstimateRow]
    currency: DisplayCurrency
    prices_updated: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def cheapest(self) -> EstimateRow:
        return min(self.rows, key=lambda r: r.cost_usd)

    @property
    def priciest(self) -> EstimateRow:
        return max(self.rows, key=lambda r: r.cost_usd)

    def to_dict(self) -> dict[str, Any]:
        cheapest, priciest = self.cheapest, self.priciest
        return {
            "scenario": self.scenario.to_dict(),
            "tokens": {"input": self.usage.prompt, "cached": self.usage.cached, "output": self.usage.completion},
            "currency": self.currency.to_dict(),
            "rows": [r.to_dict() for r in self.rows],
            "cheapest": {
                "model": cheapest.model,
                "provider": cheapest.provider,
                "cost_usd": round(cheapest.cost_usd, 2),
                "saving_vs_priciest_usd": round(priciest.cost_usd - cheapest.cost_usd, 2),
            },
            "priciest": {
                "model": priciest.model,
                "provider": priciest.provider,
                "cost_usd": round(priciest.cost_usd, 2),
            },
            "prices_updated": self.prices_updated,
            "notes": self.notes,
        }


def build_estimate(
    scenario: Scenario,
    *,
    models: list[str] | None = None,
    providers: list[str] | None = None,
    table: PriceTable | None = None,
    currency: DisplayCurrency = USD,
) -> Estimate:
    """Price `scenario` on every provider row of `models` (all models when None or empty)."""
    table = table or PriceTable.builtin()
    known = table.models()
    if models:
        chosen: list[str] = []
        for name in models:
            canon = table.canonical(name)
            if canon is None:
                raise InputError.single(
                    SOURCE,
                    "--model",
                    f"no price for {name!r}; known models: {', '.join(known)} "
                    f'(add your own under [prices."provider/{name}"] in the config)',
                )
            if canon not in chosen:
                chosen.append(canon)
    else:
        chosen = known
    wanted = None
    if providers:
        known_providers = table.providers()
        wanted = set()
        for p in providers:
            key = "official" if p.strip() in ("*", "") else p.strip().lower()
            if key not in known_providers:
                raise InputError.single(
                    SOURCE, "--provider", f"no prices for provider {p!r}; known: {', '.join(known_providers)}"
                )
            wanted.add(key)
    usage = scenario.usage()
    size = scenario.input_tokens  # one task's prompt: what a long-context rule is judged on

    def cost_at(price: Price, tier: str) -> float | None:
        tiered = price.for_tier(tier)
        return tiered.cost(usage, size) if tiered is not None else None

    rows: list[EstimateRow] = []
    for model in chosen:
        offers = [o for o in table.offers(model) if wanted is None or o.provider in wanted]
        if not offers:
            continue
        priced = sorted(((o, o.price.cost(usage, size)) for o in offers), key=lambda pair: (pair[1], pair[0].provider))
        top = max(cost for _, cost in priced)
        for offer, cost in priced:
            rows.append(
                EstimateRow(
                    model=model,
                    provider=offer.provider,
                    price=offer.price,
                    cost_usd=cost,
                    currency=currency.for_provider(table, offer.provider),
                    saving_usd=top - cost,
                    saving_share=(top - cost) / top if top > 0 else 0.0,
                    priciest=len(priced) > 1 and cost == top,
                    batch_cost_usd=cost_at(offer.price, BATCH_TIER),
                    flex_cost_usd=cost_at(offer.price, FLEX),
                    priority_cost_usd=cost_at(offer.price, PRIORITY),
                )
            )
    if not rows:
        raise InputError.single(SOURCE, "--provider", "no price-table row matches the chosen models and providers")
    notes = []
    if scenario.input_tokens == 0:
        notes.append("input tokens: 0 per task (output only, as in the article's scenario); add --input-tokens N")
    if scenario.measured_from:
        notes.append(f"per-task tokens measured in {scenario.measured_from} (billed tokens per finished task)")
    return Estimate(scenario, usage, rows, currency, table.updated, notes)


def _r2(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
