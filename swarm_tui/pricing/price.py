"""What a token costs, and so what one call's usage costs: a price row's rates and its rules.

A usage (`core.usage.Usage`) is priced by kind of token, each at its own rate:
- prompt tokens neither read from the cache nor written to it at `input`;
- cache reads at `cached_input` (Anthropic 0.1x, OpenAI's newer models 0.1x, DeepSeek's hits);
- cache writes at `cache_write` (Anthropic's 5-minute write: 1.25x; OpenAI's newer models bill
  writes at 1.25x too) and one-hour writes at `cache_write_1h` (Anthropic: 2x); a row that gives
  neither bills a write as an uncached token (what OpenAI's older models and DeepSeek do);
- output at `output`. Reasoning tokens are output: OpenAI and the providers copying its usage
  object count them inside `completion_tokens`, so they are billed once (`billable_output`) and
  shown apart (`CostParts.reasoning_usd`, part of `output_usd`).

Long context (`LongContext`): above a prompt size some models price differently. Anthropic and
Gemini above 200k prompt tokens, and OpenAI's 1M-context models above 272k, price the *whole*
request at the premium (2x input, 1.5x output: every input kind moves by the input factor, the
output by the output factor); a row may instead say only the excess moves (`applies_to =
"excess"`: the prompt tokens past the threshold, counted as uncached input, are billed at the
premium input rate; nothing else moves).

Service tiers (`for_tier`): `default` is the row's own rates; `batch` its Batch API rates
(`batch_price`); `flex` the rates of OpenAI's Flex processing (`flex = "batch"`: the batch
rates, answered synchronously, as OpenAI bills it), `priority` the premium tier's. A tier's cache
writes keep their ratio to its input rate, and the long-context rule applies at every tier.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from swarm_tui.core.tiers import BATCH_TIER, DEFAULT, FLEX, PRIORITY
from swarm_tui.core.usage import Usage

PER_TOKENS = 1_000_000
WHOLE = "whole"
EXCESS = "excess"
AT_BATCH_RATES = "batch"
"""A row's `flex`: billed at its batch rates (OpenAI: "Tokens are priced at Batch API rates")."""


