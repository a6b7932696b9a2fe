"""Building sessions on a simulator for in-process engine tests."""

from __future__ import annotations

from pathlib import Path

from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.session import RunPlan, SwarmSession

from .conftest import write_batch


def open_session(tmp_path: Path, base_url: str, prompts: list[str], *, run_name: str = "run",
                 api_key_env: str | None = None, prices: dict | None = None, **settings) -> SwarmSession:
    job = load_job(write_batch(tmp_path / f"{run_name}.jsonl", prompts))
    profile = ProviderProfile(name="custom", base_url=base_url, api_key_env=api_key_env)
    plan = RunPlan(profile, EngineSettings(**settings), prices=prices or {})
    return SwarmSession.open_new(job, plan, tmp_path / run_name)


def attempts_of(run_dir: Path, index: int) -> list[dict]:
    """The journaled attempts of one task, read as another process would (read-only)."""
    from swarm_tui.journal import Journal

    journal = Journal.open(run_dir, readonly=True)
    try:
        return journal.attempts_of(index)
    finally:
        journal.close()
