"""Pacing and resilience, one test per mechanism: buckets, header learning, AIMD, hedging, guards."""

from __future__ import annotations

import json

import pytest
from swarm_tui.core.events import ConcurrencyChanged, RateLimitsLearned
from swarm_tui.engine.pacing.limits import AdaptiveConcurrency, RateLimits, TokenBucket, parse_duration

from tests.helpers import attempts_of, open_session


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("6m0s", 360.0),
        ("1s", 1.0),
        ("12ms", 0.012),
        ("1h2m3.5s", 3723.5),
        ("0.5", 0.5),
        ("20", 20.0),
        ("", None),
        ("soon", None),
        ("5x", None),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_token_bucket_paces_at_its_rate():
    clock = FakeClock()
    bucket = TokenBucket(rate=10.0, capacity=10.0, clock=clock)
    for _ in range(10):
        assert bucket.wait_s(1) == 0
        bucket.take(1)
    assert bucket.wait_s(1) == pytest.approx(0.1)
    clock.now += 0.1
    assert bucket.wait_s(1) == 0


def test_rate_limits_learn_from_headers_and_sync_to_remaining():
    clock = FakeClock()
    limits = RateLimits(clock=clock)
    assert limits.wait_s(100) == 0  # nothing known: no pacing
    learned = limits.learn(
        {
            "x-ratelimit-limit-requests": "600",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-limit-tokens": "60000",
            "x-ratelimit-remaining-tokens": "1000",
            "x-ratelimit-reset-requests": "100ms",
        }
    )
    assert (learned.rpm, learned.tpm) == (600, 60000)
    assert limits.wait_s(0) == pytest.approx(0.1)  # 10 req/s, and the provider says none is left now
    assert limits.learn({"x-ratelimit-limit-requests": "600"}) is None  # unchanged: no event


def test_configured_limits_win_over_headers():
    limits = RateLimits(rpm=60, clock=FakeClock())
    limits.learn({"x-ratelimit-limit-requests": "6000"})
    assert limits.rpm == 60


def test_a_rate_limit_cuts_the_slots_the_provider_serves_not_those_hung_calls_hold():
    clock = FakeClock()
    aimd = AdaptiveConcurrency(ceiling=30, clock=clock)
    aimd.limit = 24
    assert aimd.on_congestion(late=11) == 20  # 13 served x 0.7 = 9, and the 11 hung calls keep theirs
    clock.now += 1.0
    assert aimd.on_congestion(late=0) == 14  # none hung: the whole limit is cut
    clock.now += 1.0
    assert aimd.on_congestion(late=50) is None  # every slot hung but one: that one is all it serves, kept


def test_aimd_grows_when_clean_and_busy_and_halves_once_per_window():
    clock = FakeClock()
    aimd = AdaptiveConcurrency(ceiling=20, clock=clock)
    assert aimd.limit == 10  # half the ceiling; slow start: +1 per clean busy completion
    assert [aimd.on_success(busy=True) for _ in range(10)][-1] == 20
    assert aimd.on_congestion() == 14
    assert aimd.on_congestion() is None  # same window: one decrease
    clock.now += 1.0
    assert aimd.on_congestion() == 9
    clock.now += 1.0
    grown = [aimd.on_success(busy=True) for _ in range(9)]
    assert grown[-1] == 10 and grown[:-1] == [None] * 8
    assert all(aimd.on_success(busy=False) is None for _ in range(50))  # idle: no growth
    aimd.set_ceiling(5)
    assert aimd.limit == 5


async def test_engine_learns_the_rpm_from_headers_and_avoids_429s(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=20, rpm=1200, burst_s=1.0)  # a burst of 20 requests
    # the first burst (half the ceiling, 15) fits the provider's; from the first answer on, its headers pace
    session = open_session(tmp_path, sim.base_url, [f"paced {i}" for i in range(60)], concurrency=30)
    learned = []
    session.engine.subscribe(lambda e: isinstance(e, RateLimitsLearned) and learned.append(e.rpm))
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 60
    assert learned == [1200]
    stats = sim.stats()
    assert stats["rate_limited"] <= 0.05 * stats["requests"], stats["rate_limited"]


async def test_a_lone_hang_does_not_shrink_the_limit_but_429s_do(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5, hang_s=30)
    prompts = [f"t{i}" for i in range(40)]
    prompts[30] = "hangs once [[sim:hangx1]]"
    prompts[35] = "limited [[sim:429x1]]"
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=8, timeout_s=0.5)
    changes = []
    session.engine.subscribe(lambda e: isinstance(e, ConcurrencyChanged) and changes.append(e.reason))
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 40
    assert not any("timeout" in reason for reason in changes)
    assert any(reason.startswith("rate_limit") for reason in changes)


async def test_hedging_races_a_backup_against_a_hung_call(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=10, latency_sigma=0.2, hang_s=30)
    prompts = [f"t{i}" for i in range(40)]
    prompts[35] = "hangs once [[sim:hangx1]]"
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=2, timeout_s=20, hedge=True)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 40
    attempts = attempts_of(tmp_path / "run", 35)
    assert sorted(a["outcome"] for a in attempts) == ["hedge_lost", "ok"]
    lost = next(a for a in attempts if a["outcome"] == "hedge_lost")
    assert lost["latency_ms"] < 5000, "the hung call was cancelled when the backup won, not left to time out"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["requests"]["sent"] == 41


