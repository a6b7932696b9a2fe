"""What a task does after a failed attempt: the decision every retry path takes (the live lane,
direct calls, the batch lane), as data. The rules that make it are `engine.retry.RetryPolicy`'s."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Next(StrEnum):
    """What a task does after a failed attempt."""

    RETRY = "retry"
    TRIM = "trim"
    """Sent again at once, shortened (its context was too long)."""
    FAIL_OVER = "fail over"
    """Sent again at once, to the fallback endpoint (an account error on the primary)."""
    GIVE_UP = "give up"


@dataclass(frozen=True, slots=True)
class Decision:
    next: Next
    delay_s: float = 0.0
    resumable: bool = False
    """A stop gave up on a task that had attempts left: it is not failed but left unfinished
    (cancelled), as the user's abort leaves it, so that a plain `resume` sends it again."""
