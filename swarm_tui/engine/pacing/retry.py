"""When to try a failed attempt again, and after how long.

The wait is tenacity's full-jitter exponential (`wait_random_exponential`, the article's
`multiplier=0.5, max=8`), but the engine schedules the retry itself instead of sleeping inside
a decorated call: a task waiting out its backoff holds no concurrency slot, and a Retry-After
from the provider closes one shared gate (see `AdmissionController`) rather than one task's sleep.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import tenacity

from swarm_tui.core.call_errors import ACCOUNT_ERRORS, STRAGGLER_CODE, CallError
from swarm_tui.core.decide import Decision, Next


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    multiplier: float = 0.5
    max_backoff_s: float = 8.0
    _wait: tenacity.wait.wait_base = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        object.__setattr__(
            self, "_wait", tenacity.wait_random_exponential(multiplier=self.multiplier, max=self.max_backoff_s)
        )

    def should_retry(self, error: CallError, attempts_made: int) -> bool:
        """`attempts_made` counts the attempts of this round, the failed one included."""
        return error.retryable and attempts_made < self.max_attempts

    def delay_s(self, error: CallError, attempts_made: int) -> float:
        """Full-jitter backoff; when the provider said how long to wait, that wins (plus a little
        jitter so the tasks it released do not all arrive in the same millisecond)."""
        if error.retry_after_s is not None:
            return error.retry_after_s + random.uniform(0.0, min(1.0, 0.1 * error.retry_after_s + 0.05))
        state = tenacity.RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        state.attempt_number = attempts_made
        return float(self._wait(state))

    def after_failure(
        self,
        error: CallError,
        attempts_made: int,
        *,
        stopping: bool = False,
        trimmed: bool = False,
        can_fail_over: bool = False,
        door_left: bool = False,
    ) -> Decision:
        """The one decision after a failed attempt, and its delay.

        `attempts_made`: this round's attempts, the failed one included. `trimmed`: the request
        was just shortened (a context-length error with something to drop). `can_fail_over`:
        the attempt went to the primary and a fallback is configured. `door_left`: it went to a
        door its route has left, another door is in use. A run that is stopping retries nothing,
        but a task it would have tried again is `resumable`: a stop (a signal, an abort, the
        budget) never fails a task that had attempts left. A shortened request, an attempt at a
        door left (whatever its class and the attempts made: it was the door's failure, not the
        task's) or an account error with a fallback goes again at once; an attempt abandoned as a
        straggler has waited long enough already; otherwise the error's class and the attempts
        left decide, with the backoff (or the Retry-After)."""
        if stopping:
            going_on = self.after_failure(
                error, attempts_made, trimmed=trimmed, can_fail_over=can_fail_over, door_left=door_left
            )
            return Decision(Next.GIVE_UP, resumable=going_on.next is not Next.GIVE_UP)
        if trimmed:
            return Decision(Next.TRIM)
        if door_left:
            return Decision(Next.FAIL_OVER)
        if can_fail_over and error.kind in ACCOUNT_ERRORS and attempts_made < self.max_attempts:
            return Decision(Next.FAIL_OVER)
        if not self.should_retry(error, attempts_made):
            return Decision(Next.GIVE_UP)
        if error.code == STRAGGLER_CODE:
            return Decision(Next.RETRY)
        return Decision(Next.RETRY, self.delay_s(error, attempts_made))
