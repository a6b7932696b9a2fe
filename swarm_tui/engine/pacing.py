"""Pacing: send as fast as the provider allows, and no faster.

Three mechanisms, each answering a different signal:

* `RateLimits` — RPM and TPM token buckets. Configured (`--rpm/--tpm`, the profile) or
  learned from the `x-ratelimit-limit-*` / `-remaining-*` headers most providers send. TPM
  reserves the prompt estimate + `max_tokens` at dispatch and gives back what `usage` shows
  was not used. Pacing at the known rate is what avoids 429s in the first place.
* `AdaptiveConcurrency` — AIMD on the in-flight limit, for what headers do not say. It starts
  small and slow-starts (+1 per clean busy completion, doubling per round trip) so the first
  burst does not outrun limits nobody has told us yet; after the first congestion it grows +1
  per window of clean, busy completions; ×`decrease` at most once per window on 429 / 503 /
  timeouts; other 5xx only pause growth. Bounded by a floor and the configured ceiling.
* The Retry-After gate lives in `AdmissionController`: one per provider, closed by any 429
  that says how long to wait.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Mapping

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


class RateLimits:
    """The RPM and TPM budget of one provider, shared by all its tasks."""

    BURST_S = 1.0
    """Bucket capacity in seconds of rate: a provider's own burst is unknown, so pace smoothly."""

    def __init__(self, rpm: int | None = None, tpm: int | None = None, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.rpm: int | None = None
        self.tpm: int | None = None
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        self.configured = (rpm, tpm)
        self._set(rpm, tpm)

    def _set(self, rpm: int | None, tpm: int | None) -> None:
        if rpm and rpm != self.rpm:
            self.requests = self._paced(self.requests, rpm)
            self.rpm = rpm
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

    def wait_s(self, tokens: int) -> float:
        waits = [0.0]
        if self.requests is not None:
            waits.append(self.requests.wait_s(1))
        if self.tokens is not None:
            waits.append(self.tokens.wait_s(tokens))
        return max(waits)

    def take(self, tokens: int) -> None:
        if self.requests is not None:
            self.requests.take(1)
        if self.tokens is not None:
            self.tokens.take(tokens)

    def settle(self, reserved: int, used: int) -> None:
        """Give back the part of a TPM reservation that `usage` shows was not used."""
        if self.tokens is not None and reserved > used:
            self.tokens.give_back(reserved - used)

    def learn(self, headers: Mapping[str, str]) -> LearnedLimits | None:
        """Adopt limits from `x-ratelimit-*` headers; returns the limits when they changed.

        A configured limit is a promise from the user and wins over what headers say.
        """
        if not headers:
            return None
        before = (self.rpm, self.tpm)
        rpm = self.configured[0] or _int(headers.get("x-ratelimit-limit-requests"))
        tpm = self.configured[1] or _int(headers.get("x-ratelimit-limit-tokens"))
        self._set(rpm, tpm)
        remaining_requests = _int(headers.get("x-ratelimit-remaining-requests"))
        if self.requests is not None and remaining_requests is not None:
            self.requests.sync_down(remaining_requests)
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

    INITIAL = 4

    def __init__(self, ceiling: int, *, floor: int | None = None, decrease: float = 0.7, min_window_s: float = 0.5,
                 clock: Clock = time.monotonic) -> None:
        self.ceiling = ceiling
        self.floor = min(floor if floor is not None else self.default_floor(ceiling), ceiling)
        self.limit = min(ceiling, self.INITIAL)
        self.slow_start = True
        self.decrease = decrease
        self.min_window_s = min_window_s
        self._clock = clock
        self._window_s = min_window_s
        self._last_decrease = -1e9
        self._clean_busy = 0
        self._growth_paused_until = 0.0

    @staticmethod
    def default_floor(ceiling: int) -> int:
        """A tenth of the ceiling: a burst of 503s should slow the swarm, not reduce it to one call
        at a time (the article's own rule only goes from 50 to 20)."""
        return max(1, ceiling // 10)

    def observe_latency(self, latency_s: float) -> None:
        """A window is about one round trip: no second decrease for the same congestion."""
        self._window_s = max(self.min_window_s, 0.8 * self._window_s + 0.2 * 2 * latency_s)

    def on_success(self, busy: bool) -> int | None:
        """A clean completion; returns the new limit when it grew."""
        if not busy or self.limit >= self.ceiling or self._clock() < self._growth_paused_until:
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

    def on_congestion(self) -> int | None:
        """429 / 503 / timeout; returns the new limit when it shrank (at most once per window)."""
        now = self._clock()
        self.slow_start = False
        self._clean_busy = 0
        self._growth_paused_until = now + self._window_s
        if now - self._last_decrease < self._window_s:
            return None
        self._last_decrease = now
        new = max(self.floor, int(self.limit * self.decrease))
        if new == self.limit:
            return None
        self.limit = new
        return new

    def on_server_error(self) -> None:
        """Other 5xx: not congestion we caused, but no time to push harder either."""
        self._clean_busy = 0
        self._growth_paused_until = self._clock() + self._window_s

    def set_ceiling(self, ceiling: int) -> None:
        """The user moved the limit (`+`/`-`): that is the new ceiling and the new limit."""
        self.ceiling = max(1, ceiling)
        self.floor = self.default_floor(self.ceiling)
        self.limit = self.ceiling
        self.slow_start = False
        self._clean_busy = 0
