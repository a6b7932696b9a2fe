"""A shard worker: an async Ray actor running the project's own `SwarmEngine` on the tasks it is handed.

The engine is the same one a single-process run uses; only what it is given differs:

* its journal is a `ForwardingJournal`: every write goes, in order with the engine's events,
  into an outbox that `run_shard` streams back to the driver in small batches (a Ray streaming
  generator), where the real journal is written;
* its admission is a `LeasedAdmission`: RPM/TPM budget leased from the swarm's limiter actor,
  the Retry-After gate shared, the in-flight limit this shard's share of the user's ceiling;
* congestion (429/503/timeouts) it sees is reported to the limiter, and congestion another
  shard saw slows this one's adaptive limit too.

The key is read here, from this process's environment (set on the node, or by the driver
through Ray's `runtime_env`): it never travels in a shard's payload.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import ray

from swarm_tui.core.checks import AnswerSpec
from swarm_tui.core.events import EngineEvent, TaskFailed, TaskRetrying
from swarm_tui.core.task import Task
from swarm_tui.distributed.admission import LeasedAdmission, SharedRateLimits
from swarm_tui.distributed.sink import ForwardingJournal, Outbox
from swarm_tui.engine import AnswerRules, Doors, EngineSettings, Resumed, build_engine
from swarm_tui.engine.answers import AnswerChecks
from swarm_tui.pricing import Price
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.tools import Toolbox, ToolsSpec

if TYPE_CHECKING:
    from swarm_tui.engine.engine import SwarmEngine

log = logging.getLogger(__name__)

BATCH_S = 0.02
"""How long a shard gathers outcomes before it sends them (events reach the driver this late, at most)."""
SYNC_S = 0.25
"""How often a shard asks the limiter about the swarm (gate, limits learned elsewhere, congestion)."""
DONE = "done"


@dataclass(frozen=True)
class ShardSpec:
    """What a shard is handed: tasks and how to run them. No key, no key material."""

    shard_id: int
    tasks: list[Task]
    settings: EngineSettings
    attempts_made: dict[int, int] = field(default_factory=dict)
    price: Price | None = None
    fallback_price: Price | None = None
    simulated: bool = False
    answer: AnswerSpec | None = None
    """The job's answer checks (each shard's engine checks its answers the same way)."""
    failed_over: str | None = None
    """Why the swarm failed over to the fallback (the judge's action), if it has: this shard starts there."""
    tools: ToolsSpec | None = None
    """The job's tools (every task a multi-step agent): started on the actor, once for its shards."""


# ray's stubs type ray.remote's options for tasks only; max_concurrency is an actor option
@ray.remote(max_restarts=0, max_concurrency=1000)  # type: ignore[call-overload]
class SwarmWorker:
    def __init__(self, profile: ProviderProfile, base_url: str, attempt_timeout_s: float, limiter) -> None:
        self.profile = profile
        self.base_url = base_url
        self.attempt_timeout_s = attempt_timeout_s
        self.limiter = limiter
        self.client: ProviderClient | None = None
        self.fallback: ProviderClient | None = None
        self.engines: dict[int, SwarmEngine] = {}
        self.paused = False
        self.toolbox: Toolbox | None = None
        self._toolbox_started = asyncio.Lock()

    def _clients(self) -> tuple[ProviderClient, ProviderClient | None]:
        if self.client is None:
            self.client = ProviderClient(self.profile, self.base_url, attempt_timeout_s=self.attempt_timeout_s)
            fallback = self.profile.fallback()
            if fallback is not None:
                self.fallback = ProviderClient(fallback, fallback.base_url, attempt_timeout_s=self.attempt_timeout_s)
        return self.client, self.fallback

    async def ping(self) -> int:
        return os.getpid()

    async def start_tools(self, spec: ToolsSpec) -> int:
        """Start the job's tools now (a benchmark's warm-up, as `ping` is): how many are offered."""
        toolbox = await self._tools(spec)
        return len(toolbox.openai_tools()) if toolbox is not None else 0

    async def _tools(self, spec: ToolsSpec | None) -> Toolbox | None:
        """The actor's toolbox, started by the first shard that needs it (its servers run on this
        node, with this node's environment); a server that cannot start breaks the shard."""
        if spec is None or not spec.any:
            return None
        async with self._toolbox_started:
            if self.toolbox is None:
                toolbox = Toolbox(spec)
                await toolbox.start()
                self.toolbox = toolbox
        return self.toolbox

    async def run_shard(self, spec: ShardSpec):
        """Run the shard to its end, yielding batches of journal records and events as they happen."""
        client, fallback = self._clients()
        toolbox = await self._tools(spec.tools)
        outbox = Outbox()
        limits = SharedRateLimits(spec.settings.pacing.rpm, spec.settings.pacing.tpm, on_learned=self._report_learned)
        admission = LeasedAdmission(
            spec.settings.pacing.concurrency, rate_limits=limits, lease=self._lease, close_shared_gate=self._report_gate
        )
        engine = build_engine(
            spec.tasks,
            ForwardingJournal(outbox),
            spec.settings,
            Doors(client, spec.price, fallback, spec.fallback_price),
            resumed=Resumed(attempts_made=spec.attempts_made),
            answers=AnswerRules(AnswerChecks(spec.answer, spec.settings.answers)),
            toolbox=toolbox,
            admission=admission,
            simulated=spec.simulated,
        )
        engine.subscribe(outbox.event)
        engine.subscribe(lambda event: self._watch_congestion(event, admission))
        self.engines[spec.shard_id] = engine
        if self.paused:  # the swarm is paused: a shard handed out meanwhile waits too
            engine.pause()
        if spec.failed_over is not None:
            engine.fail_over(spec.failed_over)
        sync = asyncio.create_task(self._sync(engine, admission))
        run = asyncio.create_task(engine.run(), name=f"shard-{spec.shard_id}")
        try:
            while True:
                if outbox.items:
                    yield outbox.drain()
                    continue
                if run.done():
                    break
                ready = asyncio.create_task(outbox.ready.wait())
                await asyncio.wait({ready, run}, return_when=asyncio.FIRST_COMPLETED)
                ready.cancel()
                await asyncio.sleep(BATCH_S)
            yield [(DONE, run.result(), admission.lease_calls)]
        finally:
            sync.cancel()
            if not run.done():  # the driver went away: stop sending
                engine.abort("driver gone")
            self.engines.pop(spec.shard_id, None)

    # ----------------------------------------------------------------- steering (all shards here)

    async def pause(self) -> None:
        self.paused = True
        for engine in self.engines.values():
            engine.pause()

    async def resume(self) -> None:
        self.paused = False
        for engine in self.engines.values():
            engine.resume()

    async def set_concurrency(self, limit: int, reason: str) -> None:
        for engine in self.engines.values():
            engine.set_concurrency(limit, reason)

    async def fail_over(self, reason: str) -> None:
        for engine in self.engines.values():
            engine.fail_over(reason)

    async def cancel_tasks(self, shard_id: int, indices: list[int]) -> None:
        engine = self.engines.get(shard_id)
        if engine is not None:
            engine.cancel_tasks(indices)

    async def stop_dispatch(self, reason: str) -> None:
        for engine in self.engines.values():
            engine.stop_dispatch(reason)

    async def abort(self, reason: str) -> None:
        for engine in self.engines.values():
            engine.abort(reason)

    async def close(self) -> None:
        if self.toolbox is not None:
            await self.toolbox.aclose()
            self.toolbox = None
        for c in (self.client, self.fallback):
            if c is not None:
                await c.aclose()
        self.client = self.fallback = None

    # ----------------------------------------------------------------- the shared budget

    async def _lease(self, requests: int, tokens_each: int, **pending: int):
        return await self.limiter.lease.remote(requests, tokens_each, **pending)

    def _report_gate(self, seconds: float) -> None:
        self.limiter.close_gate.remote(seconds)

    def _report_learned(self, rpm: int | None, tpm: int | None) -> None:
        self.limiter.learn.remote(rpm, tpm)

    def _watch_congestion(self, event: EngineEvent, admission: LeasedAdmission) -> None:
        if (
            isinstance(event, (TaskRetrying, TaskFailed))
            and event.attempt.error is not None
            and event.attempt.error.is_rate_limited
        ):
            admission.congestion_seen += 1
            self.limiter.note_congestion.remote()

    async def _sync(self, engine: SwarmEngine, admission: LeasedAdmission) -> None:
        while True:
            try:
                grant = await self.limiter.state.remote()
            except Exception:  # the limiter is gone: keep what we know; the driver will notice
                log.warning("rate limiter unreachable", exc_info=True)
                return
            admission.apply(grant)
            if grant.congestion > admission.congestion_seen:
                admission.congestion_seen = grant.congestion
                engine.note_congestion("congestion on another shard: decrease")
            await asyncio.sleep(SYNC_S)
