"""A session's judge: scores a sample of the answers, on the run's own endpoint (its admission
and pacing) or on one of its own, and may steer the run (flush memory, pause, fail over)."""

from __future__ import annotations

from dataclasses import dataclass

from swarm_tui.engine.pacing.admission import AdmissionController
from swarm_tui.engine.pacing.limits import RateLimits
from swarm_tui.jobs.judge_spec import JudgeSpec
from swarm_tui.journal import Journal
from swarm_tui.judge.judge import CONCURRENCY as JUDGE_CONCURRENCY
from swarm_tui.judge.judge import Judge, JudgedEngine
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.records import RunPlan
from swarm_tui.run.plan import DEMO_SIM
from swarm_tui.sim import SimServer
from swarm_tui.swarm.pipeline import SwarmPipeline


@dataclass
class JudgeEndpoint:
    """The judge's own endpoint, when it has one (and the simulator serving it)."""

    client: ProviderClient | None = None
    sim: SimServer | None = None

    @classmethod
    def open(cls, profile: ProviderProfile | None, plan: RunPlan) -> JudgeEndpoint:
        if profile is None or profile.name == plan.profile.name:
            return cls()
        sim = None
        base_url = profile.base_url
        if profile.is_simulator:  # the embedded simulator as the judge of a run elsewhere
            sim = SimServer(plan.sim or DEMO_SIM).start(mode="thread")
            base_url = sim.base_url
        return cls(ProviderClient(profile, base_url, **plan.client_limits()), sim)

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        if self.sim is not None:
            self.sim.stop()


def make_judge(
    engine: JudgedEngine,
    journal: Journal,
    spec: JudgeSpec,
    endpoint: JudgeEndpoint,
    plan: RunPlan,
    *,
    model: str,
    pipeline: SwarmPipeline | None,
    multi_round: bool,
) -> Judge:
    """The judge of this run, subscribed to its engine (and settled by its pipeline's rounds)."""
    admission = None
    if endpoint.client is not None:
        profile = endpoint.client.profile
        admission = AdmissionController(JUDGE_CONCURRENCY, rate_limits=RateLimits(profile.rpm, profile.tpm))
        client = endpoint.client
        engine.add_price(client.name, plan.price_for(model, client.name), client.service_tier)

    def flush() -> str:
        return f"memory flushed ({pipeline.flush_memory()} rounds)" if pipeline is not None else "no memory to flush"

    def pause() -> str:
        engine.pause()
        return "paused until resumed"

    def fail_over() -> str:
        return "failed over to the fallback" if engine.fail_over("quality drift") else "no fallback to fail over to"

    judge = Judge(
        engine,
        journal,
        spec,
        model=model,
        action=spec.action_for(multi_round),
        actions={"flush_memory": flush, "pause": pause, "failover": fail_over},
        round_of=(lambda: pipeline.round_number) if pipeline is not None else (lambda: 1),
        client=endpoint.client,
        admission=admission,
    )
    engine.subscribe(judge.observe)
    if pipeline is not None:
        pipeline.settle = judge.settle
        pipeline.flushed.append(judge.monitor.start_over)
    return judge
