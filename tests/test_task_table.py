"""Issue 32, flat memory: a run's tasks stay in its journal (`journal.task_table.JournalTasks`),
their bodies read when looked up, a window of rows a query; the engine holds indices and states.
A real SQLite journal each time; the session test runs real HTTP against the simulator."""

from __future__ import annotations

import asyncio
import tracemalloc

from swarm_tui.core.events import Attempt, TaskState
from swarm_tui.core.task import Task
from swarm_tui.journal import Journal
from swarm_tui.journal.task_table import WINDOW, JournalTasks

from .helpers import open_session


def _task(index: int, text: str = "") -> Task:
    return Task(index, f"t{index}", {"model": "m", "messages": [{"role": "user", "content": text or f"ask {index}"}]})


def _journal(tmp_path, indices) -> Journal:
    return Journal.create(tmp_path / "run", [_task(i) for i in indices], {"job": {}, "plan": {}})


def test_the_tasks_are_read_a_window_of_rows_a_query_in_order(tmp_path, monkeypatch):
    journal = _journal(tmp_path, range(1000))
    reads: list[int] = []
    window = journal.task_window
    monkeypatch.setattr(journal, "task_window", lambda first, count: reads.append(first) or window(first, count))
    tasks = journal.task_table()
    assert isinstance(tasks, JournalTasks) and len(tasks) == 1000 and list(tasks) == list(range(1000))
    assert [tasks[i] for i in range(1000)] == [_task(i) for i in range(1000)]
    assert reads == list(range(0, 1000, WINDOW))  # four queries for a thousand tasks
    assert tasks[3] is tasks[3] and reads == list(range(0, 1000, WINDOW))  # a window read stays kept
    assert 999 in tasks and 1000 not in tasks and tasks.get(1000) is None and "3" not in tasks
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
    journal.record_success(Attempt(1, 1, "sim", 0.0, 1.0, "ok"), {"choices": []})
    journal.replace_model("m2")
    tasks = journal.task_table()
    assert [tasks[i].body["model"] for i in range(4)] == ["m2", "m", "m2", "m2"]  # task 1, answered, keeps its own
    assert [tasks[i].body["messages"] for i in range(4)] == [_task(i).body["messages"] for i in range(4)]
    journal.close()


async def test_a_sessions_engine_holds_indices_not_bodies(sim_factory, tmp_path):
    """20,000 tasks of 1 KB each: the session keeps a small part of their bodies' memory once its
    journal has them (before: all of it, 1.2 KB a task), and the run still answers from them."""
    sim = sim_factory(latency_ms=0)
    prompts = [f"question {i}: " + "context " * 120 for i in range(20_000)]
    tracemalloc.start()
    try:
        held = [_task(i, text) for i, text in enumerate(prompts)]
        bodies = tracemalloc.get_traced_memory()[0]
        del held
        before = tracemalloc.get_traced_memory()[0]
        session = open_session(tmp_path, sim.base_url, prompts, concurrency=50)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    try:
        assert kept < bodies / 5, f"the session kept {kept:,} bytes of {bodies:,} of bodies"
        tasks = session.engine.tasks
        assert len(tasks) == 20_000 and tasks[19_999].prompt == prompts[19_999]
        run = asyncio.create_task(session.run())
        for _ in range(600):
            if session.engine.stats.succeeded >= 200:
                break
            await asyncio.sleep(0.05)
        session.engine.abort("enough")
        await asyncio.wait_for(run, 60)
        assert session.engine.stats.succeeded >= 200
        assert session.engine.states[0] is TaskState.SUCCEEDED
    finally:
        await session.aclose()
