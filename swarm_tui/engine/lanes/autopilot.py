"""The autopilot (`--deadline`, with or without `--budget`): which tasks go live and which as
provider batches, decided from what the run has measured, and said before it is too late.

The model is small and every figure in it is measured in the run:

* the live rate: what the live lane sustains, `min(ceiling / p50 latency, RPM / 60)` (its
  in-flight ceiling over the median answer, bounded by the provider's learned or told RPM);
* the batch turnaround: the last batch's submit-to-end time, once one has ended (until then it is
  unknown: the provider promises 24 h);
* what a task costs live (the live share's spend per answer) and as a batch line (that at the
  batch rate of the model's price row).

The plan (`plan`), made once the live share has answered and again when a batch ends:

* a batch that has turned around within the time left (with a margin) takes every task still
  queued: the cheapest lane that keeps the deadline;
* with no turnaround known, every task the live lane could still do before the deadline goes
  to a batch too (it costs half), and each such batch has a pull-back time: the latest moment the
  live lane alone could still run its tasks by the deadline. A batch not ended by then is
  cancelled and its unrun lines are sent live (`BatchLane`'s planner hooks). Tasks the live lane
  cannot do by the deadline in any case stay in batches, and the plan says they ride on its
  turnaround;
* a plan that cannot keep the deadline or the budget says so, with the numbers, in a
  `PlanChanged` (feasible false): when the job ends at the measured pace, and what would be
  needed.

Nothing in flight or in a batch is ever sent again by a plan, and the budget stays the ledger's:
a plan never lets a call pass it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from swarm_tui.core.batches import BatchRow
from swarm_tui.core.events import PlanChanged
from swarm_tui.util.clock import run_time

if TYPE_CHECKING:
    from swarm_tui.engine.engine import SwarmEngine
    from swarm_tui.pricing import Price

MARGIN = 0.85
"""The share of its measured rate the live lane is counted on for (answers vary, limits move)."""
TURNAROUND_MARGIN = 1.5
"""A batch is trusted with a deadline when its last turnaround x this fits in the time left."""
POLL_S = 2.0
"""How often a deadline run's batches are polled (a pull-back must not wait for a 60 s poll)."""
CANCEL_SHARE = 0.25
"""Until a cancel has been seen to end, how long one is assumed to take: this share of the time the
batch had to its deadline (a provider's cancel takes minutes; the lines it still runs must not be
sent live too)."""
BATCH_SHARE = 0.5
"""A batch line's price against a live call's, when the model's price row has no batch rates."""


@dataclass(frozen=True)
class Measured:
    """What the plan is made from (see the module doc)."""

    live_per_s: float | None
    turnaround_s: float | None
    live_cost: float | None
    batch_cost: float | None
    rpm: int | None = None


@dataclass(frozen=True)
class Plan:
    live: int
    batch: int
    finish_s: float | None
    """Seconds from now the plan is projected to end in (None: it rides on an unknown turnaround)."""
    cost_usd: float | None
    feasible: bool
    why: str


