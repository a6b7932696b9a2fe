"""Building sessions on a simulator for in-process engine tests, and waiting for a state."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from swarm_tui.cache import CacheSettings
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession

from tests.conftest import write_batch


def open_session(
    tmp_path: Path,
    base_url: str,
    prompts: list[str],
    *,
    run_name: str = "run",
    api_key_env: str | None = None,
    prices: dict | None = None,
    cache: CacheSettings = CacheSettings(),
    **settings,
) -> SwarmSession:
    job = load_job(write_batch(tmp_path / f"{run_name}.jsonl", prompts))
    profile = ProviderProfile(name="custom", base_url=base_url, api_key_env=api_key_env)
    plan = RunPlan(profile, EngineSettings.of(**settings), prices=prices or {}, cache=cache)
    return SwarmSession.open_new(job, plan, tmp_path / run_name)


def attempts_of(run_dir: Path, index: int) -> list[dict]:
    """The journaled attempts of one task, read as another process would (read-only)."""
    from swarm_tui.journal import Journal

    journal = Journal.open(run_dir, readonly=True)
    try:
        return journal.queries.attempts_of(index)
    finally:
        journal.close()


async def wait_until(
    condition: Callable[[], object],
    what: str,
    *,
    timeout: float = 10.0,
    step: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Let the event loop run until `condition()` holds; fail saying `what` never happened.

    The deadline only keeps a broken test from hanging: nothing is asserted about how long the
    wait took. `step` is what to await between checks (a Textual pilot's `pause`, a journal
    poll...); by default a 10 ms sleep.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still not the case after {timeout:g} s")
        await (step() if step is not None else asyncio.sleep(0.01))


async def run_session(session: SwarmSession, events: list | None = None):
    """Run a session to its end (its events appended to `events`), then close it."""
    if events is not None:
        session.engine.subscribe(events.append)
    try:
        return await session.run()
    finally:
        await session.aclose()
