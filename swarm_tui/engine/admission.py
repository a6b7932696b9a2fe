"""Admission: may the next attempt be sent now?

An attempt goes out when the run is not paused, the provider's Retry-After gate is open, an
in-flight slot is free under the current limit, and the RPM/TPM buckets have room for it. The
limit moves at run time (the user's `+`/`-`, or the adaptive controller). Only the engine's
dispatcher waits here, so a single "something changed" event is enough to wake it.
"""

from __future__ import annotations

import asyncio
import time

from .pacing import RateLimits, RetryAfterGate


class AdmissionController:
    def __init__(self, limit: int, *, rate_limits: RateLimits | None = None, clock=time.monotonic) -> None:
        if limit < 1:
            raise ValueError("the concurrency limit must be at least 1")
        self.limit = limit
        self.in_flight = 0
        self.paused = False
        self.closed = False
        """Set when the run stops: `acquire` then returns False at once."""
        self.gate = RetryAfterGate(clock)
        self._clock = clock
        self.rate_limits = rate_limits or RateLimits(clock=clock)
        self._changed = asyncio.Event()

    @property
    def gate_remaining_s(self) -> float:
        return self.gate.remaining_s

    async def acquire(self, tokens: int = 0) -> bool:
        """Wait for a slot and take it with `tokens` of TPM budget (True), or return False once
        admission is closed."""
        while True:
            if self.closed:
                return False
            if not self.paused and self.in_flight < self.limit:
                wait = max(self.gate.remaining_s, self.rate_limits.wait_s(tokens))
                if wait <= 0:
                    self.in_flight += 1
                    self.rate_limits.take(tokens)
                    return True
            else:
                wait = None
            self._changed.clear()
            try:
                async with asyncio.timeout(wait):
                    await self._changed.wait()
            except TimeoutError:
                pass

    def release(self) -> None:
        self.in_flight -= 1
        self._changed.set()

    def set_limit(self, limit: int) -> int:
        self.limit = max(1, limit)
        self._changed.set()
        return self.limit

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._changed.set()

    def close_gate(self, seconds: float) -> bool:
        """Hold every dispatch for `seconds`; True when this extended the gate."""
        return self.gate.close(seconds)

    def close(self) -> None:
        self.closed = True
        self._changed.set()

    def reopen(self) -> None:
        self.closed = False
