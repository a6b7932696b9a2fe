"""When a call that has not answered is a straggler: the tail deadlines of a run.

Three deadlines bound an attempt (README, "Deadlines"):

* the **hard timeout** (`--timeout`, default 60 s): an attempt never runs longer;
* the **straggler deadline**: once the run has `MIN_SAMPLES` answers, an attempt running past
  `STRAGGLER_FACTOR` x the p99 of the recent answers (at least `STRAGGLER_FLOOR_S`, never past
  the hard timeout) is abandoned and sent again as a new attempt. A hung call then holds its
  slot for about three slow answers, not for the whole timeout. It is a timeout of that attempt,
  not congestion: the adaptive limit does not shrink for it;
* the **streaming deadlines**: time to the first token (`--ttft-timeout`, tightened the same
  way from the recent first-token times) and the idle gap between chunks (`--idle-timeout`).

With `--hedge`, a call running past `hedge_factor` x the recent p95 gets a backup when the hedge
budget allows (at most 5% of requests, none while the provider pushes back); when it does not,
the call is abandoned and sent again instead, so a 429 never switches the tail's protection off.

The figures are recomputed as answers arrive (a sliding window of the last `WINDOW` answers),
so a call that hung before any answer existed is judged as soon as enough answers have come.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .stats import nearest_rank

STRAGGLER_CODE = "straggler"
"""The code of a timeout the engine called itself: an attempt abandoned past the straggler deadline."""

MIN_SAMPLES = 20
WINDOW = 200
STRAGGLER_FACTOR = 3.0
STRAGGLER_FLOOR_S = 1.0
HEDGE_FLOOR_S = 0.2
RECHECK_S = 0.5
"""How often an attempt without a deadline yet (or with one that may move) looks again."""


@dataclass(frozen=True, slots=True)
class _Figures:
    p95_s: float | None
    p99_s: float | None
    ttft_p99_s: float | None


class TailDeadlines:
    def __init__(self, hard_timeout_s: float, *, hedge_factor: float | None = None) -> None:
        self.hard_timeout_s = hard_timeout_s
        self.hedge_factor = hedge_factor
        self._latencies: deque[float] = deque(maxlen=WINDOW)
        self._first_tokens: deque[float] = deque(maxlen=WINDOW)
        self._figures: _Figures | None = None
        """The window's quantiles, sorted once per new answer, when first asked for."""
        self.abandoned = 0

    def observe(self, latency_s: float, ttft_s: float | None = None) -> None:
        """A successful answer (and, streamed, its time to first token)."""
        self._latencies.append(latency_s)
        if ttft_s is not None:
            self._first_tokens.append(ttft_s)
        self._figures = None

    def straggler_s(self) -> float | None:
        """Seconds after which a call without an answer is abandoned; None until enough answers."""
        return self._deadline(self._now().p99_s)

    def first_token_s(self) -> float | None:
        """The same rule for a streamed call's first token."""
        return self._deadline(self._now().ttft_p99_s)

    def hedge_s(self) -> float | None:
        """Seconds after which `--hedge` sends a backup (or abandons, when it may not)."""
        p95 = self._now().p95_s
        if self.hedge_factor is None or p95 is None:
            return None
        return min(self.hard_timeout_s, max(HEDGE_FLOOR_S, p95 * self.hedge_factor))

    def p99_s(self) -> float | None:
        return self._now().p99_s

    def _now(self) -> _Figures:
        if self._figures is None:
            latencies = _window(self._latencies)
            first_tokens = _window(self._first_tokens)
            self._figures = _Figures(
                nearest_rank(latencies, 0.95), nearest_rank(latencies, 0.99), nearest_rank(first_tokens, 0.99)
            )
        return self._figures

    def _deadline(self, p99: float | None) -> float | None:
        if p99 is None:
            return None
        deadline = max(STRAGGLER_FLOOR_S, p99 * STRAGGLER_FACTOR)
        return deadline if deadline < self.hard_timeout_s else None  # the hard timeout rules anyway

    def describe(self) -> dict:
        """The rule and its current figures, for summary.json and the run panel."""
        return {
            "hard_timeout_s": self.hard_timeout_s,
            "straggler_s": _round(self.straggler_s()),
            "straggler_rule": f"{STRAGGLER_FACTOR:g} x p99 of the last {WINDOW} answers (p99 now "
            f"{_round(self.p99_s())} s), at least {STRAGGLER_FLOOR_S:g} s, below the hard "
            f"timeout; from {MIN_SAMPLES} answers on",
            "first_token_s": _round(self.first_token_s()),
            "hedge_s": _round(self.hedge_s()),
            "abandoned": self.abandoned,
        }


def _window(values: deque[float]) -> list[float]:
    """The window, sorted; empty (no figures) until it holds MIN_SAMPLES answers."""
    return sorted(values) if len(values) >= MIN_SAMPLES else []


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
