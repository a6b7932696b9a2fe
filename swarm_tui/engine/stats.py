"""Live run statistics, built from engine events: counts, tokens, cost, latency, rates.

Shared by the headless progress line and the TUI footer. Every update is O(log n) or O(1)
(the latencies too: `SortedLatencies`) so that a listener never costs the engine more than a
few microseconds per event.

`in_flight` and `batch_waiting` are kept from the same events as the board's `live_calls` and
`batch_lines` (`core.board`, the owner of what is in flight; a test holds them equal at every
event of a run). They are counted here rather than read off a board because these figures are
also fed events no engine's board sees: the earlier sessions a resumed run's footer counts from
the journal's log, and the rows of an old journal a legacy view rebuilds events from.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import overload

from swarm_tui.core.call_errors import ANSWER_ERRORS, ErrorClass
from swarm_tui.core.events import (
    AgentStepped,
    Attempt,
    AttemptEnded,
    AttemptStarted,
    BatchSubmitted,
    EngineEvent,
    PhaseAttempt,
    RunFinished,
    RunStarted,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TasksAdded,
    TaskState,
    TaskSucceeded,
    ToolCallEnded,
)
from swarm_tui.core.lanes import CACHE, is_batch_endpoint
from swarm_tui.core.tiers import BATCH_TIER, BILLED_TIERS, DEFAULT
from swarm_tui.core.usage import Usage
from swarm_tui.pricing import cost_per_minute, projected_total

RATE_WINDOW_S = 10.0
MONEY_DUST_USD = 1e-12
"""Less than this is float dust left by subtracting sums of costs, not money."""
JUDGE_PHASE = "judge"
"""The phase of the judge's calls (`PhaseAttempt`)."""


def nearest_rank(sorted_values: Sequence[float], q: float) -> float | None:
    """The q-quantile of already sorted values (nearest rank); None when there are none."""
    if not sorted_values:
        return None
    return _rank(sorted_values, q)


def _rank(sorted_values: Sequence[float], q: float) -> float:
    """`nearest_rank` of values known not to be empty."""
    return sorted_values[min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))]


class SortedLatencies(Sequence[float]):
    """Every value added, kept sorted, for exact nearest-rank percentiles at any run size.

    A sorted list of short sorted buckets (the layout of `sortedcontainers.SortedList`): `add`
    finds its bucket by bisecting the buckets' maxima, O(log n), and inserts into a bucket of at
    most 2 x `LOAD` values (a bounded memmove), splitting it when full. A flat list with
    `bisect.insort` moved n/2 values per insert: O(n), 0.1 ms per answer at 100,000 answers.
    The k-th value is found through a Fenwick tree of the buckets' sizes, O(log n) too (an add
    counts itself in it; it is rebuilt only when a bucket splits, once per `LOAD` adds), so a
    percentile read right after each answer stays cheap at a million answers.
    Reads as a sorted list: `len`, `[i]`, `[a:b]`, iteration, `== list`.
    """

    LOAD = 512

    __slots__ = ("_buckets", "_maxes", "_len", "_sizes")

    def __init__(self, values: Iterable[float] = ()) -> None:
        self._buckets: list[list[float]] = []
        self._maxes: list[float] = []
        self._len = 0
        self._sizes: list[int] = [0]
        """Fenwick tree (1-based) of the buckets' sizes."""
        self._fill(values)

    def _fill(self, values: Iterable[float]) -> None:
        ordered = sorted(values)
        self._buckets = [ordered[i : i + self.LOAD] for i in range(0, len(ordered), self.LOAD)]
        self._maxes = [bucket[-1] for bucket in self._buckets]
        self._len = len(ordered)
        self._index()

    def _index(self) -> None:
        """Rebuild the Fenwick tree of bucket sizes: O(number of buckets)."""
        sizes = [0, *map(len, self._buckets)]
        for i in range(1, len(sizes)):
            parent = i + (i & -i)
            if parent < len(sizes):
                sizes[parent] += sizes[i]
        self._sizes = sizes

    def add(self, value: float) -> None:
        self._len += 1
        if not self._buckets:
            self._buckets.append([value])
            self._maxes.append(value)
            self._index()
            return
        at = bisect.bisect_right(self._maxes, value)
        if at == len(self._maxes):  # beyond every bucket's maximum: the last bucket grows
            at -= 1
            self._buckets[at].append(value)
            self._maxes[at] = value
        else:
            bisect.insort(self._buckets[at], value)
        bucket = self._buckets[at]
        if len(bucket) > 2 * self.LOAD:
            self._buckets.insert(at + 1, bucket[self.LOAD :])
            del bucket[self.LOAD :]
            self._maxes.insert(at, bucket[-1])
            self._index()
            return
        sizes, i = self._sizes, at + 1
        while i < len(sizes):
            sizes[i] += 1
            i += i & -i

    def _locate(self, index: int) -> tuple[list[float], int]:
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("latency index out of range")
        sizes, at = self._sizes, 0  # descend the tree: the last bucket whose prefix ends before index
        step = 1 << (len(sizes) - 1).bit_length()
        while step:
            if at + step < len(sizes) and sizes[at + step] <= index:
                at += step
                index -= sizes[at]
            step >>= 1
        return self._buckets[at], index

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> list[float]: ...

    def __getitem__(self, index: int | slice) -> float | list[float]:
        if isinstance(index, slice):
            return list(self)[index]
        bucket, offset = self._locate(index)
        return bucket[offset]

    def __setitem__(self, index: slice, values: Iterable[float]) -> None:
        """`latencies[:] = values`: replace every value (kept sorted); no other assignment."""
        if index != slice(None):
            raise TypeError("a sorted collection takes only `[:] = values`")
        self._fill(values)

    def clear(self) -> None:
        self._fill(())

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[float]:
        return chain.from_iterable(self._buckets)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SortedLatencies | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SortedLatencies({list(self)!r})"


