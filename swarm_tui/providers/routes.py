"""Routes as the user names them and the journal keeps them: several profiles behind one run.

`--provider a,b,c --route balance`, or a config table

    [routes.pool]
    providers = ["key1", "key2", "key3"]
    strategy = "balance"        # fallback (default) | balance | cheapest | fastest
    max_price = 8.0             # USD per 1M output tokens: an endpoint above it is never used

used as `--provider pool`. The first profile is the run's own (its currency, its key check, the
model the cost footer names); the others follow it. Each keeps its own model name, key, limits
and price. The engine's side is `engine.routing` (each door paced on its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from swarm_tui.core.errors import InputError
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile

if TYPE_CHECKING:
    from pathlib import Path

    from swarm_tui.records import RunPlan


class Strategy(StrEnum):
    """How a route spreads calls over its endpoints (`engine.routing`)."""

    FALLBACK = "fallback"
    BALANCE = "balance"
    CHEAPEST = "cheapest"
    FASTEST = "fastest"


STRATEGIES = tuple(s.value for s in Strategy)


@dataclass(frozen=True)
class RoutePlan:
    """The endpoints after the run's first one, and how calls are spread (stored in the journal)."""

    others: tuple[ProviderProfile, ...]
    strategy: str = Strategy.FALLBACK.value
    max_price: float | None = None

    def to_meta(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "max_price": self.max_price,
            "others": [{"name": p.name, **p.to_toml()} for p in self.others],
        }

    @classmethod
    def from_meta(cls, data: dict[str, Any] | None) -> RoutePlan | None:
        if not data:
            return None
        others = tuple(ProviderProfile(name=o.pop("name"), **o) for o in (dict(item) for item in data["others"]))
        return cls(others, data.get("strategy") or Strategy.FALLBACK.value, data.get("max_price"))


def route_table(path: Path | str, name: str, table: Any, known: dict[str, ProviderProfile]) -> dict[str, Any]:
    """A `[routes.NAME]` table checked: its providers exist, its strategy is one of the four."""
    where = f"routes.{name}"
    if not isinstance(table, dict):
        raise InputError.single(path, where, 'must be a table: providers = [...], strategy = "..."')
    unknown = set(table) - {"providers", "strategy", "max_price"}
    if unknown:
        raise InputError.single(
            path, f"{where}.{sorted(unknown)[0]}", "unknown setting (known: max_price, providers, strategy)"
        )
    providers = table.get("providers")
    if not isinstance(providers, list) or len(providers) < 2 or not all(isinstance(p, str) for p in providers):
        raise InputError.single(path, f"{where}.providers", "must list two or more profile names")
    for provider in providers:
        if provider not in known:
            raise InputError.single(
                path, f"{where}.providers", f"no profile named {provider!r} (known: {', '.join(sorted(known))})"
            )
    strategy = table.get("strategy", Strategy.FALLBACK.value)
    if strategy not in STRATEGIES:
        raise InputError.single(path, f"{where}.strategy", f"must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    max_price = table.get("max_price")
    if max_price is not None and (
        isinstance(max_price, bool) or not isinstance(max_price, int | float) or max_price <= 0
    ):
        raise InputError.single(path, f"{where}.max_price", "must be a positive number (USD per 1M output tokens)")
    return {"providers": providers, "strategy": strategy, "max_price": max_price}


def provider_names(provider: str, routes: dict[str, dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """The profile names `--provider` asks for (`a,b,c`, or a route's name) and the route's table
    ({} for a plain list or a single profile)."""
    if provider in routes:
        route = routes[provider]
        return list(route["providers"]), route
    names = [name.strip() for name in provider.split(",")]
    if any(not name for name in names):
        raise InputError.single("--provider", "provider", f"an empty name in {provider!r}: name profiles as a,b,c")
    return names, {}


def open_clients(plan: RunPlan, base_url: str) -> tuple[ProviderClient, ProviderClient | None, list[ProviderClient]]:
    """The run's clients: its first endpoint's (at `base_url`: the embedded simulator's when it is
    the simulator), its fallback's, and the route's others, each bound by the plan's limits."""
    limits = plan.client_limits()
    client = ProviderClient(plan.profile, base_url, **limits)
    fallback_profile = plan.profile.fallback()
    fallback = ProviderClient(fallback_profile, fallback_profile.base_url, **limits) if fallback_profile else None
    others = [ProviderClient(p, p.base_url, **limits) for p in (plan.route.others if plan.route else ())]
    return client, fallback, others