async def test_budget_stops_dispatch_before_it_is_passed(tmp_path, sim):
    prices = {"custom/sim-1": {"input": 100.0, "cached_input": 100.0, "output": 100.0}}  # $ per 1M tokens
    session = open_session(
        tmp_path, sim.base_url, [f"budgeted task {i}" for i in range(50)], prices=prices, concurrency=4, budget_usd=0.1
    )
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert finished.stop_reason.startswith("budget")
    assert 0 < summary["succeeded"] < 50 and summary["unfinished"] == 50 - summary["succeeded"]
    assert summary["cost_usd"] <= 0.1


async def test_fail_on_error_stops_dispatch(tmp_path, sim):
    prompts = [f"t{i} [[sim:400]]" if i % 2 else f"t{i}" for i in range(100)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=2, fail_on_error=0.2)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert "fail-on-error" in finished.stop_reason
    assert finished.succeeded + finished.failed < 40


def test_slow_start_reaches_the_ceiling_within_two_round_trips():
    aimd = AdaptiveConcurrency(ceiling=50, clock=FakeClock())
    for _ in range(2):  # a round trip: every slot in flight completes once
        for _ in range(aimd.limit):
            aimd.on_success(busy=True)
    assert aimd.limit == 50


def test_faults_that_are_not_congestion_leave_the_limit_alone():
    """The demo's 500s and 502s, and 503s at a noise rate, must not strangle the swarm."""
    clock = FakeClock()
    aimd = AdaptiveConcurrency(ceiling=50, clock=clock)
    for i in range(200):
        clock.now += 0.01
        if i % 10 == 0:
            aimd.on_other_failure()  # 10% plain 5xx
        elif i % 50 == 1:
            assert aimd.on_overload() is None  # 2% "overloaded": noise
        else:
            aimd.on_success(busy=True)
    assert aimd.limit == 50 and aimd.slow_start


def test_sustained_overload_backs_off_but_not_below_the_articles_floor():
    clock = FakeClock()
    aimd = AdaptiveConcurrency(ceiling=50, clock=clock)
    for _ in range(40):
        aimd.on_success(busy=True)
    limits = []
    for _ in range(200):
        clock.now += 1.0  # a new window each time
        limits.append(aimd.on_overload())
    assert not aimd.slow_start
    assert min(x for x in limits if x is not None) == 20  # 40% of 50, as the article's 50 -> 20
    assert aimd.limit == 20


def test_a_rate_limit_backs_off_at_once_down_to_a_tenth():
    clock = FakeClock()
    aimd = AdaptiveConcurrency(ceiling=50, clock=clock)
    assert aimd.on_congestion() == 17  # 25 x 0.7
    for _ in range(20):
        clock.now += 1.0
        aimd.on_congestion()
    assert aimd.limit == 5


def test_a_provider_that_states_no_limit_gets_an_estimated_rpm_probed_like_tcp():
    clock = FakeClock()
    limits = RateLimits(clock=clock)
    for _ in range(40):  # 40 sent and answered in the last second, then a 429
        limits.take(0)
        limits.note_answer()
        clock.now += 0.025
    learned = limits.on_rate_limited(sent_at=clock.now)
    assert learned is not None and learned.estimated and limits.estimated
    assert 39 * 60 <= limits.rpm <= 40 * 60  # what got through in the last second
    assert limits.wait_s(0) > 0, "no burst right after a 429: the provider's bucket is empty"
    assert limits.on_rate_limited(sent_at=clock.now - 0.5) is None  # sent before the cut: same congestion
    clock.now += 1.1
    grown = limits.note_answer()  # a clean second: half the gap to where the 429 came (40/s sent)
    assert grown is not None and limits.rpm > 40 * 60 * 0.99
    clock.now += 0.2
    cut = limits.on_rate_limited(sent_at=clock.now)
    assert cut is not None and cut.rpm < grown.rpm
    stated = limits.learn({"x-ratelimit-limit-requests": "3000"})
    assert stated is not None and stated.rpm == 3000 and not limits.estimated
    assert limits.on_rate_limited(sent_at=clock.now + 5) is None, "a stated limit is not estimated over"


def test_a_configured_rpm_is_never_estimated_over():
    limits = RateLimits(rpm=600, clock=FakeClock())
    assert limits.on_rate_limited() is None and limits.rpm == 600


def test_an_estimate_made_before_anything_was_answered_does_not_stall_the_run():
    """A 429 on a small run's first request: nothing answered in the last second. A near-zero
    estimate (1 RPM) once held such a run for a minute."""
    clock = FakeClock()
    limits = RateLimits(clock=clock)
    limits.take(0)
    limits.take(0)
    learned = limits.on_rate_limited(sent_at=clock.now)
    assert learned is not None and learned.rpm >= 60
    assert limits.wait_s(0) <= 1.0
