"""RetryPolicy: which failures are tried again, and the bounds of the wait before the next attempt.

The backoff is full jitter (a uniform draw between 0 and min(8, 0.5 x 2^(n-1)) after the n-th
failed attempt: the article's `wait_exponential(multiplier=0.5, max=8)`); a provider's
Retry-After wins, plus a little jitter. The bounds are checked exactly by pinning the random
draw to each end of its range, then a seeded sample shows the draws really spread over it.
"""

from __future__ import annotations

import random

import pytest
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.engine.pacing.retry import RetryPolicy

SERVER = CallError(ErrorClass.SERVER, "boom", 503)
AUTH = CallError(ErrorClass.AUTH, "bad key", 401)

BACKOFF_CEILING = {1: 0.5, 2: 1.0, 3: 2.0, 4: 4.0, 5: 8.0, 6: 8.0, 12: 8.0}
"""Attempts made so far -> the most the wait before the next one can be."""


def retry_after(seconds: float) -> CallError:
    return CallError(ErrorClass.RATE_LIMIT, "slow down", 429, retry_after_s=seconds)


@pytest.fixture(autouse=True)
def own_random_state():
    """The seeded samples below leave the process's random state as they found it."""
    state = random.getstate()
    yield
    random.setstate(state)


@pytest.fixture
def pinned_draw(monkeypatch):
    """Make every `random.uniform(a, b)` return its lower end ("low") or its upper end ("high")."""

    def pin(end: str) -> None:
        monkeypatch.setattr(random, "uniform", (lambda a, b: a) if end == "low" else (lambda a, b: b))

    return pin


@pytest.mark.parametrize("attempts, ceiling", sorted(BACKOFF_CEILING.items()))
def test_backoff_is_full_jitter_between_zero_and_the_capped_exponential(attempts, ceiling, pinned_draw):
    policy = RetryPolicy()
    pinned_draw("low")
    assert policy.delay_s(SERVER, attempts) == 0.0
    pinned_draw("high")
    assert policy.delay_s(SERVER, attempts) == pytest.approx(ceiling)


def test_backoff_draws_spread_over_their_whole_range():
    policy = RetryPolicy()
    random.seed(18)
    for attempts, ceiling in BACKOFF_CEILING.items():
        draws = [policy.delay_s(SERVER, attempts) for _ in range(400)]
        assert all(0.0 <= d <= ceiling for d in draws), (attempts, min(draws), max(draws))
        assert min(draws) < 0.1 * ceiling and max(draws) > 0.9 * ceiling, "jittered over the range, not fixed"
        assert len(set(draws)) == len(draws), "no two tasks wait the same"


@pytest.mark.parametrize(
    "seconds, jitter",
    [
        (0.0, 0.05),  # at most 0.1 x Retry-After + 50 ms of jitter...
        (0.1, 0.06),
        (2.0, 0.25),
        (9.5, 1.0),  # ...and never more than a second
        (30.0, 1.0),  # beyond the backoff's 8 s cap: the provider's word wins
    ],
)
def test_retry_after_wins_plus_a_small_jitter(seconds, jitter, pinned_draw):
    policy = RetryPolicy()
    for attempts in (1, 3, 10):
        pinned_draw("low")
        assert policy.delay_s(retry_after(seconds), attempts) == seconds
        pinned_draw("high")
        assert policy.delay_s(retry_after(seconds), attempts) == pytest.approx(seconds + jitter)


def test_tasks_released_by_one_retry_after_do_not_all_come_back_at_once():
    policy = RetryPolicy()
    random.seed(7)
    delays = [policy.delay_s(retry_after(2.0), 1) for _ in range(200)]
    assert all(2.0 <= d <= 2.25 for d in delays)
    assert max(delays) - min(delays) > 0.2


def test_the_policy_retries_retryable_errors_up_to_max_attempts():
    policy = RetryPolicy(max_attempts=4)  # the article's 4 attempts
    assert [policy.should_retry(SERVER, n) for n in (1, 2, 3, 4, 5)] == [True, True, True, False, False]
    assert [policy.should_retry(AUTH, n) for n in (1, 2)] == [False, False], "a 401 is never tried again"
    assert RetryPolicy(max_attempts=1).should_retry(SERVER, 1) is False
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


QUOTA = CallError(ErrorClass.QUOTA, "insufficient_quota", 429)
CONTEXT = CallError(ErrorClass.CONTEXT_LENGTH, "maximum context length", 400)
STRAGGLER = CallError(ErrorClass.TIMEOUT, "past the straggler deadline", code="straggler")
BAD_REQUEST = CallError(ErrorClass.BAD_REQUEST, "unknown field", 400)

# error, attempts made, stopping, trimmed, can fail over -> next, delay bounds (s)
DECISIONS = [
    (SERVER, 1, False, False, False, "retry", (0.0, 0.5)),
    (SERVER, 3, False, False, False, "retry", (0.0, 2.0)),
    (SERVER, 4, False, False, False, "give up", (0.0, 0.0)),  # out of attempts
    (SERVER, 1, True, False, False, "give up", (0.0, 0.0)),  # the run is stopping
    (retry_after(30.0), 1, False, False, False, "retry", (30.0, 31.0)),  # the provider's wait wins
    (AUTH, 1, False, False, False, "give up", (0.0, 0.0)),  # no fallback: a bad key stays bad
    (AUTH, 1, False, False, True, "fail over", (0.0, 0.0)),  # at once, to the fallback
    (QUOTA, 2, False, False, True, "fail over", (0.0, 0.0)),
    (QUOTA, 4, False, False, True, "give up", (0.0, 0.0)),
    (QUOTA, 1, True, False, True, "give up", (0.0, 0.0)),
    (CONTEXT, 1, False, False, False, "give up", (0.0, 0.0)),  # too long, nothing to drop
    (CONTEXT, 1, False, True, False, "trim", (0.0, 0.0)),  # shortened: at once
    (STRAGGLER, 1, False, False, False, "retry", (0.0, 0.0)),  # it has waited long enough
    (STRAGGLER, 4, False, False, False, "give up", (0.0, 0.0)),
    (BAD_REQUEST, 1, False, False, True, "give up", (0.0, 0.0)),  # the fallback would refuse it too
]


@pytest.mark.parametrize("error, attempts, stopping, trimmed, can_fail_over, expected, bounds", DECISIONS)
def test_the_decision_after_a_failed_attempt(error, attempts, stopping, trimmed, can_fail_over, expected, bounds):
    for _ in range(20):  # the delay is drawn: every draw within its bounds
        decision = RetryPolicy(max_attempts=4).after_failure(
            error, attempts, stopping=stopping, trimmed=trimmed, can_fail_over=can_fail_over
        )
        assert decision.next == expected
        assert bounds[0] <= decision.delay_s <= bounds[1]
