"""The calls a distributed swarm makes from its driver, not its actors: the planner's, the
warm-up's, the aggregator's and the judge's.

They go through a local `SwarmEngine` with no tasks of its own (its direct lane: admission,
retries, billing, the run's journal under the phase's negative index), whose events reach the
driver's listeners like a shard's. The planner, warm-up and aggregator come before or after the
fan-out; the judge's calls come during it, so this engine's admission leases its RPM/TPM budget
from the swarm's limiter actor, as every shard does: one budget for every call on the run's
endpoint. A judge with an endpoint of its own brings its own client and admission.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from swarm_tui.core.ports import RunJournal
from swarm_tui.core.task import JSONObject
from swarm_tui.distributed.admission import LeasedAdmission, SharedRateLimits
from swarm_tui.engine.builder import Doors, build_engine
from swarm_tui.engine.settings import EngineSettings
from swarm_tui.pricing import Price
from swarm_tui.providers.client import CallResult, ProviderClient

if TYPE_CHECKING:
    from swarm_tui.core.events import EngineEvent
    from swarm_tui.distributed.actors import ActorPool
    from swarm_tui.engine.engine import SwarmEngine
    from swarm_tui.engine.pacing.admission import AdmissionController


class DriverCalls:
    """The driver's local engine for its own calls, made on first use (a run without a planner,
    aggregator or judge never makes one)."""

    def __init__(
        self,
        client: ProviderClient,
        journal: RunJournal,
        settings: EngineSettings,
        pool: ActorPool,
        deliver: Callable[[EngineEvent], None],
        *,
        price: Price | None,
        simulated: bool,
    ) -> None:
        """`deliver`: the driver's listeners (the engine journals its own events first)."""
        self.client = client
        self.journal = journal
        self.settings = settings
        self.pool = pool
        self.deliver = deliver
        self.price = price
        self.simulated = simulated
        self.engine: SwarmEngine | None = None
        self._prices: list[tuple[str, Price | None, str | None]] = []
        self._aborted: str | None = None

    def local(self) -> SwarmEngine:
        if self.engine is None:
            limiter = self.pool.ensure_limiter()
            admission = LeasedAdmission(
                self.settings.pacing.concurrency,
                rate_limits=SharedRateLimits(
                    self.settings.pacing.rpm, self.settings.pacing.tpm, on_learned=limiter.learn.remote
                ),
                lease=lambda requests, tokens_each, **pending: limiter.lease.remote(requests, tokens_each, **pending),
                close_shared_gate=limiter.close_gate.remote,
            )
            engine = build_engine(
                [],
                self.journal,
                self.settings,
                Doors(self.client, self.price),
                admission=admission,
                simulated=self.simulated,
            )
            engine.subscribe(self.deliver)
            for endpoint, price, tier in self._prices:
                engine.add_price(endpoint, price, tier)
            if self._aborted is not None:
                engine.abort(self._aborted)
            self.engine = engine
        return self.engine

    async def call(
        self,
        phase: str,
        index: int,
        body: JSONObject,
        *,
        client: ProviderClient | None = None,
        admission: AdmissionController | None = None,
    ) -> CallResult:
        return await self.local().call_direct(phase, index, body, client=client, admission=admission)

    def add_price(self, endpoint: str, price: Price | None, tier: str | None = None) -> None:
        """Bill calls to another endpoint (a judge's) at its price."""
        self._prices.append((endpoint, price, tier))
        if self.engine is not None:
            self.engine.add_price(endpoint, price, tier)

    def abort(self, reason: str) -> None:
        """A call waiting for admission stops too (and none starts after)."""
        self._aborted = reason
        if self.engine is not None:
            self.engine.abort(reason)

    def stop(self, reason: str) -> None:
        """The swarm stopped dispatch (the budget, --fail-on-error, the user): so do these calls."""
        if self.engine is not None:
            self.engine.stop_dispatch(reason)

    def restart(self) -> None:
        """A new session of the same engine (retry_failed after a stop): a fresh local engine."""
        self.engine = None
        self._aborted = None
