"""Decisions a user can trust: retries start when they say, ahead of tasks never tried."""

from __future__ import annotations

from swarm_tui.core.events import AttemptStarted, TaskFailed, TaskRetrying
from swarm_tui.engine import TaskState

from tests.helpers import open_session


async def test_a_task_whose_backoff_ended_goes_ahead_of_untried_tasks(tmp_path, sim_factory):
    """Once its backoff has ended (the task is back in the ready queue), at most the one untried
    task the dispatcher already holds may start before it. Read from the engine at each start,
    not from clocks: a due time computed from journaled timestamps made this test flaky."""
    sim = sim_factory(latency_ms=100.0, latency_sigma=0.0)
    prompts = ["first [[sim:500x1]]"] + [f"untried {i}" for i in range(1, 30)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=1, adaptive=False)
    engine = session.engine
    order: list[int] = []
    started_while_due: list[int] = []
    states_while_waiting: list[TaskState] = []

    def on_event(event) -> None:
        if not isinstance(event, AttemptStarted):
            return
        order.append(event.index)
        if event.index != 0:
            states_while_waiting.append(engine.states[0])
            if 0 in engine.queue.queued:  # its backoff has ended and it waits for a slot
                started_while_due.append(event.index)

    engine.subscribe(on_event)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 30
    later = order.index(0, 1)  # the retry's place in the dispatch order
    assert len(started_while_due) <= 1, f"untried tasks went first although the retry was due: {started_while_due}"
    assert later < 29, "the retry waited behind the whole queue"
    waiting = states_while_waiting[: later - 1]
    assert waiting and all(s is TaskState.RETRYING for s in waiting), "a task waiting to retry shows as retrying"


async def test_retry_failed_mid_run_dispatches_before_the_untried_queue(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=50.0, latency_sigma=0.0)
    prompts = ["bad [[sim:400x1]]"] + [f"untried {i}" for i in range(1, 40)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=1, adaptive=False)
    engine = session.engine
    order: list[int] = []

    def on_event(event) -> None:
        if isinstance(event, AttemptStarted):
            order.append(event.index)
        elif isinstance(event, TaskFailed) and event.attempt.index == 0:
            assert engine.retry_failed([0]) == [0]  # the user pressed r at once

    engine.subscribe(on_event)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 40
    assert order.index(0, 1) <= 2, f"r put the agent at the back of the queue: {order[:10]}"


async def test_retrying_count_matches_the_tasks_waiting_out_a_backoff(tmp_path, sim_factory):
    """A task is "retrying" from its failed attempt until it is in flight again: the engine's
    states (what the legend and the grid count) must say so at every event, including while a
    task whose backoff ended waits for a slot. The expected set is derived from the events."""
    sim = sim_factory(latency_ms=100.0, latency_sigma=0.0)
    prompts = [f"flaky {i} [[sim:503x1]]" for i in range(5)] + [f"fine {i}" for i in range(30)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=2, adaptive=False)
    engine = session.engine
    waiting: set[int] = set()
    mismatches: list[tuple] = []

    def on_event(event) -> None:
        if isinstance(event, TaskRetrying):
            waiting.add(event.attempt.index)
        elif isinstance(event, AttemptStarted):
            waiting.discard(event.index)
        retrying = {i for i, s in engine.states.items() if s is TaskState.RETRYING}
        if retrying != waiting:
            mismatches.append((type(event).__name__, sorted(waiting), sorted(retrying)))

    engine.subscribe(on_event)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 35
    assert not mismatches, mismatches[:3]
