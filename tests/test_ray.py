"""Scale-out on Ray: a local 2-CPU Ray, 2 worker actors, the simulator on loopback.

One Ray for the whole module (starting one costs seconds); each test makes its own actors
through `RayEngine`, and they are killed when its session closes. Agents with tools and the
batch lane on Ray are in `test_ray_agents.py` (a module of their own: the suite runs modules in
parallel, and this one was the longest).
"""

from __future__ import annotations

import asyncio
import json
import pickle
from collections import Counter
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from swarm_tui.cache import CacheSettings  # noqa: E402
from swarm_tui.core.events import (  # noqa: E402
    AttemptStarted,
    EndpointSwitched,
    QualityDrift,
    TaskQueued,
    TasksAdded,
    TaskSucceeded,
)
from swarm_tui.core.notes import ActorLost  # noqa: E402
from swarm_tui.distributed import driver as driver_module  # noqa: E402
from swarm_tui.engine import EngineSettings, TaskState  # noqa: E402
from swarm_tui.jobs import load_job  # noqa: E402
from swarm_tui.journal import Journal  # noqa: E402
from swarm_tui.providers.profile import ProviderProfile  # noqa: E402
from swarm_tui.run.session import RayOptions, RunPlan, SwarmSession  # noqa: E402

from tests.conftest import read_jsonl, run_cli, write_batch  # noqa: E402
from tests.helpers import attempts_of, wait_until  # noqa: E402
from tests.ray_support import JUDGE_PRICES, custom_ids, local_ray, ray_session, run_to_end  # noqa: E402, F401
from tests.test_process_faults import journal_count  # noqa: E402

KEY = "sk-ray-test-SECRET-9876543210abcdef"

pytestmark = pytest.mark.timeout(300)  # a local Ray on 2 cores, and CLI runs that start their own


async def test_1000_tasks_on_two_actors_exactly_once_with_the_rpm_respected_in_total(tmp_path, sim_factory):
    rpm = 6000  # 100 requests/s for the whole swarm: 1,000 tasks in about 10 s
    sim = sim_factory(latency_ms=20, rpm=rpm, seed=5, mode="process")  # its clock is not starved by the driver
    session = ray_session(tmp_path, sim.base_url, [f"ray task {i}" for i in range(1000)], rpm=rpm)
    try:
        finished = await session.run()
        limiter = session.engine.limiter_stats()
    finally:
        await session.aclose()
    assert (finished.succeeded, finished.failed, finished.cancelled) == (1000, 0, 0)
    assert custom_ids(tmp_path / "run") == Counter(f"task-{i:04d}" for i in range(1000))
    stats = sim.stats()
    assert stats["duplicate_successes"] == 0
    assert stats["rate_limited"] <= 0.01 * stats["requests"], stats["by_status"]
    # the swarm as a whole kept to the limit: both actors worked, under one budget metered at the
    # run's rpm, and every request sent was leased from it. That leases never outrun the bucket
    # (capacity + rate x time) is test_distributed_budget's, on a clock it moves itself.
    assert {shard.actor_no for shard in session.engine.shards.values()} == {0, 1}
    assert limiter["rpm"] == rpm
    assert limiter["leased_requests"] >= stats["requests"]


