"""The shared rate budget and leased admission of a distributed swarm, without Ray."""

from __future__ import annotations

import asyncio

from swarm_tui.distributed.admission import LeasedAdmission, SharedRateLimits
from swarm_tui.distributed.budget import SharedBudget

from tests.conftest import run_cli, write_batch
from tests.helpers import wait_until


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_leases_never_grant_more_than_the_bucket_holds():
    clock = FakeClock()
    budget = SharedBudget(rpm=600, clock=clock)  # 10/s, a bucket of half a second's: 5
    assert budget.limits.BURST_S == 0.5
    granted = sum(budget.lease(4).requests for _ in range(20))
    assert granted == 5, "a full bucket, then nothing until it refills"
    empty = budget.lease(4)
    assert empty.requests == 0 and empty.wait_s > 0 and empty.metered
    clock.now += 1.0
    assert sum(budget.lease(4).requests for _ in range(20)) == 5  # refilled to the brim, not beyond


def test_leases_keep_the_swarm_within_capacity_plus_rate_times_time():
    """Shards asking greedily at every 10 ms of a 20 s run: the swarm never gets more than the
    bucket plus what refilled since, and gets nearly all of that (no budget is lost to leasing)."""
    clock = FakeClock()
    rpm = 6000  # 100/s, a bucket of 50
    budget = SharedBudget(rpm=rpm, clock=clock)
    burst = budget.limits.BURST_S
    start, granted = clock.now, 0
    for _step in range(1, 2001):
        for _shard in range(3):
            granted += budget.lease(50).requests
        allowed = rpm / 60 * (burst + (clock.now - start))
        assert granted <= allowed + 1e-9, f"at {clock.now - start:.2f} s: {granted} granted, {allowed:.0f} allowed"
        clock.now += 0.01
    elapsed = clock.now - start - 0.01
    assert granted >= rpm / 60 * (burst + elapsed) - 3, "the shards got the whole budget, to a lease or so"
    assert budget.leased_requests == granted


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
    """Two shards, one bucket (600 rpm: 10 at once, then 10/s), on a clock that moves only when told."""
    clock = FakeClock()
    budget = SharedBudget(rpm=600, clock=clock)
    refused = {"a": 0, "b": 0}
    gates = []

    def shard(name: str) -> LeasedAdmission:
        async def lease(requests, tokens_each, **pending):
            grant = budget.lease(requests, tokens_each, **pending)
            refused[name] += not grant.requests
            return grant

        return LeasedAdmission(
            50, rate_limits=SharedRateLimits(600), lease=lease, close_shared_gate=gates.append, clock=clock
        )

    a, b = shard("a"), shard("b")
    waiting = [asyncio.create_task(adm.acquire()) for adm in (a, b) * 15]  # 30 sends asked for

    def admitted() -> int:
        return sum(t.done() and t.result() for t in waiting)

    async def both_refused_again(what: str) -> None:
        """Until each shard has been refused once more (or, when leasing is broken, all 30 are in)."""
        before = dict(refused)
        await wait_until(
            lambda: all(refused[s] > before[s] for s in refused) or all(t.done() for t in waiting),
            f"both shards to be refused {what}",
        )

    try:
        # a grant is used in the same step it is leased, so once both shards have been refused
        # the bucket's 10 are in; with time frozen nothing refills, however often they ask again
        await both_refused_again("once the bucket is spent")
        assert admitted() == 5 and a.in_flight + b.in_flight == 5
        await both_refused_again("on asking again, time standing still")
        assert admitted() == 5, "two shards together stay within one bucket"

        clock.now += 0.5  # half a second refills the bucket: 5 more, for the two shards together
        await both_refused_again("once the refill is spent")
        assert admitted() == 10 and budget.leased_requests == 10
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
    a.close_gate(1.5)
    assert gates == [1.5]


def test_ray_flag_without_ray_installed_says_how_to_install_it(tmp_path, sim):
    blocker = tmp_path / "no_ray"
    (blocker / "ray").mkdir(parents=True)
    (blocker / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    job = write_batch(tmp_path / "job.jsonl", ["a"])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(tmp_path / "run"),
        "--ray",
        env={"PYTHONPATH": str(blocker)},
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'swarm-tui[ray]'" in result.stderr
    assert not (tmp_path / "run").exists() and sim.stats()["requests"] == 0


def test_a_limit_learned_mid_run_starts_empty_a_configured_one_full():
    """Before a shard learned the limit, the swarm's first sends used the provider's burst: a
    full bucket on top of that let 2% of a 1,000-task run's requests hit 429s on 2 actors."""
    clock = FakeClock()
    learned = SharedBudget(clock=clock)
    learned.learn(rpm=3000, tpm=None)
    assert learned.lease(10).requests == 0  # nothing now: the provider's burst is spent
    clock.now += 0.2
    assert learned.lease(10).requests > 0  # then the rate: 50/s
    configured = SharedBudget(rpm=3000, clock=clock)
    assert configured.lease(10).requests > 0  # told before anything was sent: the burst is there
