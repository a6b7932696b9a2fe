"""`swarm-tui attach`: a journal written by a running session, replayed as engine events, and
steering commands that reach that session through the journal's control queue."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter

from swarm_tui.config import Config
from swarm_tui.core.events import TaskSucceeded
from swarm_tui.engine import RunStats, TaskState
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.journal import Journal
from swarm_tui.journal.migrate import JournalFollower
from swarm_tui.run.outputs import facts_from_meta, summarize
from swarm_tui.run.session import SwarmSession
from swarm_tui.ui.app import make_app

from tests.helpers import open_session, wait_until
from tests.test_ui_app import FLAKY, wait_for


def assert_matches_journal(stats: RunStats, states, run_dir) -> None:
    journal = Journal.open(run_dir, readonly=True)
    try:
        summary = summarize(journal, facts_from_meta(journal)).to_json()
        assert dict(Counter(states.values())) == {TaskState(k): v for k, v in journal.queries.counts().items()}
    finally:
        journal.close()
    assert (stats.succeeded, stats.failed) == (summary["succeeded"], summary["failed"])
    assert stats.cancelled == summary["unfinished"]
    assert stats.sent == summary["requests"]["sent"]
    assert stats.retried == summary["requests"]["retried"]
    assert (stats.usage.prompt, stats.usage.completion) == (
        summary["tokens"]["prompt"],
        summary["tokens"]["completion"],
    )
    assert abs(stats.cost_usd - (summary["cost_usd"] or 0.0)) < 1e-6
    assert stats.in_flight == 0


async def test_a_replayed_journal_gives_the_same_figures_as_the_run(tmp_path, sim_factory):
    """Retries, final failures, a retry of the failed, an abort and a resume: all in one journal."""
    sim = sim_factory(latency_ms=30.0, latency_sigma=0.0)
    prompts = [f"task {i}" + (" [[sim:500x2]]" if i % 5 == 0 else "") for i in range(40)]
    session = open_session(tmp_path, sim.base_url, prompts, max_attempts=2, concurrency=4)
    try:
        first = await session.run()
        assert first.failed == 8
        session.engine.set_concurrency(1)  # the retried eight go one at a time: the abort lands mid-way
        retried_ok = []
        session.engine.subscribe(lambda e: isinstance(e, TaskSucceeded) and retried_ok.append(e.index))
        session.engine.retry_failed()
        runner = asyncio.create_task(session.run())
        await wait_until(lambda: len(retried_ok) >= 2, "two of the retried tasks to succeed")
        session.engine.abort()
        finished = await runner
        assert finished.aborted and 2 <= finished.succeeded - 32 < 8, "the abort landed mid-way"
    finally:
        await session.aclose()
    run_dir = tmp_path / "run"
    attached = AttachedRun(run_dir)
    try:
        attached.poll()
        assert attached.follower.finished is not None and attached.follower.finished.aborted
        assert_matches_journal(attached.stats, attached.states, run_dir)
        assert not attached.live and attached.liveness() == "the run that wrote it has ended"
    finally:
        await attached.aclose()

    resumed = SwarmSession.reopen(run_dir)
    try:
        await resumed.run()
    finally:
        await resumed.aclose()
    attached = AttachedRun(run_dir)
    try:
        attached.poll()
        assert Counter(attached.states.values()) == Counter({TaskState.SUCCEEDED: 40})
        assert_matches_journal(attached.stats, attached.states, run_dir)
    finally:
        await attached.aclose()


async def test_following_a_live_run_polls_incrementally_and_steers_it(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=80.0, latency_sigma=0.0)
    prompts = [f"task {i}" + (FLAKY if i % 6 == 0 else "") for i in range(60)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=4)
    runner = asyncio.create_task(session.run())
    attached = AttachedRun(tmp_path / "run")
    try:
        polls = 0

        async def poll() -> None:
            nonlocal polls
            attached.poll()
            polls += 1
            await asyncio.sleep(0.05)

        await wait_until(lambda: attached.stats.succeeded >= 8, "the attached view to see 8 successes", step=poll)
        assert polls > 1 and attached.live
        attached.pause()
        await wait_until(lambda: session.engine.paused, "the pause command to reach the engine")
        attached.poll()
        assert attached.paused, "the attached view learns of the pause from the journal"
        attached.set_concurrency(7)
        attached.resume()
        await asyncio.wait_for(runner, 20)
        assert session.engine.admission.limit <= 7
        attached.poll()
        assert not attached.paused
        assert_matches_journal(attached.stats, attached.states, tmp_path / "run")
        assert Counter(attached.states.values()) == Counter({TaskState.SUCCEEDED: 60})
        assert attached.stats.retried == 10, "the 10 flaky agents were each retried once"
    finally:
        if not runner.done():
            session.engine.abort()
            await runner
        await session.aclose()
        await attached.aclose()


async def test_the_attached_screen_steers_the_running_engine(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=150.0, latency_sigma=0.0)
    prompts = [f"task {i}" for i in range(200)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=5)
    runner = asyncio.create_task(session.run())
    source = AttachedRun(tmp_path / "run")
    app = make_app(source, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: source.stats.succeeded >= 5 and source.live, what="the view to follow")
            assert app.check_action("toggle_pause", ()) is True
            await pilot.press("p")
            await wait_for(pilot, lambda: session.engine.paused, what="the engine to pause")
            await wait_for(pilot, lambda: app.phase == "PAUSED", what="the view to show the pause")
            await pilot.press("p")
            await wait_for(pilot, lambda: not session.engine.paused, what="the engine to resume")
            await pilot.press("a", "y")
            await wait_for(pilot, lambda: runner.done(), what="the engine to abort")
            await wait_for(pilot, lambda: app.phase == "ABORTED", what="the view to show the abort")
            assert app.check_action("retry_failed", ()) is None, "nobody to steer any more"
            await pilot.press("q")
        assert app.return_value == 0, "leaving an attached view is not a failure"
        assert runner.result().aborted
    finally:
        if not runner.done():
            session.engine.abort()
            await runner
        await session.aclose()


OLD_EVENTS_DDL = (
    "CREATE TABLE events (id INTEGER PRIMARY KEY, at REAL NOT NULL, session INTEGER NOT NULL, "
    "kind TEXT NOT NULL, data TEXT)"
)


def test_follower_orders_a_resume_before_its_attempts(tmp_path):
    """Events and attempts interleave: a `run` (resume) comes before that session's attempts."""
    from swarm_tui.core.task import Task

    tasks = [Task(i, f"t{i}", {"model": "m", "messages": [{"role": "user", "content": "x"}]}) for i in range(2)]
    journal = Journal.create(tmp_path / "r", tasks, {"plan": {"settings": {"concurrency": 3}}})
    journal.begin_session()
    t0 = time.time()
    db = journal.writer.db
    db.execute(OLD_EVENTS_DDL)  # a schema-1 journal's run events, as that version wrote them
    db.execute("INSERT INTO events (at, session, kind, data) VALUES (?, 1, 'run', '{\"pending\": 2}')", (t0,))
    db.execute(
        "INSERT INTO attempts (idx, number, session, endpoint, started_at, latency_ms, outcome) "
        "VALUES (0, 1, 1, 'e', ?, 10, 'cancelled')",
        (t0 + 1,),
    )
    db.execute("INSERT INTO events (at, session, kind, data) VALUES (?, 1, 'finished', '{}')", (t0 + 2,))
    db.execute("INSERT INTO events (at, session, kind, data) VALUES (?, 2, 'run', '{\"pending\": 2}')", (t0 + 3,))
    db.execute(
        "INSERT INTO attempts (idx, number, session, endpoint, started_at, latency_ms, outcome) "
        "VALUES (0, 2, 2, 'e', ?, 10, 'ok')",
        (t0 + 4,),
    )
    db.execute("UPDATE tasks SET state = 'succeeded' WHERE idx = 0")
    follower = JournalFollower(journal, [0, 1])
    stats = RunStats()
    follower.subscribe(stats.observe)
    follower.poll()
    assert follower.view == {0: TaskState.SUCCEEDED, 1: TaskState.QUEUED}
    assert (stats.succeeded, stats.cancelled, stats.sent) == (1, 0, 2)
    journal.close()


def test_attach_module_does_not_import_textual():
    code = (
        "import sys, swarm_tui.frontend.attached, swarm_tui.frontend.live, swarm_tui.ui.format\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