def latency_summary(sorted_ms: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/p99/mean in ms, rounded to 0.1: the shape summary.json and shadow.json use."""
    if not sorted_ms:
        return {"p50": None, "p95": None, "p99": None, "mean": None}
    return {
        **{f"p{round(q * 100)}": round(_rank(sorted_ms, q), 1) for q in (0.5, 0.95, 0.99)},
        "mean": round(sum(sorted_ms) / len(sorted_ms), 1),
    }


@dataclass
class AnswerCounts:
    """What the answer checks did, as the footer counts it: answers that passed their checks, and
    the unusable ones by what they were and what followed (`engine.answers`)."""

    valid: int = 0
    """Answers kept that passed the job's checks (a job that checks nothing counts none)."""
    reasked: int = 0
    more_room: int = 0
    escalated: int = 0
    refused: int = 0
    """Refusals and filtered answers (`refusal`, `content_filter`)."""
    truncated: int = 0
    failed_checks: int = 0

    @property
    def any(self) -> bool:
        return bool(
            self.valid or self.reasked or self.escalated or self.refused or self.truncated or self.failed_checks
        )

    def unusable(self, attempt: Attempt) -> None:
        """An attempt whose answer came back unusable: its class, and what followed (its code)."""
        error = attempt.error
        assert error is not None
        if error.kind in (ErrorClass.REFUSAL, ErrorClass.CONTENT_FILTER):
            self.refused += 1
        elif error.kind is ErrorClass.TRUNCATED:
            self.truncated += 1
        else:
            self.failed_checks += 1
        if error.code == "reask":
            self.reasked += 1
        elif error.code == "more_room":
            self.more_room += 1
        elif error.code == "escalate":
            self.escalated += 1


@dataclass
class RunStats:
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    """Tasks left unfinished: those cut or cancelled, and once the run has stopped those it never
    started (they stay queued, with no event of their own: `left_queued`)."""
    left_queued: int = 0
    """The tasks never started that the last stop left (counted in `cancelled` until a run starts)."""
    in_flight: int = 0
    """Calls on the wire: each live attempt's, and the backups of hedged ones (`backups`)."""
    sent: int = 0
    retried: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    timeouts: int = 0
    hedged: int = 0
    steps: int = 0
    """Model calls of multi-step agents that asked for tools."""
    tool_calls: int = 0
    tool_errors: int = 0
    critical_path: int = 0
    """The most steps any agent has needed so far (its final answer counts as a step)."""
    usage: Usage = Usage()
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    """The part of `cost_usd` the judge's calls cost (shown apart)."""
    batch_cost_usd: float = 0.0
    """The part of `cost_usd` billed for batch lines (`--lane batch|auto`)."""
    estimated_cost_usd: float = 0.0
    """The part of `cost_usd` that is an estimate (no usage reported, or a call cut after it went out)."""
    tier_cost_usd: dict[str, float] = field(default_factory=dict)
    """The parts of `cost_usd` live calls were billed for at a tier other than the default
    (`flex`, `priority`: `Attempt.service_tier`); see `billed_tiers`."""
    batch_sent: int = 0
    batch_waiting: int = 0
    """Batch lines submitted whose answer has not come back yet (not counted `in_flight`)."""
    unpriced_attempts: int = 0
    cache_hits: int = 0
    """Tasks answered from the response cache (`--cache`): no call, cost 0."""
    cache_saved_usd: float = 0.0
    """What those answers cost when they were first paid for (not paid again)."""
    answers: AnswerCounts = field(default_factory=AnswerCounts)
    """What the answer checks did (re-asks are counted there, not in `retried`)."""
    started_at: float = field(default_factory=time.monotonic)
    latencies_ms: SortedLatencies = field(default_factory=SortedLatencies)
    """Latencies of successful attempts, sorted (a list's reads; `add` is O(log n))."""
    _recent: deque[tuple[float, int]] = field(default_factory=deque)
    """(time, tokens) of recent completions, for req/s and tok/s."""
    clock: Callable[[], float] = time.monotonic
    _ended_at: float | None = None
    """When the last run ended (its clock), until another starts."""
    _backup_calls: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    """Each hedged attempt whose two calls both run: its task and its backup's number (as the
    board's `backups`)."""

    @property
    def backups(self) -> int:
        """Backup calls on the wire beside their attempt's first call: counted `in_flight` (each is a
        call), holding no slot (a backup holds no one up), so the calls on the wire pass the
        in-flight limit by these alone."""
        return len(self._backup_calls)

    @property
    def in_flight_tasks(self) -> int:
        """Tasks whose attempt is a call on the wire: what holds the in-flight limit's slots."""
        return max(0, self.in_flight - len(self._backup_calls))

    def observe(self, event: EngineEvent) -> None:
        match event:
            case AttemptStarted(index=index, number=number, hedge=hedge):
                self.sent += 1
                self.in_flight += 1
                self.hedged += hedge
                if hedge:
                    self._backup_calls[index] = number
                else:
                    self._backup_calls.pop(index, None)
            case BatchSubmitted(indices=indices):
                self.batch_sent += len(indices)
                self.batch_waiting += len(indices)
            case AttemptEnded(attempt=attempt):
                self._call_ended(attempt)
            case PhaseAttempt(attempt=attempt) if attempt.endpoint == CACHE:
                self.cache_hits += 1  # a direct call (planner, aggregator, judge) replayed: nothing sent
                self.cache_saved_usd += attempt.saved_usd or 0.0
            case PhaseAttempt(phase=phase, attempt=attempt):
                self.sent += 1
                self.in_flight += 1  # balanced by _attempt_ended
                self._attempt_ended(attempt)
                if phase == JUDGE_PHASE and attempt.cost_usd is not None:
                    self.judge_cost_usd += attempt.cost_usd
            case TasksAdded(total=total):
                self.total = total
            case TaskSucceeded(attempt=attempt, checks=checks) if attempt.endpoint == CACHE:
                self.succeeded += 1  # a replay: nothing was in flight, sent or billed
                self.cache_hits += 1
                self.cache_saved_usd += attempt.saved_usd or 0.0
                self.answers.valid += bool(checks)
            case TaskSucceeded(attempt=attempt, checks=checks):
                self._call_ended(attempt)
                self.succeeded += 1
                self.answers.valid += bool(checks)
                if not is_batch_endpoint(attempt.endpoint):  # a batch line's hours are no call latency
                    self.latencies_ms.add(attempt.latency_ms)
            case AgentStepped(attempt=attempt, step=step):
                if attempt.endpoint == CACHE:  # a step replayed from the response cache: nothing sent
                    self.cache_hits += 1
                    self.cache_saved_usd += attempt.saved_usd or 0.0
                else:
                    self._call_ended(attempt)
                self.steps += 1
                self.critical_path = max(self.critical_path, step + 1)  # at least one call follows
            case ToolCallEnded(ok=ok):
                self.tool_calls += 1
                self.tool_errors += not ok
            case TaskRetrying(attempt=attempt) if attempt.error is not None and attempt.error.kind in ANSWER_ERRORS:
                self._call_ended(attempt)
                self.answers.unusable(attempt)  # asked again, given room or escalated: not a transport retry
            case TaskRetrying(attempt=attempt):
                self._call_ended(attempt)
                self.retried += 1
            case TaskFailed(attempt=attempt):
                self._call_ended(attempt)
                self.failed += 1
                if attempt.error is not None and attempt.error.kind in ANSWER_ERRORS:
                    self.answers.unusable(attempt)
            case TaskCancelled(index=index, attempt=attempt):
                self.cancelled += 1
                self._backup_calls.pop(index, None)
                if attempt is not None and is_batch_endpoint(attempt.endpoint):
                    self.batch_waiting = max(0, self.batch_waiting - 1)
                elif attempt is not None:
                    self.in_flight = max(0, self.in_flight - 1)
                    self._bill(attempt, batch=False)  # a call cut after it went out: its input, estimated
            case TaskQueued(previous=previous):
                if previous is TaskState.FAILED:
                    self.failed -= 1
                elif previous is TaskState.CANCELLED:
                    self.cancelled -= 1
            case RunStarted(total=total):
                self.cancelled -= self.left_queued  # they are this run's work again
                self.left_queued = 0
                if not self.total:
                    self.started_at = self.clock()
                elif self._ended_at is not None:  # started again (`r`, `p` after a stop): the idle gap is not run time
                    self.started_at += self.clock() - self._ended_at
                self._ended_at = None
                self.total = total
            case RunFinished(cancelled=unfinished):
                self._ended_at = self.clock()
                self.left_queued = max(0, unfinished - self.cancelled)
                self.cancelled += self.left_queued

    def _call_ended(self, attempt: Attempt) -> None:
        """A call of a task's attempt ended: whichever of a hedged pair it was, what runs on (if
        anything) is the attempt's one call (as the board's `_call_ended`)."""
        self._backup_calls.pop(attempt.index, None)
        self._attempt_ended(attempt)

    def _attempt_ended(self, attempt: Attempt) -> None:
        batch = is_batch_endpoint(attempt.endpoint)
        if batch:
            self.batch_waiting = max(0, self.batch_waiting - 1)
        else:
            self.in_flight = max(0, self.in_flight - 1)
        self._bill(attempt, batch)
        if attempt.error is not None:
            kind = attempt.error.kind
            if kind is ErrorClass.RATE_LIMIT:
                self.rate_limited += 1
            elif kind is ErrorClass.SERVER:
                self.server_errors += 1
            elif kind is ErrorClass.TIMEOUT:
                self.timeouts += 1
        if batch:
            return  # a whole file of lines arrives at once: no rate of the live calls
        now = self.clock()
        self._recent.append((now, attempt.usage.total))
        while self._recent and now - self._recent[0][0] > RATE_WINDOW_S:
            self._recent.popleft()

    def _bill(self, attempt: Attempt, batch: bool) -> None:
        """What an attempt cost (billed, or estimated: `estimated_cost_usd` says how much of it)."""
        self.usage = self.usage + attempt.usage
        if attempt.cost_usd is not None:
            self.cost_usd += attempt.cost_usd
            if batch:
                self.batch_cost_usd += attempt.cost_usd
            elif attempt.service_tier is not None:
                tiers = self.tier_cost_usd
                tiers[attempt.service_tier] = tiers.get(attempt.service_tier, 0.0) + attempt.cost_usd
            if attempt.estimated:
                self.estimated_cost_usd += attempt.cost_usd
        elif attempt.usage.total:
            self.unpriced_attempts += 1

    # ----------------------------------------------------------------- derived figures

    @property
    def done(self) -> int:
        return self.succeeded + self.failed

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self.started_at

    def percentile(self, q: float) -> float | None:
        return nearest_rank(self.latencies_ms, q)

    def forget_recent(self) -> None:
        """Keep the counts, drop the recent-rate window (req/s, tok/s): the answers a resumed run
        replays from its log count toward its totals, but they came before this session."""
        self._recent.clear()

    def rates(self) -> tuple[float, float]:
        """(requests/s, tokens/s) over the last few seconds."""
        if not self._recent:
            return 0.0, 0.0
        span = max(1.0, min(RATE_WINDOW_S, self.clock() - self._recent[0][0]))
        return len(self._recent) / span, sum(t for _, t in self._recent) / span

    def eta_s(self) -> float | None:
        remaining = self.total - self.done - self.cancelled
        if remaining <= 0:
            return 0.0
        if self.done == 0:
            return None
        return remaining * self.elapsed_s / self.done

    @property
    def cost_known(self) -> bool:
        return self.unpriced_attempts == 0

    def billed_tiers(self) -> dict[str, float]:
        """`cost_usd` by the tier it was billed at, in the order a bill shows them, those billed
        nothing left out: `default`, `flex`, `priority` (live calls), `batch` (the batch lane)."""
        live = self.cost_usd - self.batch_cost_usd
        special = self.tier_cost_usd
        split = {DEFAULT: live - sum(special.values()), **special, BATCH_TIER: self.batch_cost_usd}
        return {tier: usd for tier in BILLED_TIERS if (usd := split.get(tier, 0.0)) > MONEY_DUST_USD}

    def tier_label(self) -> str:
        """What the footer shows beside the cost: the tiers it was billed at when not only the
        default (`flex`; `flex 92% · default 8%`); '' for a run billed at the default tier alone."""
        tiers = self.billed_tiers()
        if not tiers or list(tiers) == [DEFAULT]:
            return ""
        if len(tiers) == 1:
            return next(iter(tiers))
        total = sum(tiers.values())
        return " · ".join(f"{tier} {usd / total:.0%}" for tier, usd in sorted(tiers.items(), key=lambda t: -t[1]))

    @property
    def cost_per_min_usd(self) -> float | None:
        """Spend rate since the run started; None when a price is unknown."""
        return cost_per_minute(self.cost_usd if self.cost_known else None, self.elapsed_s)

    @property
    def projected_cost_usd(self) -> float | None:
        """What the whole run will cost if the remaining tasks cost what the finished ones did."""
        remaining = self.total - self.done - self.cancelled
        return projected_total(self.cost_usd if self.cost_known else None, self.done, remaining)
