"""The garbage collector paced for a running swarm: the young generation collected ten times less
often while a run runs, the process's own threshold back when the last run in it ends."""

from __future__ import annotations

import gc

from swarm_tui.core.events import TaskSucceeded
from swarm_tui.util.collection import RUN_GEN0_THRESHOLD, collecting_less_often

from tests.helpers import open_session


def test_runs_that_nest_keep_the_pace_until_the_last_ends_and_a_higher_threshold_is_left_alone():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with collecting_less_often():
            with collecting_less_often():
                assert gc.get_threshold() == (RUN_GEN0_THRESHOLD, 10, 10)
            assert gc.get_threshold() == (RUN_GEN0_THRESHOLD, 10, 10), "the outer run still runs"
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 5, 5)  # the user's own, higher: theirs
        with collecting_less_often():
            assert gc.get_threshold() == (50_000, 5, 5)
        assert gc.get_threshold() == (50_000, 5, 5)
    finally:
        gc.set_threshold(*before)


async def test_an_engine_collects_less_often_while_it_runs_and_not_after(tmp_path, sim):
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    seen: list[int] = []
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(20)])
    session.engine.subscribe(
        lambda event: seen.append(gc.get_threshold()[0]) if isinstance(event, TaskSucceeded) else None
    )
    try:
        finished = await session.run()
        assert finished.succeeded == 20
        assert set(seen) == {RUN_GEN0_THRESHOLD}
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        await session.aclose()
        gc.set_threshold(*before)
