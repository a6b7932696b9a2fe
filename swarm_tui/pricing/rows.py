"""A price row as TOML says it, read into a `Price`: the built-in table's rows and the user's.

One reader for both, so an override can say anything a built-in row can, and a bad one fails
naming its file and field (`InputError`, exit 2). A row the user writes may give only some
fields of a row the table has (just `output`, or just a tier); the rest is the table's.

The fields, every rate in USD per 1M tokens (see `price.py` for what each bills):

    input, cached_input, output         the default tier (cached_input defaults to input)
    cache_write, cache_write_1h         cache writes: default lifetime (5 minutes), one hour
    batch_input, batch_cached_input,    the Batch API's rates (the older flat spelling), or
    batch_output / batch = {...}        a table of input, cached_input, output
    flex = "batch" | {...}              OpenAI Flex: at the batch rates, or its own rates
    priority = {...}                    the Priority tier's rates
    long_context = {above, input_factor, output_factor, applies_to}
    max_output, source, as_of

A tier's table holds `input`, `output` and, optionally, `cached_input`, `cache_write`,
`cache_write_1h` and its `source`.
"""

from __future__ import annotations

import math
from typing import Any

from swarm_tui.core.errors import InputError
from swarm_tui.pricing.price import AT_BATCH_RATES, EXCESS, WHOLE, LongContext, Price, TierRates

PRICE_FIELDS = ("input", "cached_input", "output")
BATCH_FIELDS = ("batch_input", "batch_cached_input", "batch_output")
CACHE_FIELDS = ("cache_write", "cache_write_1h")
TIER_TABLES = ("batch", "flex", "priority")
ENTRY_FIELDS = frozenset(
    {*PRICE_FIELDS, *BATCH_FIELDS, *CACHE_FIELDS, *TIER_TABLES, "long_context", "source", "as_of", "max_output"}
)
TIER_FIELDS = frozenset({*PRICE_FIELDS, *CACHE_FIELDS, "source"})
LONG_CONTEXT_FIELDS = frozenset({"above", "input_factor", "output_factor", "applies_to", "source"})


class _Row:
    """One row being read: where it is (for the errors) and its fields."""

    def __init__(self, row: Any, where: str, source: str) -> None:
        self.where, self.source = where, source
        if not isinstance(row, dict):
            raise self.error("", "must be a table with input, cached_input and output (USD per 1M tokens)")
        self.row = row

    def error(self, field: str, message: str) -> InputError:
        return InputError.single(self.source, f"{self.where}.{field}" if field else self.where, message)

    def rate(self, table: dict[str, Any], name: str, prefix: str = "") -> float | None:
        value = table.get(name)
        if value is None:
            return None
        if not is_number(value) or value < 0:
            raise self.error(prefix + name, f"must be a number >= 0 (USD per 1M tokens), not {value!r}")
        return float(value)

    def known(self, table: dict[str, Any], fields: frozenset[str], prefix: str = "") -> None:
        unknown = set(table) - fields
        if unknown:
            name = sorted(unknown)[0]
            raise self.error(prefix + name, f"unknown field (known: {', '.join(sorted(fields))})")

    def table(self, name: str) -> dict[str, Any] | None:
        value = self.row.get(name)
        if value is not None and not isinstance(value, dict):
            raise self.error(name, "must be a table (e.g. { input = 1.0, output = 4.0 })")
        return value


def read_row(row: Any, where: str, source: str, base: Price | None = None, *, own_source: str = "") -> Price:
    """The price `row` says, over `base` (the table's row it overrides; None: a new row).

    `own_source`: the row's source when it names none (`your config (...)` for a user's row)."""
    reader = _Row(row, where, source)
    row = reader.row
    reader.known(row, ENTRY_FIELDS)
    rates = {name: reader.rate(row, name) for name in (*PRICE_FIELDS, *BATCH_FIELDS, *CACHE_FIELDS)}
    if base is None:
        missing = [name for name in ("input", "output") if rates[name] is None]
        if missing:
            raise reader.error(missing[0], "missing (a new price needs input and output, USD per 1M tokens)")
        base = Price(rates["input"], rates["input"], rates["output"])  # type: ignore[arg-type]
    batch = _batch_rates(reader, rates, base)
    return Price(
        input=_given(rates["input"], base.input),
        cached_input=_given(rates["cached_input"], base.cached_input),
        output=_given(rates["output"], base.output),
        source=str(row.get("source", own_source)),
        as_of=str(row.get("as_of", "")),
        batch_input=batch[0],
        batch_cached_input=batch[1],
        batch_output=batch[2],
        max_output=_max_output(reader, row.get("max_output", base.max_output)),
        cache_write=_given(rates["cache_write"], base.cache_write),
        cache_write_1h=_given(rates["cache_write_1h"], base.cache_write_1h),
        long_context=_long_context(reader) if "long_context" in row else base.long_context,
        flex=_flex(reader) if "flex" in row else base.flex,
        priority=_tier(reader, "priority") if "priority" in row else base.priority,
    )


