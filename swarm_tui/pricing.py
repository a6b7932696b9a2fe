"""Prices and the cost of what was billed.

Cost is computed per attempt from normalised usage, so failed-but-billed and hedged attempts
count: cached prompt tokens at the cached rate, the rest of the prompt at the input rate, and
completion tokens at the output rate. Reasoning tokens are output: OpenAI (and the providers
copying its usage object) already count them inside `completion_tokens`, so they are not added
again, unless a provider reports more reasoning tokens than completion tokens, which shows it
counts them apart. A model without a known price costs `None` ("price unknown"), never $0.

The built-in table (`prices.toml`, dated and sourced) holds the models' official list prices
and the source article's relay prices; users override or add rows in their config
(`[prices."provider/model"]`). Lookups are by provider (a profile name) and model; a provider
the table does not name pays the official price.

Batch rates: a row may carry `batch_input`, `batch_cached_input` and `batch_output`, what the
provider charges for the same model through its Batch API (OpenAI, Anthropic, Gemini: half the
live price). A provider-wide rule (`[batch.<provider>] share = 0.5`) gives every row of that
provider a batch rate at that share of its live price, official rows it falls back to included
(the simulator's rule lets the batch lane be shown offline). `Price.batch_price()` is what a
batch-lane attempt (endpoint `<provider>/batch`) is billed at; None where no rate is published.

Where a run's money went (its attempts priced and split, the cost fields of summary.json) is
`run_cost`'s; this module knows what a token costs, not what a run spent.
"""

from __future__ import annotations

import copy
import functools
import math
import re
import tomllib
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from .core.usage import Usage
from .errors import InputError

PER_TOKENS = 1_000_000
OFFICIAL = "official"
"""The provider name of the model makers' list prices (also written `*`)."""

PRICE_FIELDS = ("input", "cached_input", "output")
BATCH_FIELDS = ("batch_input", "batch_cached_input", "batch_output")
ENTRY_FIELDS = frozenset({*PRICE_FIELDS, *BATCH_FIELDS, "source", "as_of", "max_output"})
_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")


@dataclass(frozen=True, slots=True)
class CostParts:
    """One usage priced, split by what the tokens were billed as (USD)."""

    input_usd: float = 0.0
    cached_input_usd: float = 0.0
    output_usd: float = 0.0
    cached_savings_usd: float = 0.0
    """What the cached tokens would have cost more at the full input rate."""

    @property
    def total_usd(self) -> float:
        return self.input_usd + self.cached_input_usd + self.output_usd

    def __add__(self, other: CostParts) -> CostParts:
        return CostParts(
            self.input_usd + other.input_usd,
            self.cached_input_usd + other.cached_input_usd,
            self.output_usd + other.output_usd,
            self.cached_savings_usd + other.cached_savings_usd,
        )


