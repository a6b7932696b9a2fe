"""One provider's rate budget, shared by every engine of a distributed swarm (no Ray in here).

The limiter actor (`limiter.py`) wraps a `SharedBudget`; the engines' admission
(`admission.py`) asks it for *leases*: permission for a few requests (and their TPM
reservation) at once, so that an attempt costs a round trip to the limiter only every few
requests, never one each. What a lease grants is taken from the same `RateLimits` buckets
the single-process engine uses, so the swarm as a whole never sends faster than one engine
would: requests sent <= requests leased <= bucket capacity + rate x time.

Also shared here: the Retry-After gate (a 429 on any shard closes it for all), the limits
learned from `x-ratelimit-*` headers, and a congestion counter the shards watch so that a
429 seen by one shard slows the others' adaptive concurrency too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from swarm_tui.engine.pacing.limits import Clock, RateLimits, RetryAfterGate

LEASE_WINDOW_S = 0.05
"""A lease holds at most this many seconds of the provider's rate (at least one request), so
that no shard sits on budget another one could use."""


@dataclass(frozen=True, slots=True)
class Grant:
    requests: int
    """Requests granted now (each with `tokens_each` of TPM reservation)."""
    tokens: int
    wait_s: float
    """When nothing was granted: how long until asking again makes sense."""
    gate_s: float
    """Seconds the provider's Retry-After gate stays closed."""
    metered: bool
    """False while no RPM/TPM limit is known: admission then needs no lease at all."""
    rpm: int | None
    tpm: int | None
    congestion: int
    """How many congestion signals (429/503) the swarm has seen so far."""


class _SwarmRateLimits(RateLimits):
    BURST_S = 0.5
    """Half the burst one process keeps: a lease reaches the provider later than it was granted
    (another machine, a busy actor), so sends bunch up; the smaller burst is the margin for that
    (measured: 1.3-1.9% 429s on 2 actors at 6,000 RPM on a loaded 2-core machine with 1 s)."""
    gentle_start = False  # the shards' answers are not seen here: their engines ramp on their own


class SharedBudget:
    def __init__(self, rpm: int | None = None, tpm: int | None = None, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.limits = _SwarmRateLimits(rpm, tpm, clock=clock)
        self.gate = RetryAfterGate(clock)
        self.congestion = 0
        self.leased_requests = 0
        self.lease_calls = 0

    @property
    def gate_remaining_s(self) -> float:
        return self.gate.remaining_s

    @property
    def metered(self) -> bool:
        return self.limits.requests is not None or self.limits.tokens is not None

    def lease(
        self,
        requests: int,
        tokens_each: int = 0,
        *,
        settle_tokens: int = 0,
        debt_requests: int = 0,
        debt_tokens: int = 0,
    ) -> Grant:
        """Grant up to `requests` requests of `tokens_each` tokens, as many as the buckets hold now.

        `settle_tokens`: TPM reserved earlier that `usage` showed was not used (given back);
        `debt_*`: what a shard sent without a lease (hedged backups), taken now.
        """
        self.lease_calls += 1
        if settle_tokens and self.limits.tokens is not None:
            self.limits.tokens.give_back(settle_tokens)
        if debt_requests or debt_tokens:
            if self.limits.requests is not None and debt_requests:
                self.limits.requests.take(debt_requests)
            if self.limits.tokens is not None and debt_tokens:
                self.limits.tokens.take(debt_tokens)
        gate = self.gate_remaining_s
        if gate > 0 or not self.metered or requests <= 0:
            return self._grant(0, 0, gate, gate)
        cap = requests
        if self.limits.requests is not None:
            cap = min(cap, max(1, int(self.limits.requests.rate * LEASE_WINDOW_S)))
        if self.limits.tokens is not None and tokens_each > 0:
            cap = min(cap, max(1, int(self.limits.tokens.rate * LEASE_WINDOW_S / tokens_each)))
        granted = 0
        while granted < cap and self.limits.wait_s(tokens_each) <= 0:
            self.limits.take(tokens_each)
            granted += 1
        self.leased_requests += granted
        wait = 0.0 if granted else self._batch_wait_s(cap, tokens_each)
        return self._grant(granted, granted * tokens_each, wait, 0.0)

    def _batch_wait_s(self, requests: int, tokens_each: int) -> float:
        """How long until a lease of `requests` could be granted whole: a shard that found the bucket
        empty comes back for a batch, not for every single request (the bucket keeps what refills)."""
        wait = self.limits.wait_s(tokens_each)
        bucket = self.limits.requests
        if bucket is not None:
            wait = max(wait, (min(requests, bucket.capacity) - bucket.level) / bucket.rate)
        return wait

    def close_gate(self, seconds: float) -> bool:
        """A 429 said to wait: every shard holds dispatch until then. True when this extended it."""
        return self.gate.close(seconds)

    def note_congestion(self) -> int:
        self.congestion += 1
        return self.congestion

    def learn(self, rpm: int | None, tpm: int | None, headers: Mapping[str, str] | None = None) -> None:
        """Limits a shard learned (or was configured with): the swarm paces at them from now on."""
        merged = dict(headers or {})
        if rpm:
            merged.setdefault("x-ratelimit-limit-requests", str(rpm))
        if tpm:
            merged.setdefault("x-ratelimit-limit-tokens", str(tpm))
        had = (self.limits.requests is not None, self.limits.tokens is not None)
        self.limits.learn(merged)
        # A limit learned mid-run: the shards' first sends (before anyone knew it) have used the
        # provider's burst, and no shard knows what the others sent, so a new bucket starts
        # empty and fills at the rate (a full one let 2% of a 1,000-task run's requests hit 429s).
        for known_before, bucket in zip(had, (self.limits.requests, self.limits.tokens), strict=True):
            if bucket is not None and not known_before and not self.limits.configured_any:
                bucket.level = min(bucket.level, 0.0)

    def state(self) -> Grant:
        gate = self.gate_remaining_s
        return self._grant(0, 0, gate, gate)

    def _grant(self, requests: int, tokens: int, wait_s: float, gate_s: float) -> Grant:
        return Grant(requests, tokens, wait_s, gate_s, self.metered, self.limits.rpm, self.limits.tpm, self.congestion)
