"""Circuit breaker and failover to the secondary endpoint."""

from __future__ import annotations

import asyncio
import json

from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.events import EndpointSwitched
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.routing.failover import BreakerState, CircuitBreaker
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession

from tests.conftest import read_jsonl, write_batch
from tests.helpers import wait_until
from tests.test_pacing import FakeClock

SERVER_ERROR = CallError(ErrorClass.SERVER, "boom", 503)


def test_breaker_opens_past_the_threshold_and_a_probe_brings_the_primary_back():
    clock = FakeClock()
    breaker = CircuitBreaker(threshold=0.01, min_sample=100, cooldown_s=10, clock=clock)
    for _ in range(99):
        assert breaker.on_primary_result(None) is None
    assert breaker.on_primary_result(SERVER_ERROR) is None  # 1 in 100: not past 1%
    assert breaker.on_primary_result(SERVER_ERROR) is not None  # 2 in 101: past it
    assert breaker.state is BreakerState.OPEN and not breaker.use_primary()
    clock.now += 10
    assert breaker.use_primary()  # the half-open probe
    assert not breaker.use_primary()  # only one probe at a time
    assert breaker.on_primary_result(SERVER_ERROR) is None  # probe failed: open again, longer cool-down
    clock.now += 10
    assert not breaker.use_primary()
    clock.now += 10
    assert breaker.use_primary()
    assert "back to the primary" in breaker.on_primary_result(None)
    assert breaker.state is BreakerState.CLOSED


def test_an_outage_or_an_account_error_fails_over_without_waiting_for_a_sample():
    breaker = CircuitBreaker(clock=FakeClock())
    assert [breaker.on_primary_result(SERVER_ERROR) is not None for _ in range(5)] == [False] * 4 + [True]
    other = CircuitBreaker(clock=FakeClock())
    assert "failing over at once" in other.on_primary_result(CallError(ErrorClass.QUOTA, "no money", 429))


def test_only_the_probes_answer_closes_an_open_breaker_not_a_call_sent_before_it_opened():
    clock = FakeClock()
    breaker = CircuitBreaker(cooldown_s=10, clock=clock)
    assert [breaker.on_primary_result(SERVER_ERROR) is not None for _ in range(5)][-1]
    assert breaker.on_primary_result(None) is None  # in flight when it opened, answered late
    assert breaker.on_primary_result(SERVER_ERROR) is None  # nor does a late failure lengthen the cool-down
    assert breaker.state is BreakerState.OPEN
    clock.now += 10
    assert breaker.on_primary_result(None) is None  # due for a probe, none sent yet
    assert breaker.use_primary()
    assert "back to the primary" in breaker.on_primary_result(None)


def test_a_breaker_forced_open_for_quality_stays_open_for_the_run():
    """The judge's failover: a probe answering proves the primary is up, not that its answers
    are good again, so none is sent; a late answer of a call already out changes nothing."""
    clock = FakeClock()
    breaker = CircuitBreaker(cooldown_s=10, max_cooldown_s=120, clock=clock)
    breaker.force_open("quality drift")
    assert breaker.on_primary_result(None) is None
    for _ in range(3):
        clock.now += 1_000
        assert not breaker.use_primary() and not breaker.admits()
    assert breaker.state is BreakerState.OPEN


async def test_primary_going_down_mid_run_loses_no_task(tmp_path, sim_factory):
    primary = sim_factory(latency_ms=10)
    secondary = sim_factory(latency_ms=10, seed=99)
    job = load_job(write_batch(tmp_path / "job.jsonl", [f"t{i}" for i in range(150)]))
    profile = ProviderProfile("custom", base_url=primary.base_url, fallback_base_url=secondary.base_url)
    session = SwarmSession.open_new(job, RunPlan(profile, EngineSettings.of(concurrency=10)), tmp_path / "run")
    switches = []
    session.engine.subscribe(lambda e: isinstance(e, EndpointSwitched) and switches.append(e))
    run = asyncio.create_task(session.run())
    try:
        await wait_until(lambda: session.engine.stats.succeeded >= 40, "40 tasks to succeed on the primary")
        primary.update_config(down=True)
        finished = await asyncio.wait_for(run, 30)
    finally:
        await session.aclose()
    assert finished.succeeded == 150 and finished.failed == 0
    assert switches and switches[0].endpoint == "custom/fallback"
    served = primary.stats()["successes"] + secondary.stats()["successes"]
    assert served == 150 and secondary.stats()["successes"] >= 80  # all but what the primary did before it went down
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["failovers"][0]["to"] == "custom/fallback"
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 150