def plan(remaining: int, time_left_s: float, measured: Measured, budget_left: float | None) -> Plan:
    """The split of `remaining` tasks between the live lane and batches (see the module doc)."""
    rate = measured.live_per_s
    live_can = int(rate * max(0.0, time_left_s) * MARGIN) if rate else 0
    turnaround = measured.turnaround_s
    live_alone_s = remaining / rate if rate else math.inf
    if turnaround is not None and turnaround * TURNAROUND_MARGIN <= time_left_s:
        live, batch, finish = 0, remaining, turnaround
        why = f"a batch turned around in {turnaround:.0f}s: every queued task goes as a batch"
    elif turnaround is not None:  # batches are too slow for what is left: live takes what it can
        live = remaining
        batch = 0
        finish = live_alone_s
        why = f"the last batch took {turnaround:.0f}s, more than the {time_left_s:.0f}s left: live only"
    elif live_can >= remaining:  # not known yet, and live has slack: batches, pulled back in time if late
        live, batch, finish = 0, remaining, None
        why = (
            f"no batch turnaround known yet: {remaining:,} tasks go as batches, pulled back to live while "
            f"the live lane alone ({_rate(rate, measured.rpm)}) could still run them by the deadline"
        )
    else:  # not known yet, and live cannot do them all: live takes what it can, the rest ride on batches
        live, batch, finish = live_can, remaining - live_can, None
        why = (
            f"at the measured {_rate(rate, measured.rpm)} the live lane runs {live:,} of the {remaining:,} tasks by "
            f"the deadline (all of them would take {_span(live_alone_s)}, {_span(time_left_s)} are left); the other "
            f"{batch:,} ride on a batch turnaround not known yet (the provider promises 24 h); to be sure of the "
            f"deadline allow {_span(live_alone_s / MARGIN)}"
        )
    cost = _cost(live, batch, measured)
    feasible = finish is None or finish <= time_left_s
    if not feasible:
        why += (
            f"; at the measured {_rate(rate, measured.rpm)} the job ends in {_span(finish or live_alone_s)}, past the "
            f"deadline ({_span(time_left_s)} left): allow {_span((finish or live_alone_s) / MARGIN)}"
        )
    if budget_left is not None and cost is not None and cost > budget_left:
        cheapest = _cost(0, remaining, measured) or cost
        feasible = False
        why += (
            f"; the plan costs ≈${cost:.4f} and the budget leaves ${budget_left:.4f}: raise the budget to "
            f"${cost:.4f}"
            + (f" (all as batches ≈${cheapest:.4f}, with more time)" if cheapest < cost else "")
            + "; dispatch stops at the budget, the rest left unfinished"
        )
    return Plan(live, batch, finish, cost, feasible, why)


def _cost(live: int, batch: int, measured: Measured) -> float | None:
    if measured.live_cost is None:
        return None
    batch_cost = measured.batch_cost if measured.batch_cost is not None else measured.live_cost * BATCH_SHARE
    return live * measured.live_cost + batch * batch_cost


def _rate(rate: float | None, rpm: int | None) -> str:
    if not rate:
        return "an unknown rate"
    return f"{rate * 60:,.0f} tasks a minute" + (f" ({rpm:,} RPM)" if rpm else "")


