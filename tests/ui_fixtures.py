"""The UI tests' shared fixtures (conftest.py gives them to every test): the recorded run as a
scripted source for the app (`app_on_run`), and that run for real, a journal on disk
(`finished_run`, `journal_copy`), for the tests that attach to one."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest
from swarm_tui.config import Config
from swarm_tui.engine import EngineSettings
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.sim import SimConfig
from swarm_tui.ui.app import make_app

from tests.scripted_run import ScriptedRun, load_recording, snapshot_job

SHOWN_SETTINGS = EngineSettings.of(concurrency=50, max_attempts=2, rpm=60_000)
"""The settings of the session the screen shows (the run was recorded one call at a time)."""
SHOWN_LIMIT = SHOWN_SETTINGS.pacing.concurrency // 2
"""Its adaptive limit before it runs: half its ceiling (the slow start's first step)."""


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """The recorded run, run for real to the end on the seeded simulator: its journal."""
    root = tmp_path_factory.mktemp("snapshots")
    sim = SimConfig(latency_ms=1.0, latency_sigma=0.0, seed=7, cache_min_tokens=10**9)
    plan = RunPlan(ProviderProfile(name="sim"), EngineSettings.of(concurrency=1, max_attempts=2, rpm=60_000), sim)
    session = SwarmSession.open_new(snapshot_job(), plan, root / "swarm-100-demo")

    async def run() -> None:
        try:
            await session.run()
        finally:
            await session.aclose()

    asyncio.run(run())
    return root / "swarm-100-demo"


@pytest.fixture
def journal_copy(finished_run, tmp_path, monkeypatch) -> Path:
    """A private copy of the finished run in the working directory (`swarm-100-demo`)."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(finished_run, tmp_path / "swarm-100-demo")
    return Path("swarm-100-demo")


@pytest.fixture
def app_on_run(tmp_path, monkeypatch):
    """A factory: the app on the recorded run, frozen in time, in an empty working directory
    that holds its run directory."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "swarm-100-demo").mkdir()
    recording = load_recording()

    def build(theme: str | None = None):
        source = ScriptedRun(
            recording,
            snapshot_job(),
            Path("swarm-100-demo"),
            profile=ProviderProfile(name="sim"),
            settings=SHOWN_SETTINGS,
            limit=SHOWN_LIMIT,
            ceiling=SHOWN_SETTINGS.pacing.concurrency,
        )
        return make_app(
            source, config=Config(path=tmp_path / "config.toml"), theme=theme, start=False, clock=lambda: 5000.0
        )

    yield build
    time.tzset()
