"""The price table: the built-in rows (`prices.toml`, dated and sourced) with the user's on top.

The built-in table holds the models' official list prices and the source article's relay
prices; users override or add rows in their config (`[prices."provider/model"]`, read by
`rows.read_row`: an old-style row of input, cached input, output and batch rates still loads).
Lookups are by provider (a profile name) and model; a provider the table does not name pays the
official price.

Provider-wide rules give every row a provider is billed at (the official rows it falls back to
included) what it does not say itself: `[batch.<provider>] share` its batch rates at that share
of the live price, `[tiers.<provider>]` its service tiers (`flex = "batch"`: Flex at the batch
rates; `priority_share`: Priority at that multiple of the live price). The simulator's rules let
the batch lane and the tiers be shown offline. `[max_output]` is each model's longest answer,
wherever it is served.
"""

from __future__ import annotations

import copy
import functools
import re
import tomllib
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from swarm_tui.core.errors import InputError
from swarm_tui.pricing.price import AT_BATCH_RATES, Price, TierRates
from swarm_tui.pricing.rows import is_number, read_row

OFFICIAL = "official"
"""The provider name of the model makers' list prices (also written `*`)."""
_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")


@dataclass(frozen=True, slots=True)
class Offer:
    """One row of the table: a model at a provider."""

    provider: str
    model: str
    price: Price


@dataclass(frozen=True, slots=True)
class TierRule:
    """A provider's service tiers for every row it bills (`[tiers.<provider>]`)."""

    flex_at_batch: bool = False
    priority_share: float | None = None
    source: str = ""

    def apply(self, price: Price) -> Price:
        """`price` with the tiers it does not name itself."""
        flex, priority = price.flex, price.priority
        if flex is None and self.flex_at_batch:
            flex = AT_BATCH_RATES
        if priority is None and self.priority_share is not None:
            share = self.priority_share
            priority = TierRates(
                price.input * share, price.output * share, price.cached_input * share, source=self.source
            )
        return (
            price if (flex, priority) == (price.flex, price.priority) else replace(price, flex=flex, priority=priority)
        )