@dataclass(frozen=True, slots=True)
class Price:
    """USD per 1M tokens; the `batch_*` rates are the provider's Batch API price (None: none known)."""

    input: float
    cached_input: float
    output: float
    source: str = ""
    as_of: str = ""
    batch_input: float | None = None
    batch_cached_input: float | None = None
    """None with a batch rate: the live cached rate, capped at `batch_input` (a batch never bills
    a cached token above either), an upper bound where the provider does not say."""
    batch_output: float | None = None
    batch_source: str = ""
    """Where the batch rate comes from when not from this row's `source` (a provider-wide rule)."""
    max_output: int | None = None
    """The most tokens the model writes in one answer (None: not known): what a call without
    `max_tokens` must reserve against a budget (`engine.ledger`)."""

    @property
    def has_batch(self) -> bool:
        return self.batch_input is not None and self.batch_output is not None

    def batch_price(self) -> Price | None:
        """The price to bill a batch-lane attempt with; None when no batch rate is published."""
        if self.batch_input is None or self.batch_output is None:
            return None
        cached = self.batch_cached_input
        if cached is None:
            cached = min(self.cached_input, self.batch_input)
        return Price(
            input=self.batch_input,
            cached_input=cached,
            output=self.batch_output,
            source=self.batch_source or self.source,
            as_of=self.as_of,
            max_output=self.max_output,
        )

    def with_batch_share(self, share: float, source: str = "") -> Price:
        """This price with batch rates at `share` of its live rates (a provider's flat discount)."""
        return replace(
            self,
            batch_input=self.input * share,
            batch_cached_input=self.cached_input * share,
            batch_output=self.output * share,
            batch_source=source,
        )

    def cost(self, usage: Usage) -> float:
        uncached = max(0, usage.prompt - usage.cached)
        return (
            uncached * self.input + usage.cached * self.cached_input + billable_output(usage) * self.output
        ) / PER_TOKENS

    def breakdown(self, usage: Usage) -> CostParts:
        uncached = max(0, usage.prompt - usage.cached)
        return CostParts(
            input_usd=uncached * self.input / PER_TOKENS,
            cached_input_usd=usage.cached * self.cached_input / PER_TOKENS,
            output_usd=billable_output(usage) * self.output / PER_TOKENS,
            cached_savings_usd=usage.cached * (self.input - self.cached_input) / PER_TOKENS,
        )

    def to_dict(self) -> dict[str, Any]:
        batch = self.batch_price()
        return {
            "input": self.input,
            "cached_input": self.cached_input,
            "output": self.output,
            "unit": "USD per 1M tokens",
            "source": self.source,
            "as_of": self.as_of,
            "batch_input": batch.input if batch else None,
            "batch_cached_input": batch.cached_input if batch else None,
            "batch_output": batch.output if batch else None,
            "batch_source": batch.source if batch else None,
            "max_output": self.max_output,
        }


