"""What the Ray test modules share: one local Ray a module, a session on its actors, a run to its end."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from swarm_tui.cache import CacheSettings
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RayOptions, RunPlan, SwarmSession

from tests.conftest import read_jsonl, write_batch

JUDGE_PRICES = {"custom/sim-1": {"input": 1.0, "output": 4.0}}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One local 2-CPU Ray for a test module (starting one costs seconds)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def ray_session(
    tmp_path: Path,
    base_url: str,
    prompts: list[str],
    *,
    actors: int = 2,
    name: str = "run",
    api_key_env: str | None = None,
    prices: dict | None = None,
    cache: CacheSettings = CacheSettings(),
    **settings,
) -> SwarmSession:
    job = load_job(write_batch(tmp_path / f"{name}.jsonl", prompts))
    profile = ProviderProfile(name="custom", base_url=base_url, api_key_env=api_key_env)
    plan = RunPlan(profile, EngineSettings.of(**{"concurrency": 50, **settings}), prices=prices or {}, cache=cache)
    return SwarmSession.open_new(job, plan, tmp_path / name, ray=RayOptions(actors=actors))


async def run_to_end(session: SwarmSession):
    """Run a session to its end and close it (its actors killed): how it finished."""
    try:
        return await session.run()
    finally:
        await session.aclose()


def custom_ids(run_dir: Path) -> Counter:
    seen = Counter(line["custom_id"] for line in read_jsonl(run_dir / "results.jsonl"))
    seen.update(line["custom_id"] for line in read_jsonl(run_dir / "errors.jsonl"))
    return seen
