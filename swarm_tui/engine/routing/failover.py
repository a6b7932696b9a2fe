"""Circuit breaker between the primary endpoint and its fallback.

Closed: every attempt goes to the primary. When server errors, timeouts and connection errors
pass `threshold` (the article's 1%) of the primary's recent attempts — over a sliding window,
once there are `min_sample` of them to judge — or `outage_run` of them come in a row (an
outage should not wait for a sample), or at once on an auth / quota error, the breaker opens and
new attempts go to the fallback. After a cool-down one probe goes to the primary (half-open): its
success closes the breaker, its failure doubles the cool-down. Only the probe's answer counts
while it is open: a call sent before it opened that answers late says nothing about recovery.
A breaker forced open (the judge saw quality drop) stays open for the run: a probe can tell an
endpoint answers again, not that its answers are good again.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from enum import StrEnum

from swarm_tui.core.call_errors import ACCOUNT_ERRORS, CallError, ErrorClass


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        *,
        threshold: float = 0.01,
        window: int = 300,
        min_sample: int = 100,
        outage_run: int = 5,
        cooldown_s: float = 10.0,
        max_cooldown_s: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        subject: str = "the primary",
        elsewhere: str = "the fallback",
    ) -> None:
        """`subject` and `elsewhere`: how its reasons name the endpoint it watches and where new
        attempts go while it is open (a route's door and the route's next doors)."""
        self.subject = subject
        self.elsewhere = elsewhere
        self.threshold = threshold
        self.min_sample = min_sample
        self.outage_run = outage_run
        self._bad_run = 0
        self.base_cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s
        self.state = BreakerState.CLOSED
        self._outcomes: deque[bool] = deque(maxlen=window)
        self._cooldown_s = cooldown_s
        self._reopen_at = 0.0
        self._probe_in_flight = False
        self._clock = clock

    def use_primary(self) -> bool:
        """Where the next attempt goes; in half-open state, exactly one probe goes to the primary."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN and self._clock() >= self._reopen_at:
            self.state = BreakerState.HALF_OPEN
        if self.state is BreakerState.HALF_OPEN and not self._probe_in_flight:
            self._probe_in_flight = True
            return True
        return False

    def admits(self) -> bool:
        """A call may go through now (closed, or the half-open probe is due and none is out); it
        changes nothing but the time-driven move from open to half-open (see `note_sent`)."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN and self._clock() >= self._reopen_at:
            self.state = BreakerState.HALF_OPEN
        return self.state is BreakerState.HALF_OPEN and not self._probe_in_flight

    def note_sent(self) -> None:
        """A call went through (`admits` said so): in half-open state, it is the one probe."""
        if self.state is BreakerState.HALF_OPEN:
            self._probe_in_flight = True

    def on_primary_result(self, error: CallError | None) -> str | None:
        """Record an attempt on the primary; returns a reason when this switched endpoints."""
        if self.state is not BreakerState.CLOSED:
            if not (self.state is BreakerState.HALF_OPEN and self._probe_in_flight):
                return None  # sent before it opened: not the probe
            self._probe_in_flight = False
            if error is None:
                self.state = BreakerState.CLOSED
                self._outcomes.clear()
                self._cooldown_s = self.base_cooldown_s
                return f"{self.subject} answered the probe: back to {self.subject}"
            self._cooldown_s = min(self.max_cooldown_s, self._cooldown_s * 2)
            self._open()
            return None
        bad = error is not None and (error.kind in (ErrorClass.SERVER, ErrorClass.TIMEOUT, ErrorClass.CONNECTION))
        if error is not None and error.kind in ACCOUNT_ERRORS:
            self._open()
            status = f" {error.status}" if error.status else ""
            return (
                f"{self.subject} refused a call ({error.kind}{status}: {error.message[:120]}), which no retry there "
                f"can fix: failing over at once; {self.subject} is probed again in {self._cooldown_s:g}s"
            )
        self._outcomes.append(bad)
        self._bad_run = self._bad_run + 1 if bad else 0
        if error is not None and self._bad_run >= self.outage_run:  # a run of failures ends on one
            failures = self._bad_run
            self._open()
            return (
                f"{self.subject} failed {failures} attempts in a row (the last: {_said(error)}): new attempts go to "
                f"{self.elsewhere}, {self.subject} is probed again in {self._cooldown_s:g}s"
            )
        if len(self._outcomes) >= self.min_sample:
            failed = sum(self._outcomes)
            share = failed / len(self._outcomes)
            if share > self.threshold and bad:
                self._open()
                return (
                    f"{failed} of {self.subject}'s last {len(self._outcomes)} attempts failed ({share:.1%}: "
                    f"server errors, timeouts, connection errors; the threshold is {self.threshold:.0%}; the last: "
                    f"{_said(error)}): new attempts go to {self.elsewhere}, {self.subject} is probed again in "
                    f"{self._cooldown_s:g}s"
                )
        return None

    def force_open(self, reason: str) -> str:
        """Open for the rest of the run: no probe brings it back (see the module's docstring)."""
        self._open()
        self._reopen_at = math.inf
        return reason

    def _open(self) -> None:
        self._bad_run = 0
        self.state = BreakerState.OPEN
        self._reopen_at = self._clock() + self._cooldown_s


def _said(error: CallError | None) -> str:
    """An error in a few words: its class, status and the start of its message."""
    if error is None:
        return "none"
    status = f" {error.status}" if error.status else ""
    return f"{error.kind}{status} {error.message[:80]!r}"