async def test_x_cancels_one_agent_on_ray_and_a_retry_by_name_sends_it_again(tmp_path, sim_factory):
    """The user's `x` on Ray: the shard that holds each task cancels it (a call in flight is
    journaled as cancelled), the run goes on without it; retried by name, a new shard sends it,
    and it is answered. Before, `x` did nothing on Ray."""
    sim = sim_factory(latency_ms=1500, latency_sigma=0.0)
    session = ray_session(tmp_path, sim.base_url, [f"cancel me {i}" for i in range(60)], concurrency=10)
    engine = session.engine
    run = asyncio.create_task(session.run())
    try:
        await wait_until(lambda: engine.stats.succeeded >= 10, "the first answers", timeout=60)
        # the call sent last, 1.5 s from its answer: the shard cancels it well before (an answer
        # the shard already has is kept: a loaded machine must not turn that into a flake)
        running = max(engine.board.in_flight, key=lambda i: engine.board.in_flight[i].started_at)
        queued = max(i for i in range(60) if engine.states[i] is TaskState.QUEUED)
        assert sorted(engine.cancel_tasks([running, queued, running])) == sorted([running, queued])
        await wait_until(
            lambda: engine.states[running] is engine.states[queued] is TaskState.CANCELLED, "both cancelled", timeout=30
        )
        assert engine.cancel_tasks([running]) == [], "already cancelled"
        going_on = engine.stats.succeeded + 10  # a cancelled task is not sent while the run goes on
        await wait_until(lambda: engine.stats.succeeded >= going_on, "ten more answers", timeout=60)
        assert engine.states[running] is engine.states[queued] is TaskState.CANCELLED
        assert sorted(engine.retry_failed([running, queued])) == sorted([running, queued])
        finished = await asyncio.wait_for(run, 120)
    finally:
        await session.aclose()
    assert (finished.succeeded, finished.cancelled) == (60, 0)
    assert [a["outcome"] for a in attempts_of(tmp_path / "run", running)] == ["cancelled", "ok"]
    assert [a["outcome"] for a in attempts_of(tmp_path / "run", queued)] == ["ok"], "never sent before its retry"
    assert custom_ids(tmp_path / "run") == Counter(f"task-{i:04d}" for i in range(60))


async def test_an_actor_killed_mid_run_loses_no_task(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=30, rpm=6000, seed=9)
    prompts = [f"kill test {i}" for i in range(400)]
    session = ray_session(tmp_path, sim.base_url, prompts, rpm=6000)
    engine = session.engine
    done, requeued, killed = [0], [], []

    def on_event(event) -> None:
        if isinstance(event, TaskSucceeded):
            done[0] += 1
            if done[0] == 100 and not killed:
                killed.append(engine.actors[0])
                ray.kill(engine.actors[0])
        elif isinstance(event, TaskQueued):
            requeued.append(event.index)

    engine.subscribe(on_event)
    finished = await run_to_end(session)
    assert killed and engine.actors_lost == 1
    assert requeued, "the dead actor's unfinished tasks came back to the queue"
    assert (finished.succeeded, finished.failed, finished.cancelled) == (400, 0, 0)
    assert custom_ids(tmp_path / "run") == Counter(f"task-{i:04d}" for i in range(400))
    assert set(sim.stats()["successes_by_prompt"]) == set(prompts)
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        assert journal.history.logged(ActorLost)
    finally:
        journal.close()


async def test_a_cluster_that_keeps_losing_its_actors_ends_the_run_resumable_not_in_a_loop(tmp_path, sim_factory):
    """Every actor killed as soon as it sends, before any answer: the driver re-queues the lost
    tasks a bounded number of times, then stops the run with its reason; nothing is lost (every
    task unfinished, to resume) and nothing was paid twice as an answer."""
    sim = sim_factory(latency_ms=3000, seed=3)  # no answer before the kills
    session = ray_session(tmp_path, sim.base_url, [f"doomed {i}" for i in range(40)], concurrency=8)
    engine = session.engine
    killed: set[int] = set()

    def on_event(event) -> None:
        if isinstance(event, AttemptStarted):
            for actor_no, actor in enumerate(engine.actors):
                if actor_no not in killed:
                    killed.add(actor_no)
                    ray.kill(actor)

    engine.subscribe(on_event)
    finished = await run_to_end(session)
    assert finished.stop_reason and "Ray actors lost with no task finished" in finished.stop_reason
    assert 3 <= engine.actors_lost <= len(killed) <= 6, "bounded: a few replacements, then the stop"
    assert finished.succeeded == finished.failed == 0 and finished.cancelled == 40
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        assert len(journal.history.logged(ActorLost)) >= 3
        assert journal.queries.result_count() == 0 and all(
            not state.is_final for state in journal.queries.states().values()
        )
    finally:
        journal.close()


