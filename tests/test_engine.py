"""The engine against the simulator over real HTTP on loopback, with a real SQLite journal."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from swarm_tui.core.events import AttemptStarted, RateGateClosed, RunPaused, RunResumed, TaskRetrying
from swarm_tui.engine import TaskState

from tests.conftest import read_jsonl
from tests.helpers import attempts_of, open_session, wait_until


def answers_by_id(run_dir) -> dict[str, str]:
    return {
        line["custom_id"]: line["response"]["body"]["choices"][0]["message"]["content"]
        for line in read_jsonl(run_dir / "results.jsonl")
    }


def assert_exactly_once(run_dir, custom_ids):
    seen = Counter(line["custom_id"] for line in read_jsonl(run_dir / "results.jsonl"))
    seen.update(line["custom_id"] for line in read_jsonl(run_dir / "errors.jsonl"))
    assert seen == Counter(custom_ids), "every custom_id exactly once in results ∪ errors"


async def test_100_tasks_each_get_their_own_answer(tmp_path, sim):
    prompts = [f"question number {i}: what is {i} squared?" for i in range(100)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=50)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert (finished.succeeded, finished.failed, finished.aborted) == (100, 0, False)
    answers = answers_by_id(tmp_path / "run")
    assert len(answers) == 100
    for i, prompt in enumerate(prompts):
        assert answers[f"task-{i:04d}"].startswith(f"Sim answer to: {prompt}")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["succeeded"] == 100 and summary["requests"]["sent"] == 100
    assert summary["tokens"]["prompt"] > 0 and summary["latency_ms"]["p95"] is not None


async def test_injected_faults_all_end_in_success_and_nothing_succeeds_twice(tmp_path, sim_factory):
    sim = sim_factory(error_rate=0.08, hang_rate=0.03, hang_s=30, rpm=3000, burst_s=0.5, seed=11)
    prompts = [f"task {i}" for i in range(150)]
    prompts[3] = "task 3 [[sim:429x2]]"
    prompts[4] = "task 4 [[sim:503x3]]"
    prompts[5] = "task 5 [[sim:hangx1]]"
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=40, timeout_s=1.0, max_attempts=6)
    retry_reasons = Counter()
    session.engine.subscribe(lambda e: isinstance(e, TaskRetrying) and retry_reasons.update([e.attempt.error.kind]))
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert finished.succeeded == 150, summary
    stats = sim.stats()
    assert stats["duplicate_successes"] == 0
    assert sorted(stats["successes_by_prompt"].values()) == [1] * 150
    # each kind of fault really happened and was retried
    assert retry_reasons["rate_limit"] >= 2 and retry_reasons["server_error"] >= 3 and retry_reasons["timeout"] >= 1
    assert summary["requests"]["retried"] == sum(retry_reasons.values())
    assert_exactly_once(tmp_path / "run", [f"task-{i:04d}" for i in range(150)])


async def test_client_errors_fail_after_one_attempt(tmp_path, sim):
    prompts = ["fine", "too long [[sim:400]]", "bad key [[sim:401]]", "no money [[sim:quota]]", "gone [[sim:404]]"]
    session = open_session(tmp_path, sim.base_url, prompts)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert (finished.succeeded, finished.failed) == (1, 4)
    attempts = [attempts_of(tmp_path / "run", i) for i in range(5)]
    assert [len(a) for a in attempts] == [1, 1, 1, 1, 1]
    assert [a[0]["error_class"] for a in attempts[1:]] == ["context_length", "auth", "quota", "not_found"]
    errors = {line["custom_id"]: line["error"] for line in read_jsonl(tmp_path / "run" / "errors.jsonl")}
    assert errors["task-0001"]["code"] == "context_length_exceeded"
    assert errors["task-0003"]["code"] == "insufficient_quota"
    assert_exactly_once(tmp_path / "run", [f"task-{i:04d}" for i in range(5)])


async def test_retry_after_closes_the_gate_for_every_task(tmp_path, sim):
    prompts = ["slow down [[sim:429x1]]"] + [f"other {i}" for i in range(20)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=1)
    gates = []
    session.engine.subscribe(lambda e: isinstance(e, RateGateClosed) and gates.append(e.seconds))
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 21
    assert gates == [0.1]  # the simulator's retry-after-ms: 100
    first = attempts_of(tmp_path / "run", 0)
    assert [a["outcome"] for a in first] == ["retry", "ok"]
    gate_opened = first[0]["started_at"] + first[0]["latency_ms"] / 1000 + 0.1
    # with one slot, the task dispatched right after the 429 waited for the gate as well
    next_task = attempts_of(tmp_path / "run", 1)[0]
    assert next_task["started_at"] >= gate_opened - 0.005


async def test_retry_failed_runs_failed_tasks_again(tmp_path, sim):
    prompts = ["ok 1", "flaky [[sim:500x1]]", "ok 2", "flaky too [[sim:502x1]]"]
    session = open_session(tmp_path, sim.base_url, prompts, max_attempts=1)
    try:
        first = await session.run()
        assert (first.succeeded, first.failed) == (2, 2)
        assert len(read_jsonl(tmp_path / "run" / "errors.jsonl")) == 2
        assert sorted(session.engine.retry_failed()) == [1, 3]
        assert session.engine.stats.failed == 0
        second = await session.run()
    finally:
        await session.aclose()
    assert (second.succeeded, second.failed) == (4, 0)
    assert read_jsonl(tmp_path / "run" / "errors.jsonl") == []
    assert_exactly_once(tmp_path / "run", [f"task-{i:04d}" for i in range(4)])
    assert [a["number"] for a in attempts_of(tmp_path / "run", 1)] == [1, 2]


async def test_pause_stops_dispatch_until_resumed(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=30, latency_sigma=0.01)
    session = open_session(tmp_path, sim.base_url, [f"t{i}" for i in range(60)], concurrency=5, adaptive=False)
    engine = session.engine
    started_while_paused = []
    paused = [False]

    def listen(event) -> None:
        # judged by the events' order, not by the flag when one is heard: events go out in the
        # order they were emitted, and an attempt dispatched just before the pause may be heard
        # after it (it rides on the next commit, which the pause's own event flushes first)
        if isinstance(event, RunPaused | RunResumed):
            paused[0] = isinstance(event, RunPaused)
        elif isinstance(event, AttemptStarted) and paused[0]:
            started_while_paused.append(event)

    engine.subscribe(listen)
    run = asyncio.create_task(session.run())
    try:
        await wait_until(lambda: engine.stats.succeeded >= 10, "10 tasks to succeed")
        engine.pause()
        # every slot the in-flight calls free is one a working dispatcher would fill at once:
        # reaching zero in flight with tasks still queued is only possible while nothing is sent
        await wait_until(lambda: engine.stats.in_flight == 0, "the in-flight calls to drain while paused")
        assert started_while_paused == [], "nothing dispatched while paused"
        queued = Counter(engine.states.values())[TaskState.QUEUED]
        assert queued == 60 - engine.stats.succeeded > 0
        engine.resume()
        finished = await asyncio.wait_for(run, 10)
    finally:
        await session.aclose()
    assert finished.succeeded == 60
    assert started_while_paused == []


async def test_abort_cancels_in_flight_and_the_journal_resumes(tmp_path, sim_factory):
    from swarm_tui.run.session import SwarmSession

    sim = sim_factory(latency_ms=80, latency_sigma=0.1)
    prompts = [f"t{i}" for i in range(80)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=10)
    run = asyncio.create_task(session.run())
    await wait_until(lambda: session.engine.stats.succeeded >= 20, "20 tasks to succeed")
    session.engine.abort()
    finished = await asyncio.wait_for(run, 5)
    await session.aclose()
    assert finished.aborted and finished.cancelled > 0
    succeeded_first = {i for i, s in session.engine.states.items() if s is TaskState.SUCCEEDED}
    assert len(succeeded_first) == finished.succeeded

    sim.reset()
    resumed = SwarmSession.reopen(tmp_path / "run")
    try:
        again = await resumed.run()
    finally:
        await resumed.aclose()
    assert again.succeeded == 80 and not again.aborted
    resent = set(sim.stats()["successes_by_prompt"])
    assert not resent & {prompts[i] for i in succeeded_first}, "a journaled success was sent again"
    assert len(resent) == 80 - len(succeeded_first)
    assert_exactly_once(tmp_path / "run", [f"task-{i:04d}" for i in range(80)])


async def test_streaming_assembles_the_answer_and_measures_ttft(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=20, chunk_delay_ms=1)
    session = open_session(tmp_path, sim.base_url, [f"stream {i}" for i in range(10)], stream=True)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 10
    answers = answers_by_id(tmp_path / "run")
    assert answers["task-0007"].startswith("Sim answer to: stream 7")
    attempt = attempts_of(tmp_path / "run", 7)[0]
    assert attempt["ttft_ms"] is not None and 0 < attempt["ttft_ms"] <= attempt["latency_ms"]
    assert attempt["completion_tokens"] > 0


async def test_stalled_stream_is_retried_as_a_new_request(tmp_path, sim_factory):

    sim = sim_factory(latency_ms=5, chunk_delay_ms=1, hang_s=30)
    session = open_session(
        tmp_path,
        sim.base_url,
        ["fine", "stalls once [[sim:stallx1]]"],
        stream=True,
        idle_timeout_s=0.3,
        first_token_timeout_s=2.0,
    )
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 2
    assert [a["error_class"] for a in attempts_of(tmp_path / "run", 1)] == ["broken_stream", None]


async def test_shared_context_hits_the_prefix_cache_and_cached_tokens_cost_less(tmp_path, sim):
    from swarm_tui.core.usage import Usage
    from swarm_tui.engine import EngineSettings
    from swarm_tui.jobs import load_job
    from swarm_tui.pricing import PriceTable
    from swarm_tui.providers.profile import ProviderProfile
    from swarm_tui.run.session import RunPlan, SwarmSession
    from swarm_tui.util.locations import demo_job

    job = load_job(demo_job())
    session = SwarmSession.open_new(
        job,
        RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=10)),
        tmp_path / "run",
    )
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 100
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    tokens = summary["tokens"]
    assert tokens["cached"] > 0.5 * tokens["prompt"], "the shared context is served from the cache"
    price = PriceTable.builtin().lookup("kimi-k2.5")
    uncached = price.cost(Usage(prompt=tokens["prompt"], completion=tokens["completion"]))
    assert summary["cost_usd"] == pytest.approx(
        price.cost(Usage(prompt=tokens["prompt"], completion=tokens["completion"], cached=tokens["cached"])), abs=1e-6
    )
    assert summary["cost_usd"] < uncached


async def test_the_queue_knows_where_each_task_is_as_it_moves():
    """One owner of where a task is: each move puts it in one place, read back at once (a byte a
    task), for a new run's line (every index from 0) and a resumed one's (gaps, an index far off)."""
    from swarm_tui.engine.kernel.queue import Place, TaskQueue

    fresh = TaskQueue(range(4))
    assert [fresh.where(i) for i in (0, 3, 4, -1)] == [Place.QUEUED, Place.QUEUED, Place.ELSEWHERE, Place.ELSEWHERE]
    queue = TaskQueue([2, 5, 9, 1_000_000])
    assert [queue.where(i) for i in (1, 2, 5, 1_000_000)] == [Place.ELSEWHERE, *[Place.QUEUED] * 3]
    assert queue.pop() == 2 and queue.where(2) is Place.NEXT
    flight = asyncio.create_task(asyncio.sleep(60))
    queue.fly(2, flight)
    assert queue.where(2) is Place.IN_FLIGHT and queue.in_flight == 1
    queue.retry_after(2, 0.01)  # its outcome moved it on before the attempt landed
    queue.land(2)
    assert queue.where(2) is Place.BACKOFF and queue.busy
    await wait_until(lambda: queue.where(2) is Place.QUEUED, "the backoff to end")
    assert queue.queued == (2, 5, 9, 1_000_000), "a task whose backoff ended goes ahead of untried ones"
    assert not queue.hold(5) and queue.where(5) is Place.HELD and 5 not in queue.queued
    tools = asyncio.create_task(asyncio.sleep(60))
    queue.work(9, tools)
    assert queue.where(9) is Place.WORKING
    assert queue.hold(9) and queue.is_held(9)  # its tool run is cancelled; its own cleanup says so
    await asyncio.gather(tools, return_exceptions=True)
    assert queue.worked(9, tools)
    queue.rest(9)
    assert queue.where(9) is Place.HELD
    queue.release([5, 9])
    assert queue.queued[:2] == (5, 9) and queue.where(9) is Place.QUEUED and not queue.is_held(9)
    assert queue.take([1_000_000]) == [1_000_000] and queue.where(1_000_000) is Place.ELSEWHERE
    flight.cancel()
