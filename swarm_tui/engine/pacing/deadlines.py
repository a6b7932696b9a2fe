"""When a call that has not answered is a straggler: the tail deadlines of a run.

A guess never ends an attempt. Only these do (docs/guides/engine.md, "Deadlines, and backups that
never fail an answer"):

* the **hard timeout** (`--timeout`, default 60 s): a plain call never runs longer, nor does a
  streamed one wait longer for its first token;
* the **stream deadlines**: a streamed call's first token (`--ttft-timeout`) and the silence
  between two chunks (`--stream-idle`): a stream that stops mid-answer is cut within that gap, a
  stream that keeps sending is never cut, however long it writes.

What a call *should* take is a guess, learned per endpoint and model, and past it the call gets a
**backup** (a hedge) while it keeps running: the first answer wins, the other is cancelled and
journaled with its estimated cost. The guess:

* the **straggler deadline** (`--straggler`, default `auto` = `STRAGGLER_FACTOR`): FACTOR x what
  *that call* should take (a streamed call: its first token, FACTOR x the recent first tokens'
  p99). A hung call then gets its backup after about three of its own answer times, not the whole
  timeout; an answer slow for any other reason (a queue at the provider, a cold replica, a long
  prompt) is still waited for. Neither a failure of the endpoint (no failover counts it) nor
  congestion (the adaptive limit does not shrink for it);
* with `--hedge`, earlier: `hedge_factor` x the same figure at p95;
* at the run's **tail** (nothing waits in line, slots are free: a backup holds no one up),
  earlier still: `TAIL_HEDGE_FACTOR` x p95.

What a call should take is learned from the answers' latencies *and lengths*, because an answer
takes time in proportion to the tokens it writes: a task allowed 1,500 tokens is not late when
16-token answers of other tasks took 70 ms. Over the last `WINDOW` answers of that endpoint and
model (from `MIN_SAMPLES` of them on):

* a call allowed no more tokens than the longest answer seen (`ceiling <= T`) is judged by a
  least-squares line `latency = a + s x tokens` (s >= 0) at its ceiling, plus the quantile of
  the residuals: interpolation within what was measured;
* a call allowed more (`ceiling > T`) is judged by the longest answers' latencies scaled to its
  ceiling (`latency x ceiling / tokens`: as if every second of them were writing, an upper
  bound), never less than the line;
* a call that sets no `max_tokens` is never judged a straggler (nothing says how long it may
  write).

Backups are bounded (the live lane: at most 5% of requests, none while the provider pushes back
and work waits in line; at the idle tail, as its pace allows) and never count toward
`--max-attempts` or a failover.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from swarm_tui.core.call_errors import STRAGGLER_CODE
from swarm_tui.engine.stats import nearest_rank

__all__ = ["STRAGGLER_CODE", "TailDeadlines", "WorkTimes"]


MIN_SAMPLES = 20
WINDOW = 200
STRAGGLER_FACTOR = 3.0
STRAGGLER_FLOOR_S = 1.0
HEDGE_FLOOR_S = 0.2
RECHECK_S = 0.5
"""How often an attempt without a deadline yet (or with one that may move) looks again."""

REFIT_EVERY = 16
"""The figures are refitted every this many answers (a fit walks the whole window: at thousands
of answers a second, once per answer would cost more than the rest of the engine); always while
the window is still small."""

TAIL_HEDGE_FACTOR = 2.0
"""At the run's tail a backup goes after this many times what a call takes at p95."""

LONGEST_SHARE = 0.25
"""A call allowed more than any answer wrote is judged by the longest quarter of the answers."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer as the deadlines learn from it."""

    latency_s: float
    tokens: int
    """Completion tokens it wrote (reasoning included)."""