async def test_a_stop_on_ray_journals_nothing_per_task_never_sent(tmp_path, sim_factory):
    """A big Ray run stopped early: a cancellation for each task a shard had started, none for
    the thousands never sent (they stay queued, as on disk: a stop costs nothing per task)."""
    sim = sim_factory(latency_ms=20, seed=2)  # ~1,000 answers a second: the stop lands early
    session = ray_session(tmp_path, sim.base_url, [f"stop {i}" for i in range(3000)], concurrency=20)
    engine = session.engine
    done = [0]

    def on_event(event) -> None:
        if isinstance(event, TaskSucceeded):
            done[0] += 1
            if done[0] == 300:
                engine.stop_dispatch("stopped by the test")

    engine.subscribe(on_event)
    finished = await run_to_end(session)
    assert finished.stop_reason == "stopped by the test" and 300 <= finished.succeeded < 3000
    run_dir = tmp_path / "run"
    cancelled = journal_count(run_dir, "SELECT COUNT(*) FROM log WHERE kind = 'TaskCancelled'")
    retried = journal_count(run_dir, "SELECT COUNT(*) FROM log WHERE kind = 'TaskRetrying'")
    journal = Journal.open(run_dir, readonly=True)
    try:
        states = journal.queries.counts()
    finally:
        journal.close()
    assert cancelled <= 20 + retried, f"{cancelled} cancellations journaled at the stop"
    assert states.get("running", 0) == states.get("retrying", 0) == 0, states
    # the shards hear of the stop a little later than the driver asks: what they sent meanwhile
    # is answered; the rest was never sent and stays queued
    assert states["succeeded"] == finished.succeeded and states.get("queued", 0) >= 1000, states
    assert states["succeeded"] + states.get("queued", 0) + states.get("cancelled", 0) == 3000, states


