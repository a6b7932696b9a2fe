"""What a shadow run measures: per endpoint, its requests, latencies, errors, tokens and cost; per
mirrored pair that both answered, how far the two answers agree.

Kept apart from the run (``run``) so that what is counted, and how it is summarised into the
report's records, reads in one place: latencies stay sorted as they arrive (a snapshot a few
times a second reads percentiles without sorting), the secondary's cost is shadow cost.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from swarm_tui.core.usage import Usage
from swarm_tui.engine.stats import latency_summary
from swarm_tui.pricing import Price, answer_cost
from swarm_tui.pricing.currency import DisplayCurrency
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.shadow.report import safe_url
from swarm_tui.shadow.verdict import EndpointReport
from swarm_tui.util.json_repair import json_answer

__all__ = ["EndpointStats", "Agreement"]


class EndpointStats:
    """One endpoint's measurements while the run goes on."""

    def __init__(
        self,
        label: str,
        profile: ProviderProfile,
        base_url: str,
        model: str | None,
        price: Price | None,
        currency: DisplayCurrency,
    ) -> None:
        self.label, self.profile, self.base_url, self.model = label, profile, base_url, model
        self.price, self.currency = price, currency
        self.sent = 0
        self.in_flight = 0
        self.latencies: list[float] = []
        self.ttfts: list[float] = []
        self.errors: Counter[str] = Counter()
        self.usage = Usage()
        self.cost = 0.0
        self.unpriced = 0

    def succeeded(self, latency_ms: float, ttft_ms: float | None, usage: Usage, tier: str | None = None) -> None:
        """An answer, billed at the tier that served it (`tier`: None for the default)."""
        bisect.insort(self.latencies, latency_ms)
        if ttft_ms is not None:
            bisect.insort(self.ttfts, ttft_ms)
        self.usage = self.usage + usage
        cost = answer_cost(self.price, usage, tier)
        if cost is not None:
            self.cost += cost
        elif usage.total:
            self.unpriced += 1

    def report(self, streaming: bool) -> EndpointReport:
        finished = len(self.latencies) + sum(self.errors.values())
        cost = self.cost if self.price is not None and not self.unpriced else None
        return EndpointReport(
            label=self.label,
            name=self.profile.name,
            base_url=safe_url(self.base_url),
            model=self.model,
            simulated=self.profile.is_simulator,
            requests=self.sent,
            in_flight=self.in_flight,
            succeeded=len(self.latencies),
            errors=dict(self.errors),
            error_rate=round(sum(self.errors.values()) / finished, 4) if finished else None,
            latency_ms=latency_summary(self.latencies),
            ttft_ms=latency_summary(self.ttfts) if streaming else None,
            tokens={"prompt": self.usage.prompt, "completion": self.usage.completion, "cached": self.usage.cached},
            cost_usd=round(cost, 6) if cost is not None else None,
            cost_display=self.currency.format(cost)
            if cost is not None
            else (f"price unknown for model {self.model!r}" if self.model else "price unknown"),
            price=self.price.to_dict() if self.price else None,
        )


@dataclass
class Agreement:
    compared: int = 0
    exact: int = 0
    json_comparable: int = 0
    json_equal: int = 0
    length_ratios: list[float] = field(default_factory=list)

    def add(self, primary: str, secondary: str) -> None:
        self.compared += 1
        self.exact += primary.strip() == secondary.strip()
        try:
            a, b = json_answer(primary), json_answer(secondary)
        except ValueError:
            pass
        else:
            self.json_comparable += 1
            self.json_equal += a == b
        if primary:
            bisect.insort(self.length_ratios, len(secondary) / len(primary))

    def to_dict(self) -> dict[str, Any]:
        ratios = self.length_ratios
        return {
            "compared": self.compared,
            "exact": self.exact,
            "exact_share": round(self.exact / self.compared, 4) if self.compared else None,
            "json_comparable": self.json_comparable,
            "json_equal": self.json_equal,
            "json_equal_share": round(self.json_equal / self.json_comparable, 4) if self.json_comparable else None,
            "length_ratio": {
                "median": round(ratios[len(ratios) // 2], 3) if ratios else None,
                "mean": round(sum(ratios) / len(ratios), 3) if ratios else None,
                "min": round(ratios[0], 3) if ratios else None,
                "max": round(ratios[-1], 3) if ratios else None,
            },
        }
