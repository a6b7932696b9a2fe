"""Admission: may the next attempt be sent now?

An attempt goes out when the run is not paused nor suspended, the provider's Retry-After gate
is open, an in-flight slot is free under the current limit, and the RPM/TPM buckets have room
for it. The limit moves at run time (the user's `+`/`-`, or the adaptive controller). Only the
engine's dispatcher waits here, so a single "something changed" event is enough to wake it.
While the run is suspended (`engine.pacing.suspension`) nothing goes out but the one call a
probe lets through (`let_one_through`). `waiting_for` says what holds the next call now.
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
        self.suspended = False
        """The provider cannot serve the account now: nothing goes out but a probe's one call."""
        self._probe = False
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
        window = self.rate_limits.ramp_window
        if window is not None and self.in_flight >= window:  # the gentle start: an answer makes room
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
            if self.held:
                await self.until_changed(None)
                continue
            wait = self.room_wait_s(tokens)
            if wait is not None and wait <= 0:
                self.take(tokens)
                self.admitted()
                return True
            await self.until_changed(wait)

    @property
    def held(self) -> bool:
        """Suspended, with no probe's call to let through."""
        return self.suspended and not self._probe

    def admitted(self) -> None:
        """A call was admitted: a probe's one call is used."""
        self._probe = False

    def suspend(self) -> None:
        self.suspended, self._probe = True, False

    def let_one_through(self) -> None:
        """A probe of a suspended run: the next call may go (one)."""
        self._probe = True
        self.changed()

    def unsuspend(self) -> None:
        self.suspended, self._probe = False, False
        self.changed()

    def waiting_for(self, tokens: int = 0) -> tuple[str, float | None, str]:
        """What holds the next call of `tokens` now: (reason, how long at most when known, detail);
        reason "" when it may go. Reasons: paused, suspended, slot, gate, and the rate limits'
        (`RateLimits.blocker`: first_word, ramp, rpm, tpm)."""
        if self.paused:
            return "paused", None, ""
        if self.held:
            return "suspended", None, ""
        if self.in_flight >= self.limit:
            return "slot", None, f"{self.in_flight} of {self.limit} in flight"
        window = self.rate_limits.ramp_window
        if window is not None and self.in_flight >= window:
            return "ramp", None, f"{self.in_flight} in flight, growing with each clean answer"
        gate = self.gate.remaining_s
        if gate > 0:
            return "gate", gate, ""
        reason, wait = self.rate_limits.blocker(tokens)
        return reason, (wait if reason else None), ""

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
