"""Group commit: the answers that arrive in one turn of the loop are journaled in one
transaction, and still no view hears of an answer before it is on disk."""

from __future__ import annotations

import sqlite3

import pytest
from swarm_tui.core.events import TaskSucceeded

from tests.helpers import open_session


async def test_every_answer_shown_is_already_on_disk(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=0.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"group {i}" for i in range(400)], concurrency=50)
    reader = sqlite3.connect(f"file:{tmp_path / 'run' / 'journal.sqlite'}?mode=ro", uri=True)
    missing: list[int] = []

    def on_disk_before_shown(event) -> None:
        if isinstance(event, TaskSucceeded):  # another connection, as `attach` reads it
            row = reader.execute("SELECT ok FROM results WHERE idx = ?", (event.index,)).fetchone()
            if row != (1,):
                missing.append(event.index)

    session.engine.subscribe(on_disk_before_shown)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
        reader.close()
    assert finished.succeeded == 400 and missing == []


def test_a_transaction_keeps_all_of_its_writes_or_none(tmp_path):
    from swarm_tui.core.notes import MemoryFlushed
    from swarm_tui.core.task import Task
    from swarm_tui.journal import Journal

    journal = Journal.create(tmp_path / "run", [Task(0, "a", {}), Task(1, "b", {})], {"plan": {}, "job": {}})
    with pytest.raises(sqlite3.IntegrityError), journal.writer.transaction():
        journal.writer.append([MemoryFlushed(1)])
        journal.records.add_tasks([Task(2, "c", {})])
        journal.writer.db.execute("INSERT INTO tasks (idx, custom_id, body, state) VALUES (3, 'a', '{}', 'queued')")
    assert [row.index for row in journal.queries.tasks()] == [0, 1]  # the write that came first was rolled back too
    assert not journal.history.logged(MemoryFlushed)
    journal.close()
