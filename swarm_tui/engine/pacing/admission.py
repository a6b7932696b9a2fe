"""Admission: may the next attempt be sent now?

An attempt goes out when the run is not paused, the provider's Retry-After gate is open, an
in-flight slot is free under the current limit, and the RPM/TPM buckets have room for it. The
limit moves at run time (the user's `+`/`-`, or the adaptive controller). Only the engine's
dispatcher waits here, so a single "something changed" event is enough to wake it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from swarm_tui.engine.pacing.limits import RateLimits, RetryAfterGate


class AdmissionController:
    def __init__(
        self, limit: int, *, rate_limits: RateLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1:
            raise ValueError("the concurrency limit must be at least 1")
        self.limit = limit
        self.in_flight = 0
        self.paused = False
        self.closed = False
        """Set when the run stops: `acquire` then returns False at once."""
        self.gate = RetryAfterGate(clock)
        self.clock = clock
        self.rate_limits = rate_limits or RateLimits(clock=clock)
        self._changed = asyncio.Event()
        self._followers: list[Callable[[], None]] = []

    @property
    def gate_remaining_s(self) -> float:
        return self.gate.remaining_s

    @property
    def paces_tokens(self) -> bool:
        """A TPM limit is known: each call reserves its token estimate."""
        return self.rate_limits.tokens is not None

    def room_wait_s(self, tokens: int) -> float | None:
        """0 when a call of `tokens` may go now; else how long until the gate or the rate budget
        has room (None: no slot is free, or the run is paused, until something changes)."""
        if self.paused or self.in_flight >= self.limit:
            return None
        return max(0.0, self.gate.remaining_s, self.rate_limits.wait_s(tokens))

    def take(self, tokens: int) -> None:
        """Take a slot and `tokens` of TPM budget (after `room_wait_s` said 0)."""
        self.in_flight += 1
        self.rate_limits.take(tokens)

    async def acquire(self, tokens: int = 0) -> bool:
        """Wait for a slot and take it with `tokens` of TPM budget (True), or return False once
        admission is closed."""
        while True:
            if self.closed:
                return False
            wait = self.room_wait_s(tokens)
            if wait is not None and wait <= 0:
                self.take(tokens)
                return True
            await self.until_changed(wait)

    async def until_changed(self, timeout_s: float | None) -> None:
        """Wait until something admission waits on changes (`changed`), or `timeout_s` passes."""
        self._changed.clear()
        try:
            async with asyncio.timeout(timeout_s):
                await self._changed.wait()
        except TimeoutError:
            pass

    def release(self) -> None:
        self.in_flight -= 1
        self.changed()

    def changed(self) -> None:
        """Something that admission waits on changed: look again (and tell who follows it)."""
        self._changed.set()
        for follower in self._followers:
            follower()

    def on_change(self, follower: Callable[[], None]) -> None:
        """Call `follower` whenever this admission may have room again (a route's admission
        follows its doors')."""
        self._followers.append(follower)

    def set_limit(self, limit: int) -> int:
        self.limit = max(1, limit)
        self.changed()
        return self.limit

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self.changed()

    def close_gate(self, seconds: float) -> bool:
        """Hold every dispatch for `seconds`; True when this extended the gate."""
        return self.gate.close(seconds)

    def close(self) -> None:
        self.closed = True
        self._changed.set()

    def reopen(self) -> None:
        self.closed = False
