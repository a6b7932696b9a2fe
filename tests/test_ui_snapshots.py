"""Snapshots (pytest-textual-snapshot) of the main screen, an agent's detail and the help,
at 80x24 and 120x40.

Deterministic by construction: the journal comes from a seeded simulator run (prefix cache
off, so token counts do not depend on arrival order), its timings are then rewritten to
fixed values, the app is built on it without starting the engine, the clock is frozen and
the timezone is UTC. Update after a deliberate change with `pytest --snapshot-update`.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest
from swarm_tui.config import Config
from swarm_tui.core.events import AttemptStarted, RunFinished, TaskRetrying
from swarm_tui.core.task import Task
from swarm_tui.core import codec as eventlog
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import Job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.session import RunPlan, SwarmSession
from swarm_tui.sim import SimConfig
from swarm_tui.ui.app import make_app

FROZEN = 1_700_000_000.0
FAILING = {12: "[[sim:500]]", 41: "[[sim:503]]", 76: "[[sim:quota]]"}
"""Agents 13, 42 and 77 fail for good (5xx twice; quota at once); 6 and 61 are retried once."""
FLAKY = {5: "[[sim:429x1]]", 60: "[[sim:500x1]]"}
SHOWN_SETTINGS = EngineSettings(concurrency=50, max_attempts=2, rpm=60_000)
"""The settings of the session the screen shows (the journal was written one call at a time)."""


CONTEXT = ("You are one worker of a swarm of sub-agents exploring a problem in parallel. Answer your own task "
           "only, in at most three sentences, and end with one line `RESULT: <one short finding>`.")


def snapshot_job() -> Job:
    """The demo's shape (shared context first, 100 agents), fixed here so that edits to the
    sample job do not move the snapshots; markers script the failures."""
    tasks = []
    for index in range(100):
        marker = FAILING.get(index) or FLAKY.get(index) or ""
        body = {"model": "kimi-k2.5", "max_tokens": 512, "temperature": 0.6, "messages": [
            {"role": "system", "content": CONTEXT},
            {"role": "system", "content": f"You are sub-agent #{index + 1} of swarm/100."},
            {"role": "user", "content": f"Run task #{index + 1} {marker}".strip()}]}
        tasks.append(Task(index, f"agent-{index + 1:03d}", body))
    return Job("swarm-100", "snapshot fixture", tasks, model="kimi-k2.5")


def fixed_times(event):
    """An event of the log with the fixed timings the journal's rows get (see `finished_run`)."""
    attempt = getattr(event, "attempt", None)
    if attempt is None:
        return event
    retry_in_s = 0.5 + attempt.number if attempt.outcome == "retry" else None
    attempt = replace(attempt, started_at=FROZEN + attempt.index * 0.05 + attempt.number * 2.0,
                      latency_ms=180 + (attempt.index * 37) % 900, ttft_ms=None, retry_in_s=retry_in_s)
    if isinstance(event, TaskRetrying):
        return replace(event, attempt=attempt, delay_s=retry_in_s)
    return replace(event, attempt=attempt)


def in_fixed_order(events):
    """(time, event) in the order of the fixed timings, so the log reads the same on every run
    (retries come back after a random backoff): run-level events keep their place around them."""
    timed, at = [], FROZEN
    for position, event in enumerate(events):
        attempt = getattr(event, "attempt", None)
        if isinstance(event, AttemptStarted):
            at = FROZEN + event.index * 0.05 + event.number * 2.0
        elif attempt is not None:
            at = attempt.started_at + attempt.latency_ms / 1000
        elif isinstance(event, RunFinished):
            at = float("inf")
        timed.append((at, position, event))
    timed.sort(key=lambda item: (item[0], item[1]))
    end = max(at for at, _, _ in timed if at != float("inf"))
    return [(end if at == float("inf") else at, event) for at, _, event in timed]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A 100-agent job run to the end on a seeded simulator; timings rewritten to fixed values."""
    root = tmp_path_factory.mktemp("snapshots")
    job = snapshot_job()
    sim = SimConfig(latency_ms=1.0, latency_sigma=0.0, seed=7, cache_min_tokens=10**9)
    # one call at a time, the RPM told: the log's order and every figure are the same on every run
    plan = RunPlan(ProviderProfile(name="sim"), EngineSettings(concurrency=1, max_attempts=2, rpm=60_000), sim)
    session = SwarmSession.open_new(job, plan, root / "swarm-100-demo")

    async def run() -> None:
        try:
            await session.run()
        finally:
            await session.aclose()

    asyncio.run(run())
    db = sqlite3.connect(root / "swarm-100-demo" / "journal.sqlite")
    with db:
        db.execute("UPDATE attempts SET started_at = ? + idx * 0.05 + number * 2.0, "
                   "latency_ms = 180 + (idx * 37) % 900, ttft_ms = NULL, "
                   "retry_in_s = CASE WHEN outcome = 'retry' THEN 0.5 + number ELSE NULL END", (FROZEN,))
        events = [fixed_times(eventlog.decode(kind, data))
                  for kind, data in db.execute("SELECT kind, data FROM log ORDER BY seq")]
        db.execute("DELETE FROM log")
        db.executemany("INSERT INTO log (at, session, kind, data) VALUES (?, 1, ?, ?)",
                       [(at, *eventlog.encode(event)) for at, event in in_fixed_order(events)])
        db.execute("UPDATE meta SET value = '{\"at\": 1700000010.0, \"pid\": 1, \"session\": 1}' "
                   "WHERE key = 'heartbeat'")
    db.close()
    return root / "swarm-100-demo"


@pytest.fixture
def app_on_run(finished_run, tmp_path, monkeypatch):
    """A factory: the app on a private copy of the finished run, frozen in time."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.chdir(tmp_path)
    shutil.copytree(finished_run, tmp_path / "swarm-100-demo")
    sessions = []

    def build(theme: str | None = None):
        session = SwarmSession.open_existing(Path("swarm-100-demo"), settings=SHOWN_SETTINGS)
        sessions.append(session)
        return make_app(session, config=Config(path=tmp_path / "config.toml"), theme=theme, start=False,
                        clock=lambda: 5000.0)

    yield build
    for session in sessions:
        asyncio.run(session.aclose())
    time.tzset()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_main_screen(snap_compare, app_on_run, size):
    assert snap_compare(app_on_run(), terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_agent_detail_of_a_failed_agent(snap_compare, app_on_run, size):
    async def open_agent_13(pilot):
        pilot.app.open_agent(12)
        await pilot.pause(0.2)

    assert snap_compare(app_on_run(), terminal_size=size, run_before=open_agent_13)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_help(snap_compare, app_on_run, size):
    assert snap_compare(app_on_run(), terminal_size=size, press=["question_mark", "_"])


def test_high_contrast_heat_view_with_cursor(snap_compare, app_on_run):
    assert snap_compare(app_on_run(theme="swarm-high-contrast"), terminal_size=(80, 24),
                        press=["down", "down", "right", "h", "_"])