class WorkTimes:
    """How long answers of one endpoint and model take, by the tokens they write."""

    def __init__(self) -> None:
        self.answers: deque[Answer] = deque(maxlen=WINDOW)
        self._memo: dict[tuple[int, float], float | None] = {}
        self._fit: tuple[float, float, list[float]] | None = None
        """(a, s, sorted residuals) of the current window, computed when first asked for."""
        self._since_fit = 0

    def observe(self, latency_s: float, tokens: int) -> None:
        self.answers.append(Answer(latency_s, max(0, tokens)))
        self._since_fit += 1
        if self._since_fit >= REFIT_EVERY or len(self.answers) <= 2 * MIN_SAMPLES:
            self._memo.clear()
            self._fit = None
            self._since_fit = 0

    def expected_s(self, ceiling: int, q: float) -> float | None:
        """The q-quantile of how long a healthy call allowed `ceiling` tokens takes; None until
        the window holds `MIN_SAMPLES` answers."""
        key = (ceiling, q)
        if key not in self._memo:
            self._memo[key] = self._expected(ceiling, q)
        return self._memo[key]

    def tokens_per_s(self) -> float | None:
        """The writing rate the line says (None while answers do not say: all as long)."""
        if len(self.answers) < MIN_SAMPLES:
            return None
        _, slope, _ = self._line()
        return 1.0 / slope if slope > 0 else None

    def overhead_s(self) -> float | None:
        """The line's time before the first token is written (its intercept)."""
        if len(self.answers) < MIN_SAMPLES:
            return None
        return max(0.0, self._line()[0])

    def longest(self) -> int:
        return max((a.tokens for a in self.answers), default=0)

    def _expected(self, ceiling: int, q: float) -> float | None:
        answers = self.answers
        if len(answers) < MIN_SAMPLES:
            return None
        intercept, slope, residuals = self._line()
        line = intercept + slope * ceiling + (nearest_rank(residuals, q) or 0.0)
        longest = self.longest()
        if ceiling <= longest:
            return max(line, 0.0)
        by_length = sorted(answers, key=lambda a: a.tokens)
        top = by_length[-max(1, int(len(by_length) * LONGEST_SHARE)) :]
        scaled = sorted(a.latency_s * ceiling / max(1, a.tokens) for a in top)
        return max(line, nearest_rank(scaled, q) or 0.0)

    def _line(self) -> tuple[float, float, list[float]]:
        if self._fit is None:
            xs = [a.tokens for a in self.answers]
            ys = [a.latency_s for a in self.answers]
            n = len(xs)
            mean_x, mean_y = sum(xs) / n, sum(ys) / n
            var = sum((x - mean_x) ** 2 for x in xs)
            slope = (
                max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var) if var else 0.0
            )
            intercept = mean_y - slope * mean_x
            residuals = sorted(y - (intercept + slope * x) for x, y in zip(xs, ys, strict=True))
            self._fit = (intercept, slope, residuals)
        return self._fit