def billable_output(usage: Usage) -> int:
    """Output tokens to bill: completion tokens, which include reasoning (OpenAI's convention);
    reasoning is added only when it exceeds the completion count (a provider counting it apart)."""
    if usage.reasoning > usage.completion:
        return usage.completion + usage.reasoning
    return usage.completion


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True, slots=True)
class Offer:
    """One row of the table: a model at a provider."""

    provider: str
    model: str
    price: Price


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
                table._entries[_split_key(key)] = _price_from_row(row, key, "prices.toml")
        for provider, rates in (doc.get("billing") or {}).items():
            table._billing[_provider_key(provider)] = {c.upper(): float(v) for c, v in rates.items() if c != "source"}
        for provider, rule in (doc.get("batch") or {}).items():
            table._batch_rules[_provider_key(provider)] = (float(rule["share"]), str(rule.get("source", "")))
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
                if not _is_number(rate) or rate <= 0:
                    raise InputError.single(
                        source, f"billing.{provider}.{code}", f"must be a positive number, not {rate!r}"
                    )
                table._billing.setdefault(_provider_key(provider), {})[str(code).upper()] = float(rate)
        return table

    def _apply_override(self, key: str, row: Any, source: str) -> None:
        where = f'prices."{key}"'
        if not isinstance(row, dict):
            raise InputError.single(
                source, where, "must be a table with input, cached_input and output (USD per 1M tokens)"
            )
        unknown = set(row) - ENTRY_FIELDS
        if unknown:
            raise InputError.single(
                source, f"{where}.{sorted(unknown)[0]}", f"unknown field (known: {', '.join(sorted(ENTRY_FIELDS))})"
            )
        for name in (*PRICE_FIELDS, *BATCH_FIELDS):
            if name in row and (not _is_number(row[name]) or row[name] < 0):
                raise InputError.single(
                    source, f"{where}.{name}", f"must be a number >= 0 (USD per 1M tokens), not {row[name]!r}"
                )
        if "max_output" in row:
            try:
                _optional_int(row["max_output"])
            except ValueError as exc:
                raise InputError.single(source, f"{where}.max_output", str(exc)) from None
        provider, model = _split_key(key)
        model = self.canonical(model) or model
        existing = self._entries.get((provider, model))
        if existing is None:
            missing = [name for name in ("input", "output") if name not in row]
            if missing:
                raise InputError.single(
                    source, f"{where}.{missing[0]}", "missing (a new price needs input and output, USD per 1M tokens)"
                )
            existing = Price(float(row["input"]), float(row["input"]), float(row["output"]))
        batch = {name: _optional_float(row.get(name, getattr(existing, name))) for name in BATCH_FIELDS}
        if any(value is not None for value in batch.values()):
            for name in ("batch_input", "batch_output"):
                if batch[name] is None:
                    raise InputError.single(
                        source,
                        f"{where}.{name}",
                        "missing (a batch price needs batch_input and batch_output, USD per 1M tokens)",
                    )
        self._entries[(provider, model)] = Price(
            input=float(row.get("input", existing.input)),
            cached_input=float(row.get("cached_input", existing.cached_input)),
            output=float(row.get("output", existing.output)),
            source=str(row.get("source", f"your config ({source})")),
            as_of=str(row.get("as_of", "")),
            batch_input=batch["batch_input"],
            batch_cached_input=batch["batch_cached_input"],
            batch_output=batch["batch_output"],
            max_output=row.get("max_output", existing.max_output),
        )

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
            return self._with_max_output(model, self._with_batch_rule(provider, own))
        official = self._entries.get((OFFICIAL, model))
        if official is None:
            return None
        rule = self._batch_rules.get(provider)  # a provider's own Batch API, not the official one
        return self._with_max_output(model, official.with_batch_share(*rule) if rule else official)

    def _with_max_output(self, model: str, price: Price) -> Price:
        """A row's own `max_output`, else the model's (it is the model's, wherever it is served)."""
        if price.max_output is not None or model not in self._max_output:
            return price
        return replace(price, max_output=self._max_output[model])

    def _with_batch_rule(self, provider: str, price: Price) -> Price:
        """`price` (a row of `provider`'s) with its provider's batch rule, unless it has its own rate."""
        rule = self._batch_rules.get(provider)
        return price.with_batch_share(*rule) if rule and not price.has_batch else price

    def batch_rule(self, provider: str) -> tuple[float, str] | None:
        """`provider`'s flat batch discount, (share of the live price, source), when it has one."""
        return self._batch_rules.get(_provider_key(provider.split("/")[0]))

    def offers(self, model: str) -> list[Offer]:
        """Every provider with a row for `model`, cheapest output first."""
        canon = self.canonical(model)
        rows = [Offer(p, m, self._with_batch_rule(p, price)) for (p, m), price in self._entries.items() if m == canon]
        return sorted(rows, key=lambda o: (o.price.output, o.price.input, o.provider))

    def models(self) -> list[str]:
        return sorted({m for _, m in self._entries})

    def providers(self) -> list[str]:
        return sorted({p for p, _ in self._entries})

    def entries(self) -> list[Offer]:
        return [Offer(p, m, self._with_batch_rule(p, price)) for (p, m), price in sorted(self._entries.items())]

    def billing_rate(self, provider: str | None, currency: str) -> float | None:
        """What `provider` charges in `currency` per $1 of list price, when it says (¥1 = $1)."""
        if not provider:
            return None
        return self._billing.get(_provider_key(provider.split("/")[0]), {}).get(currency.upper())


@functools.cache
def _builtin_text() -> str:
    return resources.files(__package__).joinpath("prices.toml").read_text(encoding="utf-8")


def _builtin_doc() -> dict[str, Any]:
    return copy.deepcopy(_parsed_builtin())


@functools.cache
def _parsed_builtin() -> dict[str, Any]:
    return tomllib.loads(_builtin_text())


def _price_from_row(row: dict[str, Any], key: str, source: str) -> Price:
    try:
        batch = {name: _optional_float(row.get(name)) for name in BATCH_FIELDS}
        if any(v is not None for v in batch.values()) and None in (batch["batch_input"], batch["batch_output"]):
            raise KeyError("a batch price needs batch_input and batch_output")
        return Price(
            input=float(row["input"]),
            cached_input=float(row.get("cached_input", row["input"])),
            output=float(row["output"]),
            source=str(row.get("source", "")),
            as_of=str(row.get("as_of", "")),
            batch_input=batch["batch_input"],
            batch_cached_input=batch["batch_cached_input"],
            batch_output=batch["batch_output"],
            max_output=_optional_int(row.get("max_output")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError.single(source, key, f"bad price row: {exc}") from None


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_output must be a whole number of tokens >= 1, not {value!r}")
    return value


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


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# --------------------------------------------------------------------------- run-level figures


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
