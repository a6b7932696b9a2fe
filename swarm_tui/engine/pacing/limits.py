"""Pacing: send as fast as the provider allows, and no faster.

Three mechanisms, each answering a different signal:

* `RateLimits` — RPM and TPM token buckets. Configured (`--rpm/--tpm`, the profile) or
  learned from the `x-ratelimit-limit-*` / `-remaining-*` headers most providers send. TPM
  reserves the prompt estimate + `max_tokens` at dispatch and gives back what `usage` shows
  was not used. Pacing at the known rate is what avoids 429s in the first place. A provider
  that states no limit (many relays, local servers) still answers 429 past it: then the RPM is
  *estimated* and probed the way TCP CUBIC probes a path: the estimate starts at what got
  through in the last second; the rate being sent when the 429 came is remembered as the
  ceiling; each clean second closes half the gap to that ceiling (then +5% past it); a 429 of a
  request sent after the last cut cuts x0.85 (the 429s of requests already under way then are
  the same congestion).
  Without it, a 429 whose Retry-After is a few milliseconds is retried at once into the next
  429, and the swarm spends its attempts on its own storm.
  Where no limit is stated, the start is **gentle**: the first request goes alone (its answer
  may state the limits), then the calls in flight ramp as TCP's slow start does: `RAMP_START`,
  then one more for each clean answer (the window doubles each round trip; a failure gives its
  place back without growing it), until a limit is learned (headers, a 429's estimate) or the
  window passes `RAMP_END`. A provider that states
  its limits only on its 429s (many relays) then meets the first one with a few calls in flight,
  not with the whole window.
* `AdaptiveConcurrency` — AIMD on the in-flight limit, for what headers do not say. It starts
  at a quarter of the ceiling and slow-starts (+1 per clean busy completion: the limit doubles
  per round trip, so the ceiling is reached within two) until the first real congestion signal;
  then it grows +1 per window of clean, busy completions. What counts as congestion, as TCP
  and the source article see it:
    - a rate limit (429, or any answer with Retry-After): ×`decrease` at most once per window,
      down to a tenth of the ceiling (an unknown limit is probed this way);
    - overload (503 saying "overloaded", 529, timeouts while answers slow down overall) when it
      is sustained (over `OVERLOAD_SHARE` of the recent attempts): ×`decrease` at most once
      per window, never below 40% of the ceiling (the article's 50 -> 20);
    - nothing else: a 500 or 502 is a fault of the server, not of our sending rate. It is
      retried and counted by the circuit breaker, and leaves the limit alone.
  Bounded by the floor and the configured ceiling.
* The Retry-After gate lives in `AdmissionController`: one per provider, closed by any 429
  that says how long to wait.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Clock = Callable[[], float]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str | None) -> float | None:
    """OpenAI's reset durations (`6m0s`, `1s`, `12ms`, `1h2m3.5s`) or plain seconds, in seconds."""
    if not text:
        return None
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            return None
        value, unit = float(match.group(1)), match.group(2)
        total += value * {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}[unit]
        pos = match.end()
    return total if pos == len(text) and pos > 0 else None


class TokenBucket:
    """Continuous refill at `rate` per second up to `capacity`; the level may go negative
    (a reservation larger than what is left is allowed once the bucket is full, so a single
    large request is never starved)."""

    def __init__(self, rate: float, capacity: float, clock: Clock = time.monotonic) -> None:
        self.rate = rate
        self.capacity = capacity
        self._clock = clock
        self.level = capacity
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = now

    def wait_s(self, amount: float) -> float:
        """Seconds until `amount` can be taken (0 when it can be now)."""
        self._refill()
        needed = min(amount, self.capacity)
        if self.level >= needed - 1e-9:  # float dust is not a reason to sleep
            return 0.0
        return (needed - self.level) / self.rate

    def take(self, amount: float) -> None:
        self._refill()
        self.level -= amount

    def give_back(self, amount: float) -> None:
        self._refill()
        self.level = min(self.capacity, self.level + amount)

    def sync_down(self, remaining: float) -> None:
        """The provider says only `remaining` is left: never believe we have more than that."""
        self._refill()
        self.level = min(self.level, remaining)

    def set_rate(self, rate: float, capacity: float) -> None:
        self._refill()
        self.rate = rate
        self.level = min(self.level, capacity)
        self.capacity = capacity