class PriceTable:
    def __init__(
        self,
        entries: dict[str, Price],
        *,
        aliases: dict[str, str] | None = None,
        billing: dict[str, dict[str, float]] | None = None,
        updated: str = "",
    ) -> None:
        self._entries: dict[tuple[str, str], Price] = {}
        for key, price in entries.items():
            provider, model = _split_key(key)
            self._entries[(provider, model)] = price
        self._aliases = {k.lower(): v.lower() for k, v in (aliases or {}).items()}
        self._billing = {
            _provider_key(p): {c.upper(): float(r) for c, r in rates.items()} for p, rates in (billing or {}).items()
        }
        self._batch_rules: dict[str, tuple[float, str]] = {}
        """provider: (share of the live price, source) of its batch rates (`[batch.<provider>]`)."""
        self._tier_rules: dict[str, TierRule] = {}
        """provider: its service tiers (`[tiers.<provider>]`)."""
        self._max_output: dict[str, int] = {}
        """model: the most tokens it writes in one answer (`[max_output]`), wherever it is served."""
        self.updated = updated

    @classmethod
    def builtin(
        cls,
        overrides: dict[str, Any] | None = None,
        *,
        billing: dict[str, Any] | None = None,
        source: str | Path = "config [prices]",
    ) -> PriceTable:
        """The built-in table with the user's `[prices."provider/model"]` rows applied on top.

        An override may give only some fields of a row the table has (e.g. just `output`);
        a new row needs `input` and `output` (`cached_input` defaults to `input`).
        Bad rows raise `InputError` naming `source` and the field.
        """
        doc = _builtin_doc()
        table = cls({}, aliases=doc.get("aliases"), updated=str(doc.get("meta", {}).get("updated", "")))
        for key, row in doc.items():
            if "/" in key:
                table._entries[_split_key(key)] = read_row(row, key, "prices.toml")
        for provider, rates in (doc.get("billing") or {}).items():
            table._billing[_provider_key(provider)] = {c.upper(): float(v) for c, v in rates.items() if c != "source"}
        for provider, rule in (doc.get("batch") or {}).items():
            table._batch_rules[_provider_key(provider)] = (float(rule["share"]), str(rule.get("source", "")))
        for provider, rule in (doc.get("tiers") or {}).items():
            table._tier_rules[_provider_key(provider)] = TierRule(
                rule.get("flex") == AT_BATCH_RATES, rule.get("priority_share"), str(rule.get("source", ""))
            )
        for model, tokens in (doc.get("max_output") or {}).items():
            if isinstance(tokens, int):
                table._max_output[model.lower()] = tokens
        for key, row in (overrides or {}).items():
            table._apply_override(str(key), row, str(source))
        for provider, rates in (billing or {}).items():
            if not isinstance(rates, dict):
                raise InputError.single(source, f"billing.{provider}", "must be a table of CURRENCY = rate")
            for code, rate in rates.items():
                if code == "source":
                    continue
                if not is_number(rate) or rate <= 0:
                    raise InputError.single(
                        source, f"billing.{provider}.{code}", f"must be a positive number, not {rate!r}"
                    )
                table._billing.setdefault(_provider_key(provider), {})[str(code).upper()] = float(rate)
        return table

    def _apply_override(self, key: str, row: Any, source: str) -> None:
        provider, model = _split_key(key)
        model = self.canonical(model) or model
        where = f'prices."{key}"'
        existing = self._entries.get((provider, model))
        self._entries[(provider, model)] = read_row(row, where, source, existing, own_source=f"your config ({source})")

    # ----------------------------------------------------------------- queries

    def canonical(self, model: str | None) -> str | None:
        """The table's name for `model` (alias, date suffix and vendor prefix resolved), or None."""
        if not model:
            return None
        known = {m for _, m in self._entries}
        for name in _name_variants(model.lower()):
            name = self._aliases.get(name, name)
            if name in known:
                return name
        return None

    def lookup(self, model: str | None, provider: str = "*") -> Price | None:
        """The price of `model` at `provider` (a profile name); the official one when the
        provider has no row of its own; None when the model is in no row (price unknown)."""
        model = self.canonical(model)
        if model is None:
            return None
        provider = _provider_key(provider.split("/")[0]) if provider else OFFICIAL
        own = self._entries.get((provider, model))
        if own is not None:
            return self._with_max_output(model, self._with_rules(provider, own))
        official = self._entries.get((OFFICIAL, model))
        if official is None:
            return None
        rule = self._batch_rules.get(provider)  # a provider's own Batch API, not the official one
        price = official.with_batch_share(*rule) if rule else official
        tiers = self._tier_rules.get(provider)
        return self._with_max_output(model, tiers.apply(price) if tiers else price)

    def _with_max_output(self, model: str, price: Price) -> Price:
        """A row's own `max_output`, else the model's (it is the model's, wherever it is served)."""
        if price.max_output is not None or model not in self._max_output:
            return price
        return replace(price, max_output=self._max_output[model])

    def _with_rules(self, provider: str, price: Price) -> Price:
        """`price` (a row of `provider`'s) with its provider's batch and tier rules, where it has no
        rate of its own."""
        rule = self._batch_rules.get(provider)
        if rule and not price.has_batch:
            price = price.with_batch_share(*rule)
        tiers = self._tier_rules.get(provider)
        return tiers.apply(price) if tiers else price

    def batch_rule(self, provider: str) -> tuple[float, str] | None:
        """`provider`'s flat batch discount, (share of the live price, source), when it has one."""
        return self._batch_rules.get(_provider_key(provider.split("/")[0]))

    def offers(self, model: str) -> list[Offer]:
        """Every provider with a row for `model`, cheapest output first."""
        canon = self.canonical(model)
        rows = [Offer(p, m, self._with_rules(p, price)) for (p, m), price in self._entries.items() if m == canon]
        return sorted(rows, key=lambda o: (o.price.output, o.price.input, o.provider))

    def models(self) -> list[str]:
        return sorted({m for _, m in self._entries})

    def providers(self) -> list[str]:
        return sorted({p for p, _ in self._entries})

    def entries(self) -> list[Offer]:
        return [Offer(p, m, self._with_rules(p, price)) for (p, m), price in sorted(self._entries.items())]

    def billing_rate(self, provider: str | None, currency: str) -> float | None:
        """What `provider` charges in `currency` per $1 of list price, when it says (¥1 = $1)."""
        if not provider:
            return None
        return self._billing.get(_provider_key(provider.split("/")[0]), {}).get(currency.upper())


@functools.cache
def _builtin_text() -> str:
    return resources.files("swarm_tui").joinpath("prices.toml").read_text(encoding="utf-8")


def _builtin_doc() -> dict[str, Any]:
    return copy.deepcopy(_parsed_builtin())


@functools.cache
def _parsed_builtin() -> dict[str, Any]:
    return tomllib.loads(_builtin_text())


def _split_key(key: str) -> tuple[str, str]:
    """`"provider/model"` (a bare model is the official price) → (provider, model), lower case."""
    key = key.strip().lower()
    if "/" not in key:
        return OFFICIAL, key
    provider, model = key.split("/", 1)
    return _provider_key(provider), model


def _provider_key(provider: str) -> str:
    provider = provider.strip().lower()
    return OFFICIAL if provider in ("", "*") else provider


def _name_variants(model: str) -> list[str]:
    """`openai/gpt-4.1-2025-04-14` → itself, without the vendor, without the date, without both."""
    names = [model]
    if "/" in model:
        names.append(model.rsplit("/", 1)[1])
    for name in list(names):
        stripped = _DATE_SUFFIX.sub("", name)
        if stripped != name:
            names.append(stripped)
    return list(dict.fromkeys(names))
