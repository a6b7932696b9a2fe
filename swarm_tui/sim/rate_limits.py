"""Rate limits: RPM and TPM token buckets, and OpenAI's way of saying when to come back.

``TokenBucket`` / ``RateLimiter``: continuous-refill buckets for RPM and TPM. A request is charged
1 request and ``prompt_tokens + max_tokens`` tokens (the answer length ceiling when max_tokens is
absent), like OpenAI, which reserves max_tokens up front. A refused request is not charged. See
``config.py`` for bucket capacity (``burst_s``). The clock is injected, so tests control time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TokenBucket", "Admission", "RateLimiter", "openai_duration", "retry_after_headers"]


class TokenBucket:
    """A continuous-refill token bucket; ``now`` is passed in so tests control time.

    ``capacity`` is what the bucket holds when full; it refills at ``rate`` per second.
    A cost above the capacity (but admitted by the caller's limit) is allowed when the
    bucket is full and leaves it in debt.
    """

    __slots__ = ("rate", "capacity", "level", "stamp")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.level = capacity
        self.stamp = now

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait_time(self, cost: float, now: float) -> float:
        """Seconds until ``cost`` could be taken (0 when it can be now)."""
        self._refill(now)
        need = min(cost, self.capacity)
        if self.level >= need - 1e-9:
            return 0.0
        return (need - self.level) / self.rate

    def take(self, cost: float, now: float) -> None:
        self._refill(now)
        self.level -= cost

    def remaining(self, now: float) -> int:
        self._refill(now)
        return max(0, int(self.level + 1e-9))

    def reset_s(self, now: float) -> float:
        """Seconds until the bucket is full again."""
        self._refill(now)
        return max(0.0, (self.capacity - self.level) / self.rate)


@dataclass(slots=True)
class Admission:
    ok: bool
    kind: str | None = None  # "requests" or "tokens" when refused
    wait_s: float = 0.0  # when refused: how long until it would be admitted
    too_large: bool = False  # a request costing more than the whole TPM limit
    limit: int = 0  # the refusing limit (per minute)
    used: int = 0  # what that minute's bucket has used, for the message


class RateLimiter:
    """RPM and TPM buckets together; answers "admit now" or "retry after X seconds"."""

    def __init__(
        self, rpm: int | None, tpm: int | None, burst_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.burst_s = burst_s
        self.clock = clock
        now = clock()
        self.requests = TokenBucket(rpm / 60.0, max(1.0, rpm / 60.0 * burst_s), now) if rpm else None
        self.tokens = TokenBucket(tpm / 60.0, max(1.0, tpm / 60.0 * burst_s), now) if tpm else None

    @property
    def active(self) -> bool:
        return self.requests is not None or self.tokens is not None

    def admit(self, tokens: int) -> Admission:
        """Charge one request of ``tokens`` tokens if both buckets allow it, else say why."""
        now = self.clock()
        rb, tb = self.requests, self.tokens
        if tb is not None and self.tpm is not None and tokens > self.tpm:
            return Admission(False, "tokens", 0.0, True, self.tpm, 0)
        if rb is not None:
            w = rb.wait_time(1, now)
            if w > 0:
                return Admission(False, "requests", w, False, self.rpm or 0, _used(rb, self.rpm or 0))
        if tb is not None:
            w = tb.wait_time(tokens, now)
            if w > 0:
                return Admission(False, "tokens", w, False, self.tpm or 0, _used(tb, self.tpm or 0))
        if rb is not None:
            rb.take(1, now)
        if tb is not None:
            tb.take(tokens, now)
        return Admission(True)

    def headers(self) -> dict[str, str]:
        """OpenAI's ``x-ratelimit-*`` headers for the configured limits.

        ``limit`` is the per-minute limit; ``remaining`` is what can be sent right now (the
        bucket's level, which ``burst_s`` caps below the per-minute limit); ``reset`` is how
        long until the bucket is full again.
        """
        if self.requests is None and self.tokens is None:
            return {}
        now = self.clock()
        h: dict[str, str] = {}
        if self.requests is not None:
            h["x-ratelimit-limit-requests"] = str(self.rpm)
            h["x-ratelimit-remaining-requests"] = str(self.requests.remaining(now))
            h["x-ratelimit-reset-requests"] = openai_duration(self.requests.reset_s(now))
        if self.tokens is not None:
            h["x-ratelimit-limit-tokens"] = str(self.tpm)
            h["x-ratelimit-remaining-tokens"] = str(self.tokens.remaining(now))
            h["x-ratelimit-reset-tokens"] = openai_duration(self.tokens.reset_s(now))
        return h


def _used(bucket: TokenBucket, limit: int) -> int:
    """The bucket's emptiness scaled to the per-minute limit, for the 429 message."""
    empty = 1.0 - max(bucket.level, 0.0) / bucket.capacity
    return min(limit, max(0, round(empty * limit)))


def openai_duration(seconds: float) -> str:
    """OpenAI's reset duration format: ``12ms``, ``1s``, ``2.4s``, ``6m0s``, ``1h2m3s``."""
    if seconds < 1.0:
        ms = math.ceil(seconds * 1000.0 - 1e-9)
        return f"{max(ms, 0)}ms"
    total = math.ceil(seconds * 1000.0 - 1e-9) / 1000.0
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    s = f"{secs:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{int(hours)}h{int(minutes)}m{s}s"
    if minutes:
        return f"{int(minutes)}m{s}s"
    return f"{s}s"


def retry_after_headers(wait_s: float) -> dict[str, str]:
    """A 429's ``retry-after`` (whole seconds) and ``retry-after-ms``, each at least 1."""
    return {"retry-after": str(max(1, math.ceil(wait_s))), "retry-after-ms": str(max(1, math.ceil(wait_s * 1000)))}