def _given(value: float | None, otherwise: Any) -> Any:
    return otherwise if value is None else value


def _batch_rates(reader: _Row, rates: dict[str, float | None], base: Price) -> tuple[float | None, ...]:
    """(input, cached input, output) of the batch: the flat fields or the `batch` table, over the base's."""
    table = reader.table("batch")
    if table is not None:
        flat = [name for name in BATCH_FIELDS if rates[name] is not None]
        if flat:
            raise reader.error(flat[0], "given twice: in the batch table and as a field (give one)")
        reader.known(table, frozenset(PRICE_FIELDS), "batch.")
        rates = {f"batch_{name}": reader.rate(table, name, "batch.") for name in PRICE_FIELDS}
    batch = tuple(_given(rates[name], getattr(base, name)) for name in BATCH_FIELDS)
    if any(value is not None for value in batch):
        for name, value in (("batch_input", batch[0]), ("batch_output", batch[2])):
            if value is None:
                raise reader.error(
                    name if table is None else f"batch.{name[6:]}",
                    "missing (a batch price needs batch_input and batch_output, USD per 1M tokens)",
                )
    return batch


def _tier(reader: _Row, name: str) -> TierRates:
    table = reader.table(name)
    assert table is not None
    prefix = f"{name}."
    reader.known(table, TIER_FIELDS, prefix)
    values = {field: reader.rate(table, field, prefix) for field in (*PRICE_FIELDS, *CACHE_FIELDS)}
    for needed in ("input", "output"):
        if values[needed] is None:
            raise reader.error(prefix + needed, f"missing (a {name} price needs input and output, USD per 1M tokens)")
    return TierRates(
        input=values["input"],  # type: ignore[arg-type]
        output=values["output"],  # type: ignore[arg-type]
        cached_input=values["cached_input"],
        cache_write=values["cache_write"],
        cache_write_1h=values["cache_write_1h"],
        source=str(table.get("source", "")),
    )


def _flex(reader: _Row) -> TierRates | str:
    value = reader.row["flex"]
    if value == AT_BATCH_RATES:
        return AT_BATCH_RATES
    if not isinstance(value, dict):
        raise reader.error("flex", f'must be "batch" (billed at the batch rates) or a table of rates, not {value!r}')
    return _tier(reader, "flex")


def _long_context(reader: _Row) -> LongContext:
    table = reader.table("long_context")
    assert table is not None
    reader.known(table, LONG_CONTEXT_FIELDS, "long_context.")
    above = table.get("above")
    if isinstance(above, bool) or not isinstance(above, int) or above < 1:
        raise reader.error("long_context.above", f"must be a whole number of prompt tokens >= 1, not {above!r}")
    factors: dict[str, float] = {}
    for name, default in (("input_factor", None), ("output_factor", 1.0)):
        value: Any = table.get(name, default)
        if not is_number(value) or value <= 0:
            raise reader.error(f"long_context.{name}", f"must be a number > 0 (2 for twice the rate), not {value!r}")
        factors[name] = float(value)
    applies_to = table.get("applies_to", WHOLE)
    if applies_to not in (WHOLE, EXCESS):
        raise reader.error(
            "long_context.applies_to",
            f'must be "whole" (the whole request moves) or "excess" (only the tokens past above), not {applies_to!r}',
        )
    if applies_to == EXCESS and factors["output_factor"] != 1.0:
        raise reader.error("long_context.output_factor", 'only the prompt moves when applies_to = "excess"')
    return LongContext(
        above, factors["input_factor"], factors["output_factor"], applies_to, str(table.get("source", ""))
    )


def _max_output(reader: _Row, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise reader.error("max_output", f"max_output must be a whole number of tokens >= 1, not {value!r}")
    return value


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool: what a rate in a config may be."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
