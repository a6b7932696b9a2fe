"""Admission for one shard's engine, with the rate budget leased from the swarm's limiter.

`LeasedAdmission` is an `AdmissionController` (the engine cannot tell the difference): pause,
the in-flight limit (this shard's share, moved by the engine's own AIMD) and the Retry-After
gate stay local and instant; the RPM/TPM budget comes in leases from the limiter actor, a few
requests per round trip. A 429's Retry-After closes the local gate at once and the shared
one with it; the other shards learn of it at their next lease or state sync (every
`SYNC_S`). While no RPM/TPM limit is known anywhere, no lease is needed and admission costs no
round trip at all.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping

from swarm_tui.core.board import TaskBoard
from swarm_tui.distributed.budget import Grant
from swarm_tui.engine.pacing.admission import AdmissionController
from swarm_tui.engine.pacing.limits import LearnedLimits, RateLimits

LEASE_TTL_S = 1.0
"""Leased budget not used within this long is dropped (never saved up into a burst)."""

LeaseFn = Callable[..., Awaitable[Grant]]


class SharedRateLimits(RateLimits):
    """The engine's view of the shared RPM/TPM budget.

    The local buckets only mirror what is known (the engine sizes TPM reservations by whether a
    TPM limit is known); pacing itself is the limiter's. Give-backs (`settle`) and unleased sends
    (hedged backups, `take`) are kept and handed to the limiter with the next lease; learned
    limits are reported at once through `on_learned`.
    """

    estimates = False  # the limiter paces a distributed swarm

    def __init__(
        self,
        rpm: int | None = None,
        tpm: int | None = None,
        on_learned: Callable[[int | None, int | None], None] | None = None,
    ) -> None:
        super().__init__(rpm, tpm)
        self.on_learned = on_learned
        self.pending_settle = 0
        self.debt_requests = 0
        self.debt_tokens = 0

    def take(self, tokens: int) -> None:  # a hedged backup: sent without a lease, owed to the limiter
        self.debt_requests += 1
        self.debt_tokens += tokens

    def settle(self, reserved: int, used: int) -> None:
        if self.tokens is not None and reserved > used:
            self.pending_settle += reserved - used

    def learn(self, headers: Mapping[str, str], *, sent_since: int = 0) -> LearnedLimits | None:
        learned = super().learn(headers, sent_since=sent_since)
        if learned is not None and self.on_learned is not None:
            self.on_learned(learned.rpm, learned.tpm)
        return learned

    def adopt(self, rpm: int | None, tpm: int | None) -> LearnedLimits | None:
        """Limits another shard learned (from the limiter): known here too, without reporting back."""
        headers = {}
        if rpm and rpm != self.rpm:
            headers["x-ratelimit-limit-requests"] = str(rpm)
        if tpm and tpm != self.tpm:
            headers["x-ratelimit-limit-tokens"] = str(tpm)
        return super().learn(headers) if headers else None

    def take_pending(self) -> dict[str, int]:
        out = {
            "settle_tokens": self.pending_settle,
            "debt_requests": self.debt_requests,
            "debt_tokens": self.debt_tokens,
        }
        self.pending_settle = self.debt_requests = self.debt_tokens = 0
        return out


class LeasedAdmission(AdmissionController):
    def __init__(
        self,
        limit: int,
        *,
        rate_limits: SharedRateLimits,
        lease: LeaseFn,
        close_shared_gate: Callable[[float], None],
        clock=time.monotonic,
    ) -> None:
        super().__init__(limit, rate_limits=rate_limits, clock=clock)
        self.shared_limits = rate_limits
        self._lease_fn = lease
        self._close_shared_gate = close_shared_gate
        self._pool_requests = 0
        self._pool_tokens = 0
        self._pool_at = 0.0
        self.metered: bool | None = None
        """None until the limiter has answered once; False while no limit is known anywhere."""
        self.lease_calls = 0
        self.congestion_seen = 0

    async def acquire(self, tokens: int = 0) -> bool:
        while True:
            if self.closed:
                return False
            wait: float | None = None
            if not self.paused and not self.held and self.in_flight < self.limit:
                wait = self.gate_remaining_s
                if wait <= 0:
                    if (
                        self.metered is False
                        and self.shared_limits.requests is None
                        and self.shared_limits.tokens is None
                    ):
                        self.in_flight += 1
                        self.admitted()
                        return True
                    if self._take_from_pool(tokens):
                        self.in_flight += 1
                        self.admitted()
                        return True
                    grant = await self._lease(max(1, self.limit - self.in_flight), tokens)
                    if grant.requests:
                        continue
                    if self.metered is False:
                        continue
                    wait = max(grant.wait_s, grant.gate_s, 0.002)
            await self.until_changed(wait)

    def close_gate(self, seconds: float) -> bool:
        extended = super().close_gate(seconds)
        if extended:
            self._pool_requests = self._pool_tokens = 0  # the provider said stop: nothing saved goes out
            self._close_shared_gate(seconds)
        return extended

    def apply(self, grant: Grant) -> None:
        """What the limiter says about the swarm: gate, known limits, metering."""
        self.metered = grant.metered
        if grant.gate_s > 0:
            super().close_gate(grant.gate_s)
        if grant.rpm or grant.tpm:
            self.shared_limits.adopt(grant.rpm, grant.tpm)
        self.changed()

    def _take_from_pool(self, tokens: int) -> bool:
        if self._pool_requests <= 0:
            return False
        if self.clock() - self._pool_at > LEASE_TTL_S:
            self._pool_requests = self._pool_tokens = 0
            return False
        if self.shared_limits.tokens is not None and self._pool_tokens < tokens:
            return False
        self._pool_requests -= 1
        self._pool_tokens = max(0, self._pool_tokens - tokens)
        return True

    async def _lease(self, requests: int, tokens_each: int) -> Grant:
        self.lease_calls += 1
        grant = await self._lease_fn(requests, tokens_each, **self.shared_limits.take_pending())
        self.apply(grant)
        if grant.requests:
            self._pool_requests += grant.requests
            self._pool_tokens += grant.tokens
            self._pool_at = self.clock()
        return grant


class SwarmAdmission:
    """The driver's admission as the UI reads it: the swarm's limit, pause state and calls in flight
    (each shard admits its own calls, by `LeasedAdmission`)."""

    def __init__(self, limit: int, board: TaskBoard) -> None:
        self.limit = limit
        self.paused = False
        self.closed = False
        self.gate_remaining_s = 0.0
        self._board = board

    @property
    def in_flight(self) -> int:
        return self._board.live_tasks