class TailDeadlines:
    """The run's tail deadlines, per endpoint and model (see the module docstring)."""

    def __init__(
        self,
        hard_timeout_s: float,
        *,
        hedge_factor: float | None = None,
        straggler_factor: float | None = STRAGGLER_FACTOR,
    ) -> None:
        self.hard_timeout_s = hard_timeout_s
        self.hedge_factor = hedge_factor
        self.straggler_factor = straggler_factor
        """None: no straggler deadline (`--straggler off`)."""
        self._work: dict[str, WorkTimes] = {}
        self._first_tokens: deque[float] = deque(maxlen=WINDOW)
        self._ttft_p99: float | None = None
        self._ttft_stale = False
        self._ceilings: deque[int] = deque(maxlen=WINDOW)
        self._last_work = ""
        self.abandoned = 0

    def observe(
        self,
        latency_s: float,
        ttft_s: float | None = None,
        *,
        tokens: int = 0,
        ceiling: int | None = None,
        work: str = "",
    ) -> None:
        """A successful answer: its latency, tokens written and the ceiling its call had (and,
        streamed, its time to first token); `work`: its endpoint and model."""
        times = self._work.get(work)
        if times is None:
            times = self._work[work] = WorkTimes()
        times.observe(latency_s, tokens)
        self._last_work = work
        if ceiling is not None:
            self._ceilings.append(ceiling)
        if ttft_s is not None:
            self._first_tokens.append(ttft_s)
            self._ttft_stale = True

    def straggler_s(self, ceiling: int | None, work: str | None = None) -> float | None:
        """Seconds after which a call allowed `ceiling` tokens (`work`: its endpoint and model; by
        default the last answered), without an answer, is abandoned; None: no deadline but the
        hard timeout (too few answers yet, no ceiling, or switched off)."""
        if self.straggler_factor is None or ceiling is None:
            return None
        expected = self._expected(ceiling, work, 0.99)
        if expected is None:
            return None
        deadline = max(STRAGGLER_FLOOR_S, expected * self.straggler_factor)
        return deadline if deadline < self.hard_timeout_s else None  # the hard timeout rules anyway

    def hedge_s(self, ceiling: int | None, work: str | None = None) -> float | None:
        """Seconds after which `--hedge` sends a backup (or abandons, when it may not)."""
        if self.hedge_factor is None or ceiling is None:
            return None
        expected = self._expected(ceiling, work, 0.95)
        if expected is None:
            return None
        return min(self.hard_timeout_s, max(HEDGE_FLOOR_S, expected * self.hedge_factor))

    def tail_hedge_s(self, ceiling: int | None, work: str | None = None) -> float | None:
        """Seconds after which a call gets its backup at the run's tail (slots idle)."""
        if ceiling is None:
            return None
        expected = self._expected(ceiling, work, 0.95)
        if expected is None:
            return None
        deadline = max(HEDGE_FLOOR_S, expected * TAIL_HEDGE_FACTOR)
        return deadline if deadline < self.hard_timeout_s else None

    def expected_s(self, ceiling: int | None, work: str | None = None) -> float | None:
        """What a healthy call allowed `ceiling` tokens takes at p95 (None: not known yet)."""
        if ceiling is None:
            return None
        return self._expected(ceiling, work, 0.95)

    def first_token_expected_s(self) -> float | None:
        """The recent first tokens' p99 (None until `MIN_SAMPLES` of them)."""
        if self._ttft_stale:
            self._ttft_p99 = nearest_rank(_window(self._first_tokens), 0.99)
            self._ttft_stale = False
        return self._ttft_p99

    def first_token_s(self) -> float | None:
        """The straggler rule for a streamed call's first token (3 x p99 of recent first tokens)."""
        if self.straggler_factor is None:
            return None
        if self._ttft_stale:
            self._ttft_p99 = nearest_rank(_window(self._first_tokens), 0.99)
            self._ttft_stale = False
        if self._ttft_p99 is None:
            return None
        deadline = max(STRAGGLER_FLOOR_S, self._ttft_p99 * self.straggler_factor)
        return deadline if deadline < self.hard_timeout_s else None

    def typical_straggler_s(self) -> float | None:
        """The straggler deadline of the run's typical call (the ceiling most answers had), for
        the run panel."""
        return self.straggler_s(self.typical_ceiling())

    def _expected(self, ceiling: int, work: str | None, q: float) -> float | None:
        times = self._work.get(self._last_work if work is None else work)
        return times.expected_s(ceiling, q) if times is not None else None

    def typical_ceiling(self) -> int | None:
        """The ceiling most of the recent answers' calls had."""
        if not self._ceilings:
            return None
        counts: dict[int, int] = {}
        for ceiling in self._ceilings:
            counts[ceiling] = counts.get(ceiling, 0) + 1
        return max(counts, key=counts.__getitem__)

    def describe(self) -> dict[str, object]:
        """The rule and its current figures, for summary.json and the run panel."""
        factor = self.straggler_factor
        rule = (
            "off (--straggler off): only the hard timeout"
            if factor is None
            else f"{factor:g} x what the call should take at its max_tokens, learned per endpoint and model "
            f"from the last {WINDOW} answers' latencies and lengths (from {MIN_SAMPLES} answers on); at least "
            f"{STRAGGLER_FLOOR_S:g} s, below the hard timeout; past it the call gets a backup, never cut; a call "
            "without max_tokens only has the hard timeout"
        )
        ceiling = self.typical_ceiling()
        return {
            "hard_timeout_s": self.hard_timeout_s,
            "straggler_factor": factor,
            "straggler_s": _round(self.typical_straggler_s()),
            "straggler_rule": rule,
            "typical_max_tokens": ceiling,
            "by_model": {
                work: {
                    "answers": len(times.answers),
                    "tokens_per_s": _round(times.tokens_per_s()),
                    "overhead_s": _round(times.overhead_s()),
                    "longest_answer_tokens": times.longest(),
                    "straggler_s": _round(self.straggler_s(ceiling, work)) if ceiling is not None else None,
                }
                for work, times in self._work.items()
            },
            "first_token_s": _round(self.first_token_s()),
            "hedge_s": _round(self.hedge_s(ceiling)),
            "abandoned": self.abandoned,
            "hedge_rule": "a guess never ends an attempt: past its straggler deadline (earlier with --hedge, and at "
            f"the run's tail: {TAIL_HEDGE_FACTOR:g} x p95) a call gets one backup and keeps running; the first "
            "answer wins",
        }


def _window(values: deque[float]) -> list[float]:
    """The window, sorted; empty (no figures) until it holds MIN_SAMPLES answers."""
    return sorted(values) if len(values) >= MIN_SAMPLES else []


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
