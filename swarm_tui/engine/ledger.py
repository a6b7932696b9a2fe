"""The run's one spend ledger: a budget is a ceiling, not a hope.

Every call that can cost money reserves its worst case before it is sent — its prompt (an
estimate that errs high) and the most it may write: the body's `max_tokens`, else the model's
maximum output from the price table — and goes out only when what was spent (every session of
the run) plus what calls in flight may still cost plus its own worst case stays within the
budget. A task's call, a hedge's backup, a direct call (planner, warm-up, aggregator, judge) and
a batch's lines all draw on this one ledger. A call that does not fit while others are in
flight waits for them to settle (their worst cases become what they cost); one that does not
fit with nothing in flight stops dispatch: the budget is spent. When a call ends its reservation is released and
what it cost (billed, or estimated when the provider said nothing or the call was cut) is in
the spend: a call that ended can never cost more than it was allowed to reserve.

The ledger holds money, not tokens; the engine prices the worst cases (`worst_usage`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from swarm_tui.core.usage import Usage

CHARS_PER_TOKEN_ASCII = 3
"""A prompt's ASCII text counted at 3 characters a token (tokenisers average about 4: errs high)."""
MESSAGE_OVERHEAD_TOKENS = 4


def prompt_upper_estimate(body: dict[str, Any]) -> int:
    """Tokens the prompt may count, erring high: ASCII at 3 characters a token, every other
    character (CJK, accents) a token of its own, a few per message; tools offered count as text."""
    messages = body.get("messages") or ()
    text = json.dumps([messages, body.get("tools") or ()], ensure_ascii=False)
    non_ascii = sum(1 for ch in text if ord(ch) > 127) if not text.isascii() else 0
    ascii_chars = len(text) - non_ascii
    return ascii_chars // CHARS_PER_TOKEN_ASCII + non_ascii + MESSAGE_OVERHEAD_TOKENS * len(messages) + 1


def answer_ceiling(body: dict[str, Any]) -> int | None:
    """The most tokens a call may write as its body says (`max_completion_tokens`, `max_tokens`)."""
    value = body.get("max_completion_tokens") or body.get("max_tokens")
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def worst_usage(body: dict[str, Any], model_max_output: int | None) -> Usage | None:
    """The most a call with this body could be billed for; None when nothing bounds its answer."""
    ceiling = answer_ceiling(body) or model_max_output
    if ceiling is None:
        return None
    return Usage(prompt=prompt_upper_estimate(body), completion=ceiling)


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """What summary.json says of the budget."""

    budget_usd: float
    spent_usd: float
    peak_committed_usd: float
    """The most that was ever spent plus reserved at once: how near the run came to the budget."""
    stopped: bool

    @property
    def held(self) -> bool:
        return self.spent_usd <= self.budget_usd + 1e-9

    def to_dict(self) -> dict[str, Any]:
        return {
            "usd": self.budget_usd,
            "spent_usd": round(self.spent_usd, 6),
            "peak_committed_usd": round(self.peak_committed_usd, 6),
            "held": self.held,
            "used_share": round(self.spent_usd / self.budget_usd, 4) if self.budget_usd else None,
            "stopped_dispatch": self.stopped,
        }


class SpendLedger:
    """Spent + reserved against an optional budget (None: reservations are still kept, for the
    figures, but nothing is ever refused).

    A call's reservation and its cost change hands in one step (`settle`): there is no moment
    when a call that ended is in neither, so a new call can never be admitted on money that is
    about to be spent."""

    def __init__(self, budget_usd: float | None) -> None:
        self.budget_usd = budget_usd
        self.settled = asyncio.Event()
        """Set whenever a reservation is settled: a call waiting for room may fit now."""
        self.spent_before_usd = 0.0
        """What earlier sessions of the run spent (the journal's total when this one began)."""
        self.spent_now_usd = 0.0
        """What this session's calls cost (billed, or estimated)."""
        self._reserved: dict[Hashable, float] = {}
        self.reserved_usd = 0.0
        self.peak_committed_usd = 0.0
        self.refused = False
        """A reservation was refused: the budget stopped dispatch."""

    def open(self, spent_before_usd: float) -> None:
        """A session begins where the journal's spend stands."""
        self.spent_before_usd = spent_before_usd
        self.spent_now_usd = 0.0
        self.refused = False
        self.peak_committed_usd = max(self.peak_committed_usd, self.committed_usd)

    @property
    def spent_usd(self) -> float:
        return self.spent_before_usd + self.spent_now_usd

    @property
    def committed_usd(self) -> float:
        return self.spent_usd + self.reserved_usd

    def fits(self, worst_usd: float) -> bool:
        return self.budget_usd is None or self.committed_usd + worst_usd <= self.budget_usd + 1e-12

    def reserve(self, key: Hashable, worst_usd: float) -> bool:
        """Hold `worst_usd` for the call `key` (True), or refuse when it would pass the budget."""
        if not self.fits(worst_usd):
            self.refused = True
            return False
        self._drop(key)
        self._reserved[key] = worst_usd
        self.reserved_usd += worst_usd
        self.peak_committed_usd = max(self.peak_committed_usd, self.committed_usd)
        return True

    def settle(self, key: Hashable, cost_usd: float | None) -> None:
        """The call `key` ended and cost this (None: priced nowhere): its reservation goes back
        and its cost is spent, in one step."""
        held = key in self._reserved
        self._drop(key)
        if cost_usd:
            self.spent_now_usd += cost_usd
        self.peak_committed_usd = max(self.peak_committed_usd, self.committed_usd)
        if held:
            self.settled.set()

    async def room(self) -> None:
        """Wait until a call in flight settles (its worst case becomes what it cost)."""
        self.settled.clear()
        await self.settled.wait()

    def holds(self, key: Hashable) -> bool:
        return key in self._reserved

    def describe_wait(self) -> str:
        """Why a call waits for room: what is spent and held against the budget."""
        if self.budget_usd is None:
            return ""
        return f"${self.committed_usd:.4f} of ${self.budget_usd:g} spent or held by calls in flight"

    def _drop(self, key: Hashable) -> None:
        held = self._reserved.pop(key, None)
        if held is not None:
            self.reserved_usd = self.reserved_usd - held if self._reserved else 0.0  # no float dust left

    def report(self) -> BudgetReport | None:
        if self.budget_usd is None:
            return None
        return BudgetReport(self.budget_usd, self.spent_usd, max(self.peak_committed_usd, self.spent_usd), self.refused)
