"""What calls cost, and what they may cost: the records of answered and cut calls, and the budget's
reservations (`ledger.SpendLedger`) for the calls about to go out.

An answered call is billed at the tier its answer says served it (`CallResult.service_tier`); a
call not answered yet (its reservation, a call cut after it went out) at the dearer of the tier
its endpoint asks for and the default: a ceiling errs high. Above a long-context threshold the
price row's rule applies to the reservation too (the prompt's estimate errs high, so a prompt
near the threshold reserves at the premium)."""

from __future__ import annotations

from collections.abc import Callable

from swarm_tui.core.events import Attempt
from swarm_tui.core.task import JSONObject
from swarm_tui.core.tiers import PRIORITY, served_tier
from swarm_tui.core.usage import Usage
from swarm_tui.engine.calls import answer_estimate, finish_reason, prompt_estimate
from swarm_tui.engine.ledger import SpendLedger, worst_usage
from swarm_tui.pricing import Price
from swarm_tui.providers.client import CallResult


class Billing:
    """Prices by endpoint, over the run's one ledger."""

    def __init__(
        self,
        ledger: SpendLedger,
        prices: dict[str, Price | None],
        stop: Callable[[str], None],
        calls_out: Callable[[], bool],
        tiers: dict[str, str | None] | None = None,
    ) -> None:
        """`stop(reason)`: stop dispatch (the budget is spent); `calls_out()`: whether calls in flight
        will settle (then a call that does not fit waits instead); `tiers`: the service tier each
        endpoint asks for (None: the default)."""
        self.ledger = ledger
        self.prices = prices
        self.tiers = tiers if tiers is not None else {}
        self._at_tier: dict[tuple[str, str], Price | None] = {}
        """(endpoint, tier): the price an answer served at that tier is billed at, made once."""
        self._stop = stop
        self._calls_out = calls_out

    def add_price(self, endpoint: str, price: Price | None, tier: str | None = None) -> None:
        """Bill calls to another endpoint (a judge's) at its price, asking for `tier`."""
        self.prices.setdefault(endpoint, price)
        self.tiers.setdefault(endpoint, tier)

    def billed_price(self, endpoint: str, tier: str | None) -> Price | None:
        """The price an answer of `endpoint` served at `tier` is billed at (`Price.billed_at`)."""
        if tier is None:
            return self.prices.get(endpoint)
        key = (endpoint, tier)
        if key not in self._at_tier:
            price = self.prices.get(endpoint)
            self._at_tier[key] = price.billed_at(tier) if price is not None else None
        return self._at_tier[key]

    def unanswered_price(self, endpoint: str, body: JSONObject) -> Price | None:
        """What a call not answered (yet) is priced at: the dearer of the tier it asks for and the
        default (a Priority call at the Priority rate, a Flex one at the default: it may be served so)."""
        price = self.prices.get(endpoint)
        if price is None:
            return None
        asked = served_tier(body.get("service_tier")) or served_tier(self.tiers.get(endpoint))
        return price.for_tier(PRIORITY) if asked == PRIORITY else price

    def answered(
        self,
        index: int,
        number: int,
        endpoint: str,
        started_at: float,
        latency_ms: float,
        result: CallResult,
        outcome: str,
        body: JSONObject,
    ) -> Attempt:
        """The attempt record of a call the provider answered (200): billed as its usage says, or
        by estimate when it says nothing; its reservation becomes what it cost."""
        usage, cost, estimated = self.billed(result, body, endpoint)
        self.ledger.settle((index, number), cost)
        return Attempt(
            index,
            number,
            endpoint,
            started_at,
            latency_ms,
            outcome,
            status=200,
            request_id=result.request_id,
            usage=usage,
            cost_usd=cost,
            ttft_ms=result.ttft_ms,
            tokens_per_s=result.tokens_per_s,
            gap_ms=result.gap_ms,
            estimated=estimated,
            finish_reason=finish_reason(result),
            service_tier=result.service_tier,
        )

    def billed(self, result: CallResult, body: JSONObject, endpoint: str) -> tuple[Usage, float | None, bool]:
        """What an answered call is billed: its usage, or, when the provider sent none, an
        estimate (the prompt's tokens counted, the answer's from its text), marked as such."""
        usage, estimated = result.usage, False
        if usage.total == 0:
            usage, estimated = Usage(prompt=prompt_estimate(body), completion=answer_estimate(result)), True
        price = self.billed_price(endpoint, result.service_tier)
        return usage, (price.cost(usage) if price is not None else None), estimated

    def cut(
        self,
        index: int,
        number: int,
        endpoint: str,
        started_at: float,
        latency_ms: float,
        body: JSONObject,
        outcome: str,
    ) -> Attempt:
        """A call cut after it went out may have been billed all the same: its input at least is
        counted (estimated) in the totals and the budget, marked as an estimate."""
        usage = Usage(prompt=prompt_estimate(body))
        price = self.unanswered_price(endpoint, body)
        cost = price.cost(usage) if price else None
        self.ledger.settle((index, number), cost)
        return Attempt(
            index, number, endpoint, started_at, latency_ms, outcome, usage=usage, cost_usd=cost, estimated=True
        )

    def unbilled(self, index: int, number: int) -> None:
        """The call failed without being billed (or never went out): its reservation goes back."""
        self.ledger.settle((index, number), None)

    def reserve(self, index: int, number: int, body: JSONObject, endpoint: str, *, stop: bool = True) -> bool:
        """Hold the worst case of call (index, number) against the budget; False when it would pass
        it. With nothing else in flight to wait for, dispatch is then stopped saying why (unless
        `stop` is False: a hedge that does not fit is simply not sent). Without a budget nothing
        is held."""
        ledger = self.ledger
        if ledger.budget_usd is None:
            return True
        price = self.unanswered_price(endpoint, body)
        usage = worst_usage(body, price.max_output) if price is not None else None
        worst = price.cost(usage) if price is not None and usage is not None else None
        if worst is not None and ledger.reserve((index, number), worst):
            return True
        if stop and (worst is None or not self._calls_out()):
            no_tier_price = price is None and self.prices.get(endpoint) is not None
            self._stop(self._refusal(worst, usage, endpoint, no_tier_price))
        return False

    def fits(self, body: JSONObject, endpoint: str) -> bool:
        """The worst case of a call of `body` to `endpoint` would fit the budget now (reserving
        nothing): an answer given more room is asked for only then. True without a budget."""
        ledger = self.ledger
        if ledger.budget_usd is None:
            return True
        price = self.unanswered_price(endpoint, body)
        usage = worst_usage(body, price.max_output) if price is not None else None
        return price is not None and usage is not None and ledger.fits(price.cost(usage))

    def max_output(self, endpoint: str) -> int | None:
        """The most tokens the model of `endpoint` can write, as the price table says (None: unknown)."""
        price = self.prices.get(endpoint)
        return price.max_output if price is not None else None

    def _refusal(self, worst: float | None, usage: Usage | None, endpoint: str, no_tier_price: bool) -> str:
        ledger = self.ledger
        if worst is None or usage is None:
            if no_tier_price:
                why = f"no {PRIORITY} price is known for its model"
            else:
                why = (
                    "no price is known"
                    if usage is not None or endpoint not in self.prices
                    else "nothing bounds its answer"
                )
            return f"budget: the next call to {endpoint} cannot be bounded ({why}): nothing more is sent"
        return (
            f"budget: ${ledger.spent_usd:.4f} spent (this run, all sessions); the next call could cost up to "
            f"${worst:.4f} ({usage.completion:,} output tokens at most); budget ${ledger.budget_usd:.2f}: "
            f"nothing more is sent"
        )