class RetryAfterGate:
    """A provider said "wait" (429 + Retry-After): nothing goes out before the gate reopens.
    One per provider — per process in `AdmissionController`, per swarm in the Ray limiter."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._until = 0.0

    @property
    def remaining_s(self) -> float:
        return max(0.0, self._until - self._clock())

    def close(self, seconds: float) -> bool:
        """Hold dispatch for `seconds` from now; True when this extended the gate."""
        until = self._clock() + seconds
        if until <= self._until:
            return False
        self._until = until
        return True


@dataclass(frozen=True, slots=True)
class LearnedLimits:
    rpm: int | None
    tpm: int | None
    estimated: bool = False
    """The RPM is estimated from 429s (the provider states none)."""


class RateLimits:
    """The RPM and TPM budget of one provider, shared by all its tasks."""

    BURST_S = 1.0
    """Bucket capacity in seconds of rate: a provider's own burst is unknown, so pace smoothly."""
    PROBE_WINDOW_S = 1.0
    PROBE_CUT = 0.85
    PROBE_GROWTH = 0.05
    PROBE_FLOOR_PER_S = 1.0
    estimates = True
    """Estimate an RPM from 429s when none is stated (a distributed swarm's limiter paces instead)."""
    FIRST_WORD_S = 0.5
    """With no limit known, the first request goes alone and the rest wait up to this for its answer:
    most providers state their limits in its headers, and a blind first burst past a small limit
    (600 RPM holds 10 requests a second) is answered 429 by the dozen."""

    gentle_start = True
    """Ramp the first window where no limit is known (the swarm's limiter leases, it does not ramp)."""
    RAMP_START = 4
    """The gentle start's first window, after the first answer."""
    RAMP_END = 4096
    """Past this many calls a round trip the ramp is not what holds a run back: it ends."""

    def __init__(self, rpm: int | None = None, tpm: int | None = None, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._ramp_clean = 0
        self.rpm: int | None = None
        self.tpm: int | None = None
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        self.configured = (rpm, tpm)
        self.heard = any(self.configured)
        """A call has ended (answered, refused or failed): what it said of the limits is known."""
        self.first_sent_at: float | None = None
        self.estimated = False
        """The RPM is an estimate from 429s, not a limit the user or the provider stated."""
        self._answered: deque[float] = deque()
        self._sent: deque[float] = deque()
        self._ceiling_hint = 0.0
        """Requests per second being sent when the last 429 came: where congestion began."""
        self._last_cut = -1e9
        self._last_growth = -1e9
        self._set(rpm, tpm)

    @property
    def configured_any(self) -> bool:
        """The user stated a limit (`--rpm`/`--tpm`, the profile): nothing was sent before it was known."""
        return any(self.configured)

    def _set(self, rpm: int | None, tpm: int | None) -> None:
        if rpm and (rpm != self.rpm or self.estimated):
            self.requests = self._paced(self.requests, rpm)
            self.rpm = rpm
            self.estimated = False
        if tpm and tpm != self.tpm:
            self.tokens = self._paced(self.tokens, tpm)
            self.tpm = tpm

    def _paced(self, bucket: TokenBucket | None, per_minute: int) -> TokenBucket:
        """A bucket refilling at `per_minute` / 60 a second, holding BURST_S seconds of it."""
        rate = per_minute / 60.0
        capacity = max(1.0, rate * self.BURST_S)
        if bucket is None:
            return TokenBucket(rate, capacity, self._clock)
        bucket.set_rate(rate, capacity)
        return bucket

    @property
    def ramp_window(self) -> int | None:
        """The gentle start's in-flight window (`RAMP_START` + one per clean answer: it doubles each
        round trip); None once it holds nothing back (a limit is known, or the window is wide)."""
        if not (self.estimates and self.gentle_start and self.requests is None and self.tokens is None):
            return None
        window = self.RAMP_START + self._ramp_clean
        return window if window < self.RAMP_END else None

    def wait_s(self, tokens: int) -> float:
        return self.blocker(tokens)[1]

    def blocker(self, tokens: int) -> tuple[str, float]:
        """What holds the next call of `tokens` and for how long at most: ("", 0) when it may go;
        `first_word` (the first answer is awaited), `rpm` or `tpm` (the bucket refills). The gentle
        start's window is the admission's to hold (it counts what is in flight)."""
        reason, wait = "", 0.0
        if not self.heard and self.estimates and self.first_sent_at is not None:  # the first word first
            reason, wait = "first_word", self.first_sent_at + self.FIRST_WORD_S - self._clock()
        if self.requests is not None:
            rpm_wait = self.requests.wait_s(1)
            if rpm_wait > wait:
                reason, wait = "rpm", rpm_wait
        if self.tokens is not None:
            tpm_wait = self.tokens.wait_s(tokens)
            if tpm_wait > wait:
                reason, wait = "tpm", tpm_wait
        return (reason, wait) if wait > 0 else ("", 0.0)

    def take(self, tokens: int) -> None:
        if self.first_sent_at is None:
            self.first_sent_at = self._clock()
        if self.estimates and (self.rpm is None or self.estimated):  # the sending rate, for a 429's ceiling
            now = self._clock()
            self._sent.append(now)
            self._forget(self._sent, now)
        if self.requests is not None:
            self.requests.take(1)
        if self.tokens is not None:
            self.tokens.take(tokens)

    def note_answer(self) -> LearnedLimits | None:
        """A request got through; while the RPM is an estimate, a clean second raises it a little.
        Returns the limits when the estimate moved."""
        now = self._clock()
        self._ramp_clean += 1
        self._answered.append(now)
        self._forget(self._answered, now)
        if (
            not self.estimated
            or self.requests is None
            or now - max(self._last_cut, self._last_growth) < self.PROBE_WINDOW_S
        ):
            return None
        self._last_growth = now
        rate = self.requests.rate
        if rate < 0.95 * self._ceiling_hint:
            return self._estimate(rate + (self._ceiling_hint - rate) / 2)
        return self._estimate(rate + max(0.5, rate * self.PROBE_GROWTH))

    def on_rate_limited(self, sent_at: float | None = None) -> LearnedLimits | None:
        """A 429 while no RPM is stated: pace at what got through in the last second, or cut the
        estimate, once for the requests sent since the last cut (`sent_at`: when this one was
        sent, on this clock). Returns the limits when the estimate moved."""
        self.heard = True
        if not self.estimates or (self.rpm and not self.estimated):
            return None
        now = self._clock()
        if sent_at is not None and sent_at < self._last_cut:
            return None
        if sent_at is None and now - self._last_cut < self.PROBE_WINDOW_S:
            return None
        self._last_cut = now
        self._forget(self._sent, now)
        self._forget(self._answered, now)
        if self.estimated and self.requests is not None:
            self._ceiling_hint = max(self.requests.rate, 0.9 * self._ceiling_hint)
            rate = max(self.PROBE_FLOOR_PER_S, self.requests.rate * self.PROBE_CUT)
        else:
            self._ceiling_hint = len(self._sent) / self.PROBE_WINDOW_S
            # what got through lately; at least one a second: with nothing answered yet (a small
            # run, a first burst) it knows nothing, and an estimate near zero would stall the run
            rate = max(self.PROBE_FLOOR_PER_S, len(self._answered) / self.PROBE_WINDOW_S)
        learned = self._estimate(rate)
        assert self.requests is not None
        self.requests.level = min(self.requests.level, 0.0)  # the provider's bucket is empty now: no burst
        return learned

    def _forget(self, times: deque[float], now: float) -> None:
        while times and now - times[0] > self.PROBE_WINDOW_S:
            times.popleft()

    def _estimate(self, rate_per_s: float) -> LearnedLimits:
        rpm = max(1, round(rate_per_s * 60))
        self.requests = self._paced(self.requests, rpm)
        self.rpm = rpm
        self.estimated = True
        return LearnedLimits(self.rpm, self.tpm, estimated=True)

    def settle(self, reserved: int, used: int) -> None:
        """Give back the part of a TPM reservation that `usage` shows was not used."""
        if self.tokens is not None and reserved > used:
            self.tokens.give_back(reserved - used)

    def learn(self, headers: Mapping[str, str], *, sent_since: int = 0) -> LearnedLimits | None:
        """Adopt limits from `x-ratelimit-*` headers; returns the limits when they changed.

        A configured limit is a promise from the user and wins over what headers say. The
        provider counted `remaining-requests` when the request arrived; the `sent_since`
        requests sent after it (a burst in flight when the first answer arrives) take from that.
        When it arrived is unknown (somewhere between its send and its answer), so no refill
        since then is counted: a bucket believed a little low delays one request by
        milliseconds, one believed high costs a 429 (measured: crediting the whole latency
        gave 1 429 in 60 requests on a busy machine; 0 in 20 runs without it).
        """
        self.heard = True
        if not headers:
            return None
        before = (self.rpm, self.tpm)
        rpm = self.configured[0] or _int(headers.get("x-ratelimit-limit-requests"))
        tpm = self.configured[1] or _int(headers.get("x-ratelimit-limit-tokens"))
        self._set(rpm, tpm)
        remaining_requests = _int(headers.get("x-ratelimit-remaining-requests"))
        if self.requests is not None and remaining_requests is not None:
            self.requests.sync_down(remaining_requests - sent_since)
        remaining_tokens = _int(headers.get("x-ratelimit-remaining-tokens"))
        if self.tokens is not None and remaining_tokens is not None:
            self.tokens.sync_down(remaining_tokens)
        if (self.rpm, self.tpm) != before:
            return LearnedLimits(self.rpm, self.tpm)
        return None


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


class AdaptiveConcurrency:
    """AIMD on the in-flight limit (see module docstring)."""

    MIN_INITIAL = 4
    OVERLOAD_SHARE = 0.05
    """Overload answers among the recent attempts above which they are congestion, not noise."""
    OVERLOAD_WINDOW = 100
    OVERLOAD_MIN_SAMPLE = 20
    OVERLOAD_FLOOR_SHARE = 0.4
    """Overload never takes the limit below this share of the ceiling (the article: 50 -> 20)."""

    def __init__(
        self,
        ceiling: int,
        *,
        floor: int | None = None,
        decrease: float = 0.7,
        min_window_s: float = 0.5,
        clock: Clock = time.monotonic,
    ) -> None:
        self.ceiling = ceiling
        self.floor = min(floor if floor is not None else self.default_floor(ceiling), ceiling)
        self.limit = self.initial(ceiling)
        self.slow_start = True
        self.decrease = decrease
        self.min_window_s = min_window_s
        self._clock = clock
        self._window_s = min_window_s
        self._last_decrease = -1e9
        self._clean_busy = 0
        self._recent_overload: deque[bool] = deque(maxlen=self.OVERLOAD_WINDOW)

    @classmethod
    def initial(cls, ceiling: int) -> int:
        """Half the ceiling: doubling per round trip, the ceiling is reached within two (a quarter
        cost the 100-agent demo 1.23x its fixed-limit makespan, half 1.07x; limits a provider
        states in x-ratelimit-* headers are paced from the first answer on anyway)."""
        return min(ceiling, max(cls.MIN_INITIAL, -(-ceiling // 2)))

    @staticmethod
    def default_floor(ceiling: int) -> int:
        """A tenth of the ceiling: a storm of 429s should slow the swarm, not reduce it to one
        call at a time."""
        return max(1, ceiling // 10)

    @property
    def overload_share(self) -> float:
        recent = self._recent_overload
        return sum(recent) / len(recent) if recent else 0.0

    def observe_latency(self, latency_s: float) -> None:
        """A window is about one round trip: no second decrease for the same congestion."""
        self._window_s = max(self.min_window_s, 0.8 * self._window_s + 0.2 * 2 * latency_s)

    def on_success(self, busy: bool) -> int | None:
        """A clean completion; returns the new limit when it grew."""
        self._recent_overload.append(False)
        if not busy or self.limit >= self.ceiling:
            return None
        if self.slow_start:
            self.limit += 1
            return self.limit
        self._clean_busy += 1
        if self._clean_busy < self.limit:
            return None
        self._clean_busy = 0
        self.limit += 1
        return self.limit

    def on_congestion(self, late: int = 0) -> int | None:
        """A rate limit (429, Retry-After); returns the new limit when it shrank (at most once per
        window). `late`: calls in flight past their deadline with nothing from them (hung): they
        hold slots the provider does not serve, so the decrease cuts the served part only and
        leaves theirs (else a few hung calls would take the slots the cut left, and starve the run)."""
        self._recent_overload.append(False)
        return self._decrease(self.floor, late)

    def on_overload(self) -> int | None:
        """503 "overloaded" / 529 / a timeout on a congested latency curve: congestion only when
        sustained; returns the new limit when it shrank."""
        self._recent_overload.append(True)
        if len(self._recent_overload) < self.OVERLOAD_MIN_SAMPLE or self.overload_share <= self.OVERLOAD_SHARE:
            return None
        return self._decrease(max(self.floor, math.ceil(self.ceiling * self.OVERLOAD_FLOOR_SHARE)))

    def on_other_failure(self) -> None:
        """A failure that says nothing about load (500, 502, a refused request): no change."""
        self._recent_overload.append(False)

    def _decrease(self, floor: int, late: int = 0) -> int | None:
        now = self._clock()
        self.slow_start = False
        self._clean_busy = 0
        if now - self._last_decrease < self._window_s:
            return None
        self._last_decrease = now
        late = min(max(0, late), self.limit - 1)
        served = self.limit - late
        new = min(self.ceiling, max(min(floor, served), int(served * self.decrease)) + late)
        if new == self.limit:
            return None
        self.limit = new
        return new

    def set_ceiling(self, ceiling: int) -> None:
        """The user moved the limit (`+`/`-`): that is the new ceiling and the new limit."""
        self.ceiling = max(1, ceiling)
        self.floor = self.default_floor(self.ceiling)
        self.limit = self.ceiling
        self.slow_start = False
        self._clean_busy = 0
