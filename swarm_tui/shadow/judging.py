"""Judged agreement: a judge asked, for mirrored requests both endpoints answered, which of the two
answers is better (pairwise, or "equal"), beside the exact / JSON-equal agreement.

Position bias (judges tend to prefer the first, or the second, answer shown) is cancelled by
balanced, seeded positions: the judged pairs go in blocks of two, the primary shown as ANSWER A in
one and as ANSWER B in the other, which of the two drawn from a seeded generator; every verdict is
mapped back to primary / secondary. The raw "A" / "B" counts are kept, so a biased judge shows.

Each judge call is sent once (an endpoint's failure is counted, not retried); an answer that cannot
be read as a verdict is re-asked once, and a second unreadable answer is a judge error. The judge's
calls are billed apart (the price table's price of its model at its provider) and never count in
either endpoint's figures. A judge that fails never stops the shadow run.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from swarm_tui.core.usage import Usage
from swarm_tui.judge.verdict import Preference, VerdictError, pairwise_body, read_preference, reask_body, task_text
from swarm_tui.pricing import Price, answer_cost
from swarm_tui.pricing.currency import DisplayCurrency
from swarm_tui.providers.client import ProviderClient, StreamDeadlines
from swarm_tui.shadow.config import ShadowJudge, mirrored

PRIMARY_BETTER, EQUAL, SECONDARY_BETTER = "primary", "equal", "secondary"
CONCURRENCY = 8
"""Judge calls in flight at most."""
EXAMPLES = 3
"""Reasons kept per outcome in the report (the first ones)."""
UNREADABLE = "unreadable"
"""The judge's error kind when its answer could not be read as a verdict, even re-asked."""


def mapped(raw: str, primary_is_a: bool) -> str:
    """A verdict about positions ("A" / "B" / "equal") as a verdict about endpoints."""
    if raw == "equal":
        return EQUAL
    return PRIMARY_BETTER if (raw == "A") == primary_is_a else SECONDARY_BETTER


@dataclass
class JudgeTally:
    """What the judge said, mapped back to the endpoints, and what it cost."""

    selected: int = 0
    """Answered pairs chosen for judging (`--judge-rate` of them)."""
    outcomes: Counter[str] = field(default_factory=Counter)
    said: Counter[str] = field(default_factory=Counter)
    """The raw verdicts: "A", "B", "equal" (position bias shows here)."""
    primary_as_a: int = 0
    primary_as_b: int = 0
    reasked: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    """Pairs not judged because the run was stopped before their turn."""
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    unpriced: int = 0
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def judged(self) -> int:
        return sum(self.outcomes.values())

    def record(self, request: int, primary_is_a: bool, verdict: Preference) -> None:
        outcome = mapped(verdict.better, primary_is_a)
        self.outcomes[outcome] += 1
        self.said[verdict.better] += 1
        kept = self.examples.setdefault(outcome, [])
        if len(kept) < EXAMPLES and verdict.reason:
            kept.append(
                {"request": request, "primary_shown_as": "A" if primary_is_a else "B", "reason": verdict.reason}
            )


