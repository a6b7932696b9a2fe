"""Money shown to people: USD (what prices are quoted in) plus a display currency with its rate.

    >>> resolve_currency("CNY", 7.3).format(12.34)
    '$12.34 ≈ ¥90.08'

The rate is units of the display currency per $1. It comes from the config (`[defaults]
currency = "CNY"`, `currency_rate = 7.3`), a flag (`--currency`, `--rate`), or the reference
rates below. A provider may bill a local currency at its own rate (the source article's relay
settles at ¥1 = $1 where the official rate is ¥7.3 = $1); `for_provider` applies such a
billing rate from the price table (`[billing.<provider>]`).

No Textual here: the CLI, `summary.json` and the TUI footer format money the same way.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from swarm_tui.core.errors import InputError

if TYPE_CHECKING:
    from swarm_tui.config import Config
    from swarm_tui.pricing import PriceTable


@dataclass(frozen=True, slots=True)
class CurrencyInfo:
    code: str
    symbol: str
    decimals: int
    reference_rate: float
    """Units per $1 used when the user names the currency but no rate."""


REFERENCE_RATES_AS_OF = "2026-11-30"
"""Reference rates are round figures for display, not market quotes: set `currency_rate` (or
`--rate`) to what you actually pay. CNY is the source article's official ¥7.3 = $1."""

CURRENCIES: dict[str, CurrencyInfo] = {
    c.code: c
    for c in (
        CurrencyInfo("USD", "$", 2, 1.0),
        CurrencyInfo("CNY", "¥", 2, 7.3),
        CurrencyInfo("JPY", "¥", 0, 150.0),
        CurrencyInfo("EUR", "€", 2, 0.92),
        CurrencyInfo("GBP", "£", 2, 0.79),
        CurrencyInfo("KRW", "₩", 0, 1400.0),
        CurrencyInfo("INR", "₹", 2, 88.0),
        CurrencyInfo("HKD", "HK$", 2, 7.8),
        CurrencyInfo("TWD", "NT$", 0, 32.0),
        CurrencyInfo("SGD", "S$", 2, 1.35),
    )
}

_CODE = re.compile(r"^[A-Za-z]{3}$")


@dataclass(frozen=True, slots=True)
class DisplayCurrency:
    code: str = "USD"
    rate: float | None = 1.0
    """Units of `code` per $1; None when unknown (then only USD is shown)."""
    symbol: str = "$"
    decimals: int = 2
    basis: str = ""
    """Where the rate comes from: "config", "--rate", "reference", "holysheep bills ¥1 = $1"..."""

    @property
    def is_usd(self) -> bool:
        return self.code == "USD"

    @property
    def shows_local(self) -> bool:
        return not self.is_usd and self.rate is not None

    def amount(self, usd: float | None) -> float | None:
        if usd is None or self.rate is None:
            return None
        return usd * self.rate

    def local(self, usd: float | None) -> str:
        """The amount in the display currency (`¥90.08`); empty when it cannot be shown."""
        amount = self.amount(usd)
        if amount is None:
            return ""
        return format_amount(amount, self.symbol, self.decimals)

    def format(self, usd: float | None) -> str:
        """`$12.34 ≈ ¥90.08`, `$12.34` in USD, `price unknown` for a cost nobody can know."""
        if usd is None:
            return "price unknown"
        if not self.shows_local:
            return format_usd(usd)
        return f"{format_usd(usd)} ≈ {self.local(usd)}"

    def rate_text(self) -> str:
        """`¥7.3 = $1`; empty for USD or an unknown rate."""
        if not self.shows_local:
            return ""
        return f"{self.symbol}{self.rate:g} = $1"

    def for_provider(self, table: PriceTable | None, provider: str | None) -> DisplayCurrency:
        """This currency at the rate `provider` bills it at, when the price table says (¥1 = $1)."""
        if table is None or self.is_usd:
            return self
        rate = table.billing_rate(provider, self.code)
        if rate is None or rate == self.rate:
            return self
        billed = replace(self, rate=rate)
        return replace(billed, basis=f"{provider} bills {billed.rate_text()}")

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "rate": self.rate, "symbol": self.symbol, "basis": self.basis}


USD = DisplayCurrency()


def format_usd(value: float | None) -> str:
    """`$2,457.60`; small amounts keep their significant digits (`$0.0123`, `$0.000042`)."""
    if value is None:
        return "price unknown"
    return format_amount(value, "$", 2)


def format_amount(value: float, symbol: str, decimals: int = 2) -> str:
    """`¥17,940.48`; below 1, three significant digits (`$0.0123`, `¥0.5`)."""
    sign = "-" if value < 0 else ""
    value = abs(value)
    digits = decimals
    if 0 < value < 1:
        digits = max(decimals, 2 - math.floor(math.log10(value)))
    text = f"{value:,.{digits}f}"
    if digits > decimals and "." in text:
        whole, frac = text.split(".")
        frac = frac.rstrip("0").ljust(decimals, "0")
        text = f"{whole}.{frac}" if frac else whole
    return f"{sign}{symbol}{text}"


def resolve_currency(
    code: str | None,
    rate: float | None = None,
    *,
    source: str = "currency",
    code_field: str = "--currency",
    rate_field: str = "--rate",
) -> DisplayCurrency:
    """A display currency from a code and an optional rate (units per $1); `InputError` when
    the code is malformed, or unknown without a rate, or the rate is not a positive number."""
    code = (code or "USD").strip().upper()
    if not _CODE.match(code):
        raise InputError.single(source, code_field, f"{code!r} is not a 3-letter currency code (e.g. CNY, JPY, EUR)")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0):
        raise InputError.single(source, rate_field, f"must be a positive number of {code} per $1, not {rate!r}")
    info = CURRENCIES.get(code)
    if code == "USD":
        if rate not in (None, 1, 1.0):
            raise InputError.single(source, rate_field, "USD is the base currency: its rate is 1")
        return USD
    if rate is not None:
        basis = "your rate"
    elif info is not None:
        rate = info.reference_rate
        basis = f"reference rate of {REFERENCE_RATES_AS_OF}"
    else:
        known = ", ".join(sorted(CURRENCIES))
        raise InputError.single(
            source, rate_field, f"no reference rate for {code}: give its rate ({code} per $1), or use one of {known}"
        )
    return DisplayCurrency(
        code=code,
        rate=float(rate),
        symbol=info.symbol if info else f"{code} ",
        decimals=info.decimals if info else 2,
        basis=basis,
    )


def from_config(config: Config, *, provider: str | None = None, table: PriceTable | None = None) -> DisplayCurrency:
    """The config's display currency (`[defaults] currency`, `currency_rate`), at `provider`'s
    billing rate when the price table has one."""
    currency = resolve_currency(
        config.currency,
        config.currency_rate,
        source=str(config.path),
        code_field="defaults.currency",
        rate_field="defaults.currency_rate",
    )
    if config.currency_rate is not None:
        currency = replace(currency, basis="config")
    return currency.for_provider(table, provider) if provider else currency


def display_currency(config: Config, provider: str | None = None) -> DisplayCurrency:
    """The currency to show a run on `provider` in: the config's, at the provider's billing rate
    (built-in `[billing]` plus the config's own) when there is one. What the TUI footer uses."""
    from swarm_tui.pricing import PriceTable

    table = PriceTable.builtin(config.prices, billing=config.billing, source=config.path)
    return from_config(config, provider=provider, table=table)