@dataclass(frozen=True, slots=True)
class LongContext:
    """Prices past a prompt size: `above` prompt tokens (every kind counted, the cache's too)."""

    above: int
    input_factor: float
    """What every input rate (uncached, cache read, cache write) is multiplied by."""
    output_factor: float = 1.0
    applies_to: str = WHOLE
    """`whole`: the whole request moves (Anthropic, Gemini, OpenAI); `excess`: only the prompt
    tokens past `above` do."""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "above": self.above,
            "input_factor": self.input_factor,
            "output_factor": self.output_factor,
            "applies_to": self.applies_to,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class TierRates:
    """A service tier's rates (USD per 1M tokens). A rate left None keeps its ratio to the input
    rate of the live row (cache reads and writes scale as the tier's input does)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "cached_input": self.cached_input,
            "output": self.output,
            "cache_write": self.cache_write,
            "cache_write_1h": self.cache_write_1h,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class CostParts:
    """One usage priced, split by what the tokens were billed as (USD). The parts add up to the
    total; `reasoning_usd` and `cached_savings_usd` are shown beside them, not added."""

    input_usd: float = 0.0
    cached_input_usd: float = 0.0
    output_usd: float = 0.0
    cached_savings_usd: float = 0.0
    """What the cached tokens would have cost more at the full input rate."""
    cache_write_usd: float = 0.0
    """Prompt tokens written to the cache (either lifetime), at their write rates."""
    reasoning_usd: float = 0.0
    """The part of `output_usd` the reasoning tokens cost (billed once, shown apart)."""

    @property
    def total_usd(self) -> float:
        return self.input_usd + self.cached_input_usd + self.cache_write_usd + self.output_usd

    def __add__(self, other: CostParts) -> CostParts:
        return CostParts(
            self.input_usd + other.input_usd,
            self.cached_input_usd + other.cached_input_usd,
            self.output_usd + other.output_usd,
            self.cached_savings_usd + other.cached_savings_usd,
            self.cache_write_usd + other.cache_write_usd,
            self.reasoning_usd + other.reasoning_usd,
        )


@dataclass(frozen=True, slots=True)
class Price:
    """USD per 1M tokens at the default tier, with the row's other tiers and rules."""

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
    cache_write: float | None = None
    """A prompt token written to the cache for its default lifetime (Anthropic: 5 minutes);
    None: the input rate (the provider bills a write as a miss)."""
    cache_write_1h: float | None = None
    """A prompt token written to a one-hour cache (Anthropic); None: `cache_write`'s rate."""
    long_context: LongContext | None = None
    flex: TierRates | str | None = None
    """The Flex tier's rates, `AT_BATCH_RATES` (its batch rates), or None: none known."""
    priority: TierRates | None = None
    """The Priority tier's rates, or None: none known."""

    @property
    def has_batch(self) -> bool:
        return self.batch_input is not None and self.batch_output is not None

    @property
    def write_rate(self) -> float:
        return self.input if self.cache_write is None else self.cache_write

    @property
    def write_1h_rate(self) -> float:
        return self.write_rate if self.cache_write_1h is None else self.cache_write_1h

    # ----------------------------------------------------------------- tiers

    def batch_price(self) -> Price | None:
        """The price to bill a batch-lane attempt with; None when no batch rate is published."""
        if self.batch_input is None or self.batch_output is None:
            return None
        cached = self.batch_cached_input
        if cached is None:
            cached = min(self.cached_input, self.batch_input)
        return self._at(self.batch_input, cached, self.batch_output, source=self.batch_source or self.source)

    def for_tier(self, tier: str | None) -> Price | None:
        """The price a call served at `tier` is billed at: this row for the default tier, its batch
        or tier rates otherwise; None where the row knows no rate for that tier."""
        if tier is None or tier == DEFAULT:
            return self
        if tier == BATCH_TIER:
            return self.batch_price()
        rates = self.flex if tier == FLEX else self.priority if tier == PRIORITY else None
        if rates is None:
            return None
        if isinstance(rates, str):  # AT_BATCH_RATES
            return self.batch_price()
        return self._at(
            rates.input,
            rates.cached_input,
            rates.output,
            cache_write=rates.cache_write,
            cache_write_1h=rates.cache_write_1h,
            source=rates.source or self.source,
        )

    def billed_at(self, tier: str | None) -> Price | None:
        """The price an answer served at `tier` is billed at: `for_tier`, except that a Flex answer
        of a row without a flex rate is billed at the default rate (an upper bound: no provider's
        Flex is dearer than its default), where a Priority one without a rate is priced nowhere."""
        price = self.for_tier(tier)
        return self if price is None and tier == FLEX else price

    def tiers(self) -> tuple[str, ...]:
        """The tiers this row has a price for, in the order a bill shows them."""
        return tuple(t for t in (DEFAULT, FLEX, PRIORITY, BATCH_TIER) if self.for_tier(t) is not None)

    def _at(
        self,
        input: float,
        cached_input: float | None,
        output: float,
        *,
        cache_write: float | None = None,
        cache_write_1h: float | None = None,
        source: str,
    ) -> Price:
        """This row's rules at other rates: cache rates not given keep their ratio to the input rate."""
        share = input / self.input if self.input else 1.0
        if cached_input is None:
            cached_input = self.cached_input * share
        if cache_write is None and self.cache_write is not None:
            cache_write = self.cache_write * share
        if cache_write_1h is None and self.cache_write_1h is not None:
            cache_write_1h = self.cache_write_1h * share
        return Price(
            input=input,
            cached_input=cached_input,
            output=output,
            source=source,
            as_of=self.as_of,
            max_output=self.max_output,
            cache_write=cache_write,
            cache_write_1h=cache_write_1h,
            long_context=self.long_context,
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

    # ----------------------------------------------------------------- cost

    def cost(self, usage: Usage, prompt_size: float | None = None) -> float:
        """What `usage` costs at this price (USD): `breakdown(usage).total_usd`, summed directly
        in the common case (no cache write, no long context), which is every answer's hot path.
        `prompt_size`: the one request's prompt the long-context rule is judged on, when `usage`
        adds up many (`estimate`); else `usage.prompt`."""
        prompt, cached = usage.prompt, usage.cached
        rule = self.long_context
        size = prompt if prompt_size is None else prompt_size
        if usage.cache_write or usage.cache_write_1h or (rule is not None and size > rule.above):
            return self.breakdown(usage, prompt_size).total_usd
        uncached = prompt - cached if prompt > cached else 0
        return (uncached * self.input + cached * self.cached_input + billable_output(usage) * self.output) / PER_TOKENS

    def breakdown(self, usage: Usage, prompt_size: float | None = None) -> CostParts:
        """`usage` priced by kind of token (`cost`'s `prompt_size`: the one request's prompt)."""
        input_factor = output_factor = excess_factor = 1.0
        excess = 0.0
        rule = self.long_context
        size = usage.prompt if prompt_size is None else prompt_size
        if rule is not None and size > rule.above:
            if rule.applies_to == EXCESS:
                share = usage.prompt / size if size else 1.0  # the excess of each request, summed
                excess, excess_factor = min((size - rule.above) * share, usage.uncached), rule.input_factor
            else:
                input_factor, output_factor = rule.input_factor, rule.output_factor
        input_rate, cached_rate = self.input * input_factor, self.cached_input * input_factor
        output_rate = self.output * output_factor
        input_usd = (usage.uncached - excess) * input_rate + excess * input_rate * excess_factor
        writes = usage.cache_write * self.write_rate + usage.cache_write_1h * self.write_1h_rate
        reasoning = usage.reasoning
        return CostParts(
            input_usd=input_usd / PER_TOKENS,
            cached_input_usd=usage.cached * cached_rate / PER_TOKENS,
            output_usd=billable_output(usage) * output_rate / PER_TOKENS,
            cached_savings_usd=usage.cached * (input_rate - cached_rate) / PER_TOKENS,
            cache_write_usd=writes * input_factor / PER_TOKENS,
            reasoning_usd=reasoning * output_rate / PER_TOKENS,
        )

    def to_dict(self) -> dict[str, Any]:
        batch = self.batch_price()
        flex = self.for_tier(FLEX)
        priority = self.for_tier(PRIORITY)
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
            "cache_write": self.write_rate,
            "cache_write_1h": self.write_1h_rate,
            "long_context": self.long_context.to_dict() if self.long_context else None,
            "flex": _tier_dict(flex),
            "priority": _tier_dict(priority),
        }


def _tier_dict(price: Price | None) -> dict[str, Any] | None:
    if price is None:
        return None
    return {"input": price.input, "cached_input": price.cached_input, "output": price.output, "source": price.source}


def answer_cost(price: Price | None, usage: Usage, tier: str | None = None) -> float | None:
    """What an answer costs at `price`, billed at the tier that served it (`Price.billed_at`);
    None when no price is known (for that tier)."""
    if price is None:
        return None
    if tier is not None:
        billed = price.billed_at(tier)
        return billed.cost(usage) if billed is not None else None
    return price.cost(usage)


def billable_output(usage: Usage) -> int:
    """Output tokens to bill: completion tokens, which include reasoning (OpenAI's convention);
    reasoning is added only when it exceeds the completion count (a provider counting it apart)."""
    if usage.reasoning > usage.completion:
        return usage.completion + usage.reasoning
    return usage.completion