class PairJudge:
    """Judges mirrored pairs as they complete; `submit` is called from the run's event loop."""

    def __init__(
        self,
        spec: ShadowJudge,
        *,
        name: str,
        base_url: str,
        model: str | None,
        price: Price | None,
        currency: DisplayCurrency,
        timeout_s: float,
    ) -> None:
        self.spec = spec
        self.name, self.base_url, self.model = name, base_url, model
        self.price, self.currency = price, currency
        self.timeout_s = timeout_s
        self.client: ProviderClient | None = None
        self.tally = JudgeTally()
        self.tasks: set[asyncio.Task[None]] = set()
        self.stopped = False
        """Set when the run is stopped early: pairs still waiting for a slot are skipped."""
        self._slots = asyncio.Semaphore(CONCURRENCY)
        self._rng = random.Random(spec.seed)
        self._block_first: bool = True
        self._pairs_seen = 0

    # ----------------------------------------------------------------- choosing and ordering

    def wanted(self, pair_number: int) -> bool:
        """Whether the `pair_number`-th answered pair (0-based) is judged: `rate` of them, evenly spread."""
        return mirrored(pair_number, self.spec.rate)

    def _primary_is_a(self) -> bool:
        """Balanced, seeded positions: in each block of two judged pairs the primary is A once."""
        n = self.tally.selected
        if n % 2 == 0:
            self._block_first = self._rng.random() < 0.5
            return self._block_first
        return not self._block_first

    # ----------------------------------------------------------------- judging

    def offer(self, request: int, body: dict[str, Any], primary: str, secondary: str) -> None:
        """A mirrored pair both endpoints answered; judged if it is in the judged share."""
        number = self._pairs_seen
        self._pairs_seen += 1
        if not self.wanted(number):
            return
        primary_is_a = self._primary_is_a()
        self.tally.selected += 1
        if primary_is_a:
            self.tally.primary_as_a += 1
        else:
            self.tally.primary_as_b += 1
        a, b = (primary, secondary) if primary_is_a else (secondary, primary)
        model = self.model or str(body.get("model") or "")
        judge_body = pairwise_body(model, self.spec.rubric, task_text(body), a, b, self.spec.max_tokens)
        task = asyncio.create_task(self._judge(request, judge_body, primary_is_a), name=f"shadow-judge-{request}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _judge(self, request: int, body: dict[str, Any], primary_is_a: bool) -> None:
        async with self._slots:
            if self.stopped:
                self.tally.skipped += 1
                return
            try:
                verdict = await self._ask(body)
            except asyncio.CancelledError:
                self.tally.errors["cancelled"] += 1
                raise
            except VerdictError:
                self.tally.errors[UNREADABLE] += 1
                return
            except Exception as exc:  # noqa: BLE001 - a judge that fails must not stop the shadow run
                kind = str(self.client.classify(exc).kind) if self.client is not None else type(exc).__name__
                self.tally.errors[kind] += 1
                return
        self.tally.record(request, primary_is_a, verdict)

    async def _ask(self, body: dict[str, Any]) -> Preference:
        """The judge's verdict, re-asked once when its answer cannot be read."""
        text = await self._call(body)
        try:
            return read_preference(text)
        except VerdictError:
            self.tally.reasked += 1
            return read_preference(await self._call(reask_body(body, text, pairwise=True)))

    async def _call(self, body: dict[str, Any]) -> str:
        assert self.client is not None
        timeout = self.timeout_s
        self.tally.calls += 1
        async with asyncio.timeout(timeout):
            result = await self.client.complete(
                body, stream=False, deadlines=StreamDeadlines(first_token_s=timeout, idle_s=timeout)
            )
        self.tally.usage = self.tally.usage + result.usage
        cost = answer_cost(self.price, result.usage, result.service_tier)
        if cost is not None:
            self.tally.cost += cost
        elif result.usage.total:
            self.tally.unpriced += 1
        return result.content

    async def settle(self, quiet_s: float) -> None:
        """Wait for the judge calls (each is bounded by the timeout); give up after `quiet_s` with no progress."""
        while self.tasks:
            done, _ = await asyncio.wait(list(self.tasks), timeout=quiet_s)
            if not done:
                return

    # ----------------------------------------------------------------- the report

    def report(self, compared: int) -> dict[str, Any]:
        """shadow.json's `judged_agreement` (`compared`: the pairs both endpoints answered)."""
        t = self.tally
        n = t.judged

        def share(count: int) -> float | None:
            return round(count / n, 4) if n else None

        cost = t.cost if self.price is not None and not t.unpriced else None
        spec = self.spec
        return {
            "judge": {
                "endpoint": self.name,
                "base_url": self.base_url,
                "model": self.model,
                "self": spec.endpoint is None,
                "rate": spec.rate,
                "rubric": spec.rubric,
            },
            "answered_pairs": compared,
            "selected": t.selected,
            "judged": n,
            "primary_better": t.outcomes[PRIMARY_BETTER],
            "equal": t.outcomes[EQUAL],
            "secondary_better": t.outcomes[SECONDARY_BETTER],
            "primary_better_share": share(t.outcomes[PRIMARY_BETTER]),
            "equal_share": share(t.outcomes[EQUAL]),
            "secondary_better_share": share(t.outcomes[SECONDARY_BETTER]),
            "positions": {
                "primary_as_a": t.primary_as_a,
                "primary_as_b": t.primary_as_b,
                "said_a": t.said["A"],
                "said_b": t.said["B"],
                "said_equal": t.said["equal"],
            },
            "reasked": t.reasked,
            "errors": sum(t.errors.values()),
            "errors_by_kind": dict(t.errors),
            "skipped": t.skipped,
            "pending": sum(1 for task in self.tasks if not task.done()),
            "calls": t.calls,
            "tokens": {"prompt": t.usage.prompt, "completion": t.usage.completion, "cached": t.usage.cached},
            "cost_usd": round(cost, 6) if cost is not None else None,
            "cost_display": self.currency.format(cost)
            if cost is not None
            else (f"price unknown for model {self.model!r}" if self.model else "price unknown"),
            "examples": {k: list(v) for k, v in t.examples.items()},
        }
