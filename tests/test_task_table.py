"""Issue 32, flat memory: a run's tasks stay in its journal (`journal.task_table.JournalTasks`),
their bodies read when looked up, a window of rows a query; the engine holds indices and states.
A real SQLite journal each time; the session test runs real HTTP against the simulator."""

from __future__ import annotations

import asyncio
import random
import tracemalloc

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.events import Attempt, TaskState
from swarm_tui.core.task import Task
from swarm_tui.jobs import load_job
from swarm_tui.journal import Journal
from swarm_tui.journal.task_table import WINDOW, JournalTasks
from swarm_tui.run.session import SwarmSession

from tests.helpers import open_session, wait_until


def _task(index: int, text: str = "") -> Task:
    return Task(index, f"t{index}", {"model": "m", "messages": [{"role": "user", "content": text or f"ask {index}"}]})


def _journal(tmp_path, indices) -> Journal:
    return Journal.create(tmp_path / "run", [_task(i) for i in indices], {"job": {}, "plan": {}})


def test_the_tasks_are_read_a_window_of_rows_a_query_in_order(tmp_path, monkeypatch):
    journal = _journal(tmp_path, range(1000))
    reads: list[int] = []
    window = journal.queries.task_window
    monkeypatch.setattr(journal.queries, "task_window", lambda first, end: reads.append(first) or window(first, end))
    tasks = journal.task_table()
    assert isinstance(tasks, JournalTasks) and len(tasks) == 1000 and list(tasks) == list(range(1000))
    assert [tasks[i] for i in range(1000)] == [_task(i) for i in range(1000)]
    assert reads == list(range(0, 1000, WINDOW))  # four queries for a thousand tasks
    assert tasks[3] is tasks[3] and reads == list(range(0, 1000, WINDOW))  # a window read stays kept
    assert 999 in tasks and 1000 not in tasks and tasks.get(1000) is None and "3" not in tasks
    journal.close()


def test_lookups_in_any_order_find_every_task_however_many_windows_come_and_go(tmp_path):
    """A resumed run asks for its unfinished tasks here and there, and answers come back in any
    order: each lookup finds its task, whichever windows were read and let go meanwhile."""
    journal = _journal(tmp_path, range(5000))
    tasks = journal.task_table()
    chosen = random.Random(7).choices(range(5000), k=1_000)
    assert all(tasks[i].custom_id == f"t{i}" for i in chosen)
    journal.close()


def test_what_the_engine_sets_is_what_is_read_and_new_tasks_follow_in_order(tmp_path):
    journal = _journal(tmp_path, range(10))
    tasks = journal.task_table()
    grown = Task(4, "t4", {"model": "m", "messages": [{"role": "user", "content": "ask 4"}, {"role": "tool"}]})
    tasks[4] = grown  # an agent's transcript grew
    tasks[20] = _task(20)  # a planned swarm's new agent
    assert tasks[4] is grown and tasks[20] == _task(20) and len(tasks) == 11
    assert list(tasks) == [*range(10), 20]
    journal.close()


def test_a_run_whose_indices_have_gaps_is_read_whole(tmp_path):
    journal = _journal(tmp_path, [0, 5, 7, 300, 301])
    tasks = journal.task_table()
    assert list(tasks) == [0, 5, 7, 300, 301] and len(tasks) == 5
    assert [tasks[i].custom_id for i in tasks] == ["t0", "t5", "t7", "t300", "t301"]
    assert 6 not in tasks and 302 not in tasks and tasks.get(6) is None
    journal.close()


def test_a_resume_with_another_model_rewrites_the_unanswered_bodies_in_the_journal(tmp_path):
    journal = _journal(tmp_path, range(4))
    journal.begin_session()
    journal.records.record_success(Attempt(1, 1, "sim", 0.0, 1.0, "ok"), {"choices": []})
    journal.replace_model("m2")
    tasks = journal.task_table()
    assert [tasks[i].body["model"] for i in range(4)] == ["m2", "m", "m2", "m2"]  # task 1, answered, keeps its own
    assert [tasks[i].body["messages"] for i in range(4)] == [_task(i).body["messages"] for i in range(4)]
    journal.close()


async def test_a_sessions_engine_holds_indices_not_bodies(sim_factory, tmp_path):
    """Tasks of 2.5 KB each: what a session keeps grows by a tenth of a body a task at most once its
    journal has them (~0.1 KB a task, an index and a state; before, all of the body), measured as the
    growth from 2,000 to 10,000 tasks (constant costs cancel); the run still answers from them."""
    sim = sim_factory(latency_ms=0)
    prompts = [f"question {i}: " + "context " * 300 for i in range(10_000)]
    await open_session(tmp_path, sim.base_url, prompts[:1], run_name="warm-up").aclose()  # the imports

    def kept_by(count: int) -> tuple[int, SwarmSession]:
        tracemalloc.start()
        try:
            session = open_session(tmp_path, sim.base_url, prompts[:count], run_name=f"run-{count}")
            return tracemalloc.get_traced_memory()[0], session
        finally:
            tracemalloc.stop()

    small, first = kept_by(2_000)
    await first.aclose()
    large, session = kept_by(10_000)
    tracemalloc.start()
    try:
        bodies = list(load_job(tmp_path / "run-10000.jsonl").tasks)
        per_body = tracemalloc.get_traced_memory()[0] / len(bodies)
        del bodies
    finally:
        tracemalloc.stop()
    try:
        per_task = (large - small) / 8_000
        assert per_task < per_body / 10, f"{per_task:.0f} bytes kept a task, a body is {per_body:.0f}"
        tasks = session.engine.tasks
        assert len(tasks) == 10_000 and tasks[9_999].prompt == prompts[9_999]
        run = asyncio.create_task(session.run())
        await wait_until(lambda: session.engine.stats.succeeded >= 200, "200 answers", timeout=30)
        session.engine.abort("enough")
        await asyncio.wait_for(run, 60)
        assert session.engine.stats.succeeded >= 200
        assert session.engine.states[0] is TaskState.SUCCEEDED
    finally:
        await session.aclose()


def test_a_resumed_runs_board_is_its_states_read_once_not_a_second_dict():
    """A resume reads every task's state from the journal: the board keeps that dict (a million
    entries once, not twice); states for some tasks only are laid over a queued board."""
    every = {0: TaskState.SUCCEEDED, 1: TaskState.FAILED, 2: TaskState.QUEUED}
    board = TaskBoard.of(range(3), every)
    assert board.states is every
    some = {1: TaskState.FAILED}
    board = TaskBoard.of(range(3), some)
    assert board.states == {0: TaskState.QUEUED, 1: TaskState.FAILED, 2: TaskState.QUEUED} and board.states is not some
    assert TaskBoard.of(range(2)).states == {0: TaskState.QUEUED, 1: TaskState.QUEUED}