async def test_keys_reach_actors_through_runtime_env_never_in_payloads(tmp_path, sim_factory, monkeypatch):
    sim = sim_factory(require_key=KEY)
    monkeypatch.setenv("RAY_RELAY_KEY", KEY)  # set after ray.init: only runtime_env can carry it
    specs = []
    real_spec = driver_module.ShardSpec

    def recording_spec(*args, **kwargs):
        spec = real_spec(*args, **kwargs)
        specs.append(spec)
        return spec

    monkeypatch.setattr(driver_module, "ShardSpec", recording_spec)
    session = ray_session(tmp_path, sim.base_url, [f"key task {i}" for i in range(20)], api_key_env="RAY_RELAY_KEY")
    finished = await run_to_end(session)
    assert finished.succeeded == 20, "the actors had the key (from runtime_env)"
    assert specs and all(KEY.encode() not in pickle.dumps(spec) for spec in specs)
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_cli_run_and_resume_on_an_existing_cluster(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", [f"cli task {i}" for i in range(30)])
    run_dir = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(run_dir),
        "--ray",
        "auto",
        "--ray-actors",
        "2",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert custom_ids(run_dir) == Counter(f"task-{i:04d}" for i in range(30))
    sim.reset()
    again = run_cli("resume", str(run_dir), "--headless", "--ray", "auto", timeout=120)
    assert again.returncode == 0, again.stderr
    assert sim.stats()["requests"] == 0, "resume sends only unfinished tasks"


def test_a_planned_swarm_runs_its_workers_on_actors_and_its_planner_and_aggregator_on_the_driver(tmp_path, sim):
    from swarm_tui.util.locations import bundled

    job = bundled("sample_jobs") / "research-swarm.toml"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(tmp_path / "run"),
        "--ray",
        "auto",
        "--ray-actors",
        "2",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert custom_ids(tmp_path / "run") == Counter(f"agent-{i:02d}" for i in range(1, 13))
    aggregate = json.loads((tmp_path / "run" / "aggregate.json").read_text())
    assert len(aggregate["sources"]) == 12
    assert sim.stats()["requests"] == 1 + 1 + 12 + 1  # plan, warm-up, workers, aggregate


async def test_the_budget_is_one_ledger_across_shards_and_sessions(tmp_path, sim_factory):
    """Each shard reserves against its part of the budget before it sends; a resume starts from
    what the journal says was spent (the shards used to run without the budget)."""
    sim = sim_factory(latency_ms=20)
    prices = {"custom/sim-1": {"input": 100.0, "cached_input": 100.0, "output": 100.0}}  # $ per 1M tokens
    session = ray_session(
        tmp_path, sim.base_url, [f"budgeted {i}" for i in range(200)], prices=prices, concurrency=8, budget_usd=0.1
    )
    try:
        first = await session.run()
    finally:
        await session.aclose()
    assert first.stop_reason and first.stop_reason.startswith("budget"), first
    spent_first = json.loads((tmp_path / "run" / "summary.json").read_text())["cost_usd"]
    assert 0 < spent_first <= 0.1
    resumed = SwarmSession.reopen(
        tmp_path / "run", settings=EngineSettings.of(concurrency=8, budget_usd=0.1), ray=RayOptions(actors=2)
    )
    try:
        await resumed.run()
    finally:
        await resumed.aclose()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert spent_first <= summary["cost_usd"] <= 0.1, "a resume on Ray spent as if nothing had been spent"
    assert summary["unfinished"] > 0


async def test_the_driver_replays_cached_answers_before_it_shards_any_task(tmp_path, sim_factory):
    """`--ray --cache`: the shards' validated answers are kept by the driver; run again, every task
    is a hit on the driver, and no actor (nor the simulator) sees a request."""
    sim = sim_factory(latency_ms=5)
    prompts = [f"ray cached {i}" for i in range(60)]
    cache = {"cache": CacheSettings(mode="readwrite", dir=str(tmp_path / "cache"))}
    for name in ("one", "two"):
        session = ray_session(tmp_path, sim.base_url, prompts, name=name, **cache)
        finished = await run_to_end(session)
        assert finished.succeeded == 60
        assert sim.stats()["requests"] == 60
    assert session.engine.stats.cache_hits == 60 and not session.engine.shards
    one = {line["custom_id"]: line for line in read_jsonl(tmp_path / "one" / "results.jsonl")}
    assert one == {line["custom_id"]: line for line in read_jsonl(tmp_path / "two" / "results.jsonl")}


def judged_swarm(tmp_path: Path, name: str):
    """A judged one-round swarm whose judged share is the sampled one alone (`first = 0`): the
    same answers are judged whatever order they come back in."""
    path = tmp_path / f"{name}.toml"
    path.write_text(
        'name = "judged"\nmodel = "sim-1"\ngoal = "judge on ray"\n'
        '[tasks]\ncount = 60\nprompt = "finding {agent}"\n'
        "[judge]\nrate = 0.3\nfirst = 0\nbaseline = 4\nwindow = 4\ndrop = 1.5\n"
    )
    return load_job(path)


def judged_run(run_dir: Path) -> tuple[dict, dict, Counter]:
    """summary.json, each judged answer's score by custom_id, and the judge calls per judged index."""
    summary = json.loads((run_dir / "summary.json").read_text())
    journal = Journal.open(run_dir, readonly=True)
    try:
        scores = journal.history.judgments()
        judged = {row.custom_id: scores[row.index][0] for row in journal.queries.tasks() if row.index in scores}
        judge_calls = Counter(line["idx"] for line in journal.queries.attempts_since(0) if line["idx"] <= -1_000_000)
    finally:
        journal.close()
    return summary, judged, judge_calls


async def test_a_judged_swarm_on_ray_agrees_with_the_same_swarm_run_here(tmp_path, sim_factory):
    """The judge on Ray: verdicts from the driver's view of the log, its calls made from the
    driver; the same job run locally judges the same answers, at the same cost."""
    runs = {}
    for name, ray_options in (("local", None), ("ray", RayOptions(actors=2))):
        sim = sim_factory(seed=5)
        profile = ProviderProfile(name="custom", base_url=sim.base_url)
        plan = RunPlan(profile, EngineSettings.of(concurrency=16), prices=JUDGE_PRICES)
        session = SwarmSession.open_new(judged_swarm(tmp_path, name), plan, tmp_path / name, ray=ray_options)
        assert session.judge is not None, "the judge runs on this engine"
        finished = await run_to_end(session)
        assert (finished.succeeded, finished.failed, finished.cancelled) == (60, 0, 0), name
        runs[name] = (*judged_run(tmp_path / name), sim.stats())
    local, on_ray = runs["local"], runs["ray"]
    assert (
        custom_ids(tmp_path / "ray")
        == custom_ids(tmp_path / "local")
        == Counter(f"agent-{i:02d}" for i in range(1, 61))
    )
    summary_here, judged_here, calls_here, sim_here = local
    summary_ray, judged_ray, calls_ray, sim_ray = on_ray
    assert judged_ray and judged_ray.keys() == judged_here.keys()  # the sampled share, once each
    assert all(count == 1 for count in calls_ray.values()), "every answer judged by one call"
    assert sim_ray["judge"]["requests"] == len(judged_ray) == sim_here["judge"]["requests"]
    assert summary_ray["quality"]["judged"] == summary_here["quality"]["judged"] == len(judged_ray)
    assert summary_ray["quality"]["judge_cost_usd"] == pytest.approx(
        summary_here["quality"]["judge_cost_usd"], abs=1e-6
    )
    assert summary_ray["cost_usd"] == pytest.approx(summary_here["cost_usd"], abs=1e-6)
    assert summary_ray["quality"]["mean"] == pytest.approx(summary_here["quality"]["mean"], abs=0.01)


async def test_the_judges_failover_on_ray_sends_every_shards_rest_to_the_fallback(tmp_path, sim_factory):
    """A multi-round judged swarm on Ray whose answers degrade: the drift the driver's judge sees
    fails every shard over (those running and those handed out later), as it does here."""
    primary = sim_factory(drift_after_rounds=0, seed=5)  # from round 2 on
    fallback = sim_factory(seed=6)
    path = tmp_path / "drift.toml"
    path.write_text(
        'name = "drift"\nmodel = "sim-1"\ngoal = "watch quality"\n'
        '[tasks]\ncount = 30\nprompt = "finding {agent}"\n[memory]\nrounds = 5\n'
        '[judge]\nrate = 0.1\nfirst = 4\nbaseline = 6\nwindow = 5\ndrop = 1.5\naction = "failover"\n'
    )
    profile = ProviderProfile(name="custom", base_url=primary.base_url, fallback_base_url=fallback.base_url)
    plan = RunPlan(profile, EngineSettings(), prices=JUDGE_PRICES)
    session = SwarmSession.open_new(load_job(path), plan, tmp_path / "run", ray=RayOptions(actors=2))
    events: list = []
    session.engine.subscribe(events.append)
    finished = await run_to_end(session)
    assert finished.failed == 0
    drift = next(e for e in events if isinstance(e, QualityDrift))
    assert "failed over" in drift.detail
    switched = [e for e in events if isinstance(e, EndpointSwitched)]
    assert switched and all(e.endpoint.endswith("fallback") for e in switched)
    after = events[events.index(drift) :]
    next_round = next(i for i, e in enumerate(after) if isinstance(e, TasksAdded))  # new shards from here
    later = [e for e in after[next_round:] if isinstance(e, AttemptStarted) and e.index >= 0]
    assert later and all(e.endpoint.endswith("fallback") for e in later), "a later shard starts on the fallback"
    assert fallback.stats()["successes"] > 0