def _span(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "an unknown time"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Autopilot:
    """The planner hooks of a deadline run's batch lane (`engine.ports.Planner`)."""

    poll_s = POLL_S

    def __init__(self, engine: SwarmEngine, deadline_at: float, price: Price | None) -> None:
        """`price`: the primary endpoint's (what a task costs live, and as a batch line)."""
        self.engine = engine
        self.price = price
        self.deadline_at = deadline_at
        """Epoch seconds (`--deadline`)."""
        self.turnaround_s: float | None = None
        self.cancel_s: float | None = None
        """How long the last pulled-back batch took to cancel (None: none seen yet)."""
        self._pull_at: dict[str, float] = {}
        self._pulled_at: dict[str, float] = {}

    # ----------------------------------------------------------------- what has been measured

    def measured(self) -> Measured:
        engine = self.engine
        p50_ms = engine.stats.percentile(0.5)
        ceiling = engine.adaptive.ceiling if engine.adaptive is not None else engine.admission.limit
        rpm = engine.rate_limits.rpm
        rates = [r for r in (ceiling / (p50_ms / 1000) if p50_ms else None, rpm / 60 if rpm else None) if r]
        answered = max(1, engine.stats.succeeded)
        price = self.price
        live_cost = engine.ledger.spent_usd / answered if price is not None else None
        batch_cost = None
        if live_cost is not None and price is not None and price.has_batch and price.output:
            batch_cost = live_cost * (price.batch_output or 0.0) / price.output
        return Measured(min(rates) if rates else None, self.turnaround_s, live_cost, batch_cost, rpm)

    def _plan(self, remaining: int) -> Plan:
        ledger = self.engine.ledger
        budget_left = None if ledger.budget_usd is None else max(0.0, ledger.budget_usd - ledger.committed_usd)
        return plan(remaining, self.deadline_at - run_time(), self.measured(), budget_left)

    def _say(self, made: Plan, reason: str) -> None:
        finish_at = run_time() + made.finish_s if made.finish_s is not None else None
        self.engine.outbox.emit(
            PlanChanged(
                made.live,
                made.batch,
                round(finish_at, 3) if finish_at is not None else None,
                round(made.cost_usd, 6) if made.cost_usd is not None else None,
                self.deadline_at,
                made.feasible,
                f"{reason}: {made.why}",
            )
        )

    # ----------------------------------------------------------------- the batch lane's hooks

    def split(self, pending: Sequence[int]) -> tuple[list[int], list[int]]:
        """The live share has answered: (the tasks for batches, those for the live lane)."""
        made = self._plan(len(pending))
        self._say(made, "the live share answered")
        return list(pending[made.live :]), list(pending[: made.live])  # the live lane's go first

    def pull_back_due(self, row: BatchRow) -> bool:
        """The batch must come back to the live lane now: live alone could not run its tasks by
        the deadline any later (never for a batch the live lane could not have run in time anyway)."""
        assert row.batch_id is not None
        if (
            self.turnaround_s is not None
            and self.turnaround_s * TURNAROUND_MARGIN <= self.deadline_at - row.submitted_at
        ):
            return False  # batches turn around in time here: let it
        pull_at = self._pull_at.get(row.batch_id)
        if pull_at is None:
            rate = self.measured().live_per_s
            if not rate:
                return False
            cancel_s = (
                self.cancel_s if self.cancel_s is not None else CANCEL_SHARE * (self.deadline_at - row.submitted_at)
            )
            pull_at = self.deadline_at - len(row.tasks) / (rate * MARGIN) - self.poll_s - cancel_s
            self._pull_at[row.batch_id] = pull_at
        if pull_at <= row.submitted_at or run_time() < pull_at:
            return False
        rate = self.measured().live_per_s or 0.0
        left = self.deadline_at - run_time()
        self._pulled_at[row.batch_id] = run_time()
        self.engine.outbox.emit(
            PlanChanged(
                len(row.tasks),
                0,
                round(run_time() + len(row.tasks) / rate, 3) if rate else None,
                None,
                self.deadline_at,
                True,
                f"batch {row.batch_id} has not ended with {_span(left)} left, the latest the live lane alone "
                f"({_rate(rate, self.engine.rate_limits.rpm)}) can still run its {len(row.tasks):,} tasks once the "
                "provider has cancelled it: cancelled, its unrun lines sent live",
            )
        )
        return True

    def batch_ended(self, row: BatchRow, status: str) -> list[int]:
        """A batch ended: its turnaround is known; the tasks still queued live that a batch now
        carries in time (and cheaper) are taken back from the live queue for the next batch."""
        pulled_at = self._pulled_at.pop(row.batch_id or "", None)
        if pulled_at is not None:
            self.cancel_s = run_time() - pulled_at
        if status != "completed":
            return []
        self.turnaround_s = max(0.0, run_time() - row.submitted_at)
        queued = self.engine.queue.untried(self.engine.numbers.tried)
        if not queued:
            return []
        made = self._plan(len(queued))
        if made.batch == 0:
            self._say(made, f"a batch ended in {self.turnaround_s:.0f}s")
            return []
        taken = self.engine.queue.take(queued[: made.batch])
        self._say(made, f"a batch ended in {self.turnaround_s:.0f}s")
        return taken


def deadline_at(text: str, now: datetime | None = None) -> float:
    """`--deadline` as epoch seconds: a span (`90s`, `20m`, `2h`) from now, or a clock time today
    (`09:00`, tomorrow when it has passed). ValueError when it is neither."""
    now = now or datetime.now().astimezone()
    if ":" in text:
        hours, _, minutes = text.partition(":")
        if not (hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60):
            raise ValueError(f"not a clock time (HH:MM): {text!r}")
        at = now.replace(hour=int(hours), minute=int(minutes), second=0, microsecond=0)
        if at <= now:
            at = datetime.fromtimestamp(at.timestamp() + 86400, tz=at.tzinfo)
        return at.timestamp()
    units = {"s": 1, "m": 60, "h": 3600}
    scale = units.get(text[-1:].lower())
    try:
        value = float(text[:-1] if scale else text)
    except ValueError:
        raise ValueError(f"not a span (90s, 20m, 2h) nor a clock time (09:00): {text!r}") from None
    if value <= 0 or not math.isfinite(value):
        raise ValueError(f"must be after now: {text!r}")
    return now.timestamp() + value * (scale or 1)
