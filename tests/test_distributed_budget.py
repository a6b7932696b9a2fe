"""The shared rate budget and leased admission of a distributed swarm, without Ray."""

from __future__ import annotations

import asyncio

from swarm_tui.distributed.admission import LeasedAdmission, SharedRateLimits
from swarm_tui.distributed.budget import SharedBudget

from .conftest import run_cli, write_batch


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_leases_never_grant_more_than_the_bucket_holds():
    clock = FakeClock()
    budget = SharedBudget(rpm=600, clock=clock)  # 10/s, bucket of 10
    granted = sum(budget.lease(4).requests for _ in range(20))
    assert granted == 10, "a full bucket, then nothing until it refills"
    empty = budget.lease(4)
    assert empty.requests == 0 and empty.wait_s > 0 and empty.metered
    clock.now += 1.0
    assert sum(budget.lease(4).requests for _ in range(20)) == 10


def test_the_gate_closes_for_every_lease_and_unmetered_budgets_need_none():
    clock = FakeClock()
    budget = SharedBudget(clock=clock)
    assert not budget.lease(8).metered
    budget.close_gate(2.0)
    grant = budget.lease(8)
    assert grant.requests == 0 and grant.gate_s == 2.0
    budget.learn(rpm=60, tpm=None)
    clock.now += 3
    assert budget.lease(8).metered and budget.limits.rpm == 60


async def test_leased_admission_takes_its_budget_from_the_shared_one():
    budget = SharedBudget(rpm=600)
    gates = []

    async def lease(requests, tokens_each, **pending):
        return budget.lease(requests, tokens_each, **pending)

    a = LeasedAdmission(50, rate_limits=SharedRateLimits(600), lease=lease, close_shared_gate=gates.append)
    b = LeasedAdmission(50, rate_limits=SharedRateLimits(600), lease=lease, close_shared_gate=gates.append)
    admitted = 0
    for adm in (a, b) * 10:
        try:
            async with asyncio.timeout(0.01):
                admitted += await adm.acquire()
        except TimeoutError:
            pass
    assert admitted <= 11, "two shards together stay within one bucket (10 + refill)"
    a.close_gate(1.5)
    assert gates == [1.5]


def test_ray_flag_without_ray_installed_says_how_to_install_it(tmp_path, sim):
    blocker = tmp_path / "no_ray"
    (blocker / "ray").mkdir(parents=True)
    (blocker / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    job = write_batch(tmp_path / "job.jsonl", ["a"])
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"),
                     "--ray", env={"PYTHONPATH": str(blocker)})
    assert result.returncode == 2, result.stderr
    assert "pip install 'swarm-tui[ray]'" in result.stderr
    assert not (tmp_path / "run").exists() and sim.stats()["requests"] == 0
