"""One truth for every view: the journal's event log drives the live view and the attached one.

A live view and a view attached from the journal must agree at every moment: both are fed the
same events in the same order (the engine's, live; the log's, attached), through the same
`TaskBoard` and `RunStats`. These tests compare them event by event, over a run with retries,
a failed task, a failover, an abort and a resume, and after a real SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time

from swarm_tui.core.events import EndpointSwitched, TaskState
from swarm_tui.engine import EngineSettings
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.frontend.live import LiveRun
from swarm_tui.jobs import load_job
from swarm_tui.journal import Journal
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession

from tests.conftest import start_cli, write_batch
from tests.helpers import open_session, wait_until


def snapshot(states, stats, limit, ceiling, paused) -> dict:
    """What a screen shows of a run: the grid's counts, the footer's figures, the limit."""
    counts = {state.value: 0 for state in TaskState}
    for state in states.values():
        counts[state.value] += 1
    return {
        "cells": counts,
        "stats": {
            key: getattr(stats, key)
            for key in (
                "total",
                "succeeded",
                "failed",
                "cancelled",
                "in_flight",
                "sent",
                "retried",
                "rate_limited",
                "server_errors",
                "timeouts",
                "hedged",
                "usage",
            )
        },
        "latencies_ms": list(stats.latencies_ms),
        "cost": round(stats.cost_usd, 9),
        "limit": limit,
        "ceiling": ceiling,
        "paused": paused,
    }


def live_recorder(source: LiveRun, into: list) -> None:
    engine = source.engine
    source.subscribe(
        lambda _: into.append(snapshot(engine.states, engine.stats, source.limit, source.ceiling, source.paused))
    )


def attached_recorder(attached: AttachedRun, into: list) -> None:
    attached.subscribe(
        lambda _: into.append(
            snapshot(attached.states, attached.stats, attached.limit, attached.ceiling, attached.paused)
        )
    )


async def follow(attached: AttachedRun, stop: asyncio.Event) -> None:
    while not stop.is_set():
        attached.poll()
        await asyncio.sleep(0.02)


async def test_live_and_attached_views_agree_event_by_event(tmp_path, sim_factory):
    primary = sim_factory(latency_ms=15)
    secondary = sim_factory(latency_ms=15, seed=7)
    prompts = [f"task {i}" for i in range(160)]
    for i in range(0, 160, 9):
        prompts[i] = f"flaky {i} [[sim:500x1]]"  # retried once
    prompts[5] = "refused [[sim:400]]"  # fails for good: retried by the resume
    run_dir = tmp_path / "run"
    job = load_job(write_batch(tmp_path / "job.jsonl", prompts))
    profile = ProviderProfile("custom", base_url=primary.base_url, fallback_base_url=secondary.base_url)
    plan = RunPlan(profile, EngineSettings.of(concurrency=12, max_attempts=3))
    session = SwarmSession.open_new(job, plan, run_dir)
    live_first: list[dict] = []
    live = LiveRun(session)
    live_recorder(live, live_first)
    attached = AttachedRun(run_dir)
    seen_attached: list[dict] = []
    attached_recorder(attached, seen_attached)
    stop_following = asyncio.Event()
    follower = asyncio.create_task(follow(attached, stop_following))
    switches: list[EndpointSwitched] = []
    session.engine.subscribe(lambda e: isinstance(e, EndpointSwitched) and switches.append(e))
    try:
        run = asyncio.create_task(live.run())
        await wait_until(lambda: session.engine.stats.succeeded >= 30, "30 answers from the primary")
        live.set_concurrency(16)
        live.pause()
        await asyncio.sleep(0.05)
        live.resume()
        primary.update_config(down=True)  # the rest fails over to the secondary
        await wait_until(lambda: bool(switches), "a failover")
        await wait_until(lambda: session.engine.stats.succeeded >= 90, "90 answers")
        live.abort()
        first = await asyncio.wait_for(run, 30)
        assert first.aborted and first.cancelled > 0
    finally:
        await session.aclose()
    assert session.engine.states[5] is TaskState.FAILED
    failed_first = session.engine.board.count(TaskState.FAILED)  # task 5, and any the outage failed

    resumed = SwarmSession.reopen(run_dir, retry_failed=True)
    live_second: list[dict] = []
    live = LiveRun(resumed)
    live_recorder(live, live_second)
    try:
        second = await asyncio.wait_for(live.run(), 60)
    finally:
        await resumed.aclose()
    await wait_until(
        lambda: attached.follower.finished is not None and len(seen_attached) >= len(live_first) + len(live_second),
        "the attached view to read the whole log",
    )
    stop_following.set()
    await follower
    await attached.aclose()

    assert second.succeeded == 159 and second.failed == 1  # task 5 is refused again
    # every moment of the first session, as the live view saw it, is what the attached one saw
    for k, (a, b) in enumerate(zip(seen_attached, live_first, strict=False)):
        assert a == b, (k, {key: (a[key], b[key]) for key in a if a[key] != b[key]})
    assert seen_attached[: len(live_first)] == live_first
    # then what `resume --retry-failed` logged before its engine started (the failed tasks requeued)
    between = len(seen_attached) - len(live_first) - len(live_second)
    assert between == failed_first
    # and every moment of the resumed session (whose live view starts from the replayed log)
    assert seen_attached[-len(live_second) :] == live_second
    end = seen_attached[-1]
    assert end["cells"]["running"] == 0 and end["stats"]["in_flight"] == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["succeeded"], summary["failed"], summary["unfinished"]) == (
        end["stats"]["succeeded"],
        end["stats"]["failed"],
        end["stats"]["cancelled"],
    )
    assert summary["requests"]["sent"] == end["stats"]["sent"]
    assert summary["requests"]["retried"] == end["stats"]["retried"]


def _run_in_subprocess(tmp_path, base_url: str, prompts: list[str]) -> subprocess.Popen:
    job = write_batch(tmp_path / "job.jsonl", prompts)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return start_cli(
        "run",
        str(job),
        "--headless",
        "--out",
        str(tmp_path / "run"),
        "--base-url",
        base_url,
        "--concurrency",
        "8",
        "--timeout",
        "60",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_a_view_of_a_killed_run_shows_its_calls_lost_and_resume_agrees(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5)
    prompts = [f"t{i}" for i in range(30)] + [f"hangs {i} [[sim:hangx1]]" for i in range(8)]
    # the last 8 hang in the 8 slots: in flight when the process is killed, answered when re-sent
    proc = _run_in_subprocess(tmp_path, sim.base_url, prompts)
    run_dir = tmp_path / "run"
    try:

        def hung_calls_started() -> bool:
            if not (run_dir / "journal.sqlite").exists():
                return False
            journal = Journal.open(run_dir, readonly=True)
            try:
                return journal.queries.counts().get("succeeded", 0) >= 30 and len(journal.history.log_since(0)) > 0
            finally:
                journal.close()

        await wait_until(hung_calls_started, "the run to answer 30 tasks and hang on the rest", timeout=60)
        await asyncio.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    # seen right after the kill: the heartbeat is fresh, so the calls still look in flight
    attached = AttachedRun(run_dir)
    attached.poll()
    running = [i for i, s in attached.states.items() if s is TaskState.RUNNING]
    assert running and attached.stats.in_flight == len(running)
    # seen once the heartbeat is stale: the writer is gone, its calls in flight were lost
    later = AttachedRun(run_dir, clock=lambda: time.time() + 60)
    later.poll()
    assert not [i for i, s in later.states.items() if s is TaskState.RUNNING]
    assert later.stats.in_flight == 0 and later.stats.cancelled == 38 - later.stats.succeeded
    closed_view = snapshot(later.states, later.stats, later.limit, later.ceiling, later.paused)

    # the resume journals the same closing, then finishes the run; an attached view replays it all
    resumed = SwarmSession.reopen(run_dir)
    lost = [a for i in range(38) for a in resumed.journal.queries.attempts_of(i) if a["outcome"] == "cancelled"]
    assert len(lost) == len(running)  # each lost call is journaled (it may have been billed)
    try:
        finished = await asyncio.wait_for(resumed.run(), 60)
    finally:
        await resumed.aclose()
    assert finished.succeeded == 38
    await attached.aclose()
    await later.aclose()
    replayed = AttachedRun(run_dir)
    seen: list[dict] = []
    attached_recorder(replayed, seen)
    replayed.poll()
    assert closed_view in seen  # the moment the killed run was closed is the one the view showed
    assert seen[-1]["cells"]["succeeded"] == 38 and seen[-1]["stats"]["in_flight"] == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"]["sent"] == seen[-1]["stats"]["sent"]
    await replayed.aclose()


async def test_what_is_in_flight_is_one_fact_and_no_view_of_it_passes_the_limit(tmp_path, sim_factory):
    """The board owns what is in flight (each running task's attempt, a hedged attempt's backup);
    the footer's figure (`RunStats`), the agents' cells, the engine's slots and handles, and an
    attached view's board are fed the same events: at every event of a run with retries, hedged
    backups, stragglers and a failed task they agree, and none passes the limit (a backup holds no
    slot: the calls on the wire pass it by the backups alone)."""
    limit = 6
    sim = sim_factory(latency_ms=30.0, latency_sigma=0.2)
    prompts = [f"task {i}" for i in range(90)]
    for i in range(0, 90, 11):
        prompts[i] = f"flaky {i} [[sim:500x1]]"
    prompts[7] = "refused [[sim:400]]"
    prompts += [f"hangs {i} [[sim:hangx1]]" for i in range(3)]
    session = open_session(
        tmp_path, sim.base_url, prompts, concurrency=limit, adaptive=False, hedge=True, timeout_s=60.0
    )
    engine, board = session.engine, session.engine.board
    live = LiveRun(session)
    wrong: list[str] = []
    most = {"tasks": 0, "calls": 0, "backups": 0}

    def check(event) -> None:
        calls, tasks, backups = board.live_calls, board.live_tasks, len(board.backups)
        most.update(
            tasks=max(most["tasks"], tasks), calls=max(most["calls"], calls), backups=max(most["backups"], backups)
        )
        flying = {i for i, flight in board.in_flight.items() if not flight.batch}
        if engine.stats.in_flight != calls:
            wrong.append(f"after {event}: the figure says {engine.stats.in_flight} calls, the board {calls}")
        if set(live.view.agents.in_flight) != flying:
            wrong.append(
                f"after {event}: the cells say {sorted(live.view.agents.in_flight)}, the board {sorted(flying)}"
            )
        if tasks > limit or engine.admission.in_flight > limit or engine.queue.in_flight > limit:
            wrong.append(
                f"after {event}: past the limit ({tasks}, {engine.admission.in_flight}, {engine.queue.in_flight})"
            )
        if calls > limit + backups:
            wrong.append(f"after {event}: {calls} calls on the wire, {backups} of them backups")

    live.subscribe(check)
    attached = AttachedRun(tmp_path / "run")

    def check_attached(event) -> None:
        seen = attached.view.board
        assert seen is not None
        if attached.stats.in_flight != seen.live_calls or seen.live_tasks > limit:
            wrong.append(
                f"attached, after {event}: {attached.stats.in_flight} vs {seen.live_calls} ({seen.live_tasks})"
            )

    attached.subscribe(check_attached)
    stop_following = asyncio.Event()
    follower = asyncio.create_task(follow(attached, stop_following))
    try:
        finished = await asyncio.wait_for(live.run(), 90)
    finally:
        await session.aclose()
    await wait_until(lambda: attached.follower.finished is not None, "the attached view to read the whole log")
    stop_following.set()
    await follower
    await attached.aclose()
    assert (finished.succeeded, finished.failed) == (len(prompts) - 1, 1)
    assert not wrong, wrong[:5]
    assert most["tasks"] == limit, "the run filled its slots (else the limit was not tested)"
    assert most["backups"] >= 1 and engine.hedges_sent >= 1, (
        "a straggler got a backup (else the backups were not tested)"
    )
    assert board.live_calls == engine.stats.in_flight == 0 and not live.view.agents.in_flight
