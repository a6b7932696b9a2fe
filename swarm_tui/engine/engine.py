"""The swarm engine of one process (L1 orchestrator + L3 workers): the kernel with its lanes.

`SwarmEngine` is the `Kernel` (queue, admission, calls in flight, steering, run) assembled with
the live lane (live calls, their tail and hedges, their outcomes, agents' tool steps), the direct
lane (planner, warm-up, aggregator and judge calls) and the registered lanes (`lanes.py`: the
batch lane). It declares every capability (`core.ports.Capability`). The engine imports nothing
from Textual: the TUI subscribes to its events like anyone else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarm_tui.core.events import TaskState
from swarm_tui.core.ports import Capability, Lane
from swarm_tui.core.task import RunTasks
from swarm_tui.engine.billing import Billing
from swarm_tui.engine.kernel import Kernel
from swarm_tui.engine.lanes.agents import ToolSteps
from swarm_tui.engine.lanes.direct import DirectLane
from swarm_tui.engine.lanes.live import LiveLane
from swarm_tui.engine.lanes.outcomes import Outcomes
from swarm_tui.engine.lanes.registry import lanes_for
from swarm_tui.engine.pacing.admission import AdmissionController
from swarm_tui.engine.pacing.deadlines import TailDeadlines
from swarm_tui.engine.routing.doors import RouteAdmission
from swarm_tui.engine.routing.endpoints import Endpoints, RouteSpec, build_route
from swarm_tui.engine.routing.failover import CircuitBreaker
from swarm_tui.engine.settings import EngineSettings, Trimmer, Validator
from swarm_tui.pricing import Price
from swarm_tui.providers.client import CallResult, ProviderClient

if TYPE_CHECKING:
    from swarm_tui.cache import ResponseCache
    from swarm_tui.core.ports import JournalSink
    from swarm_tui.tools.toolbox import Toolbox


class SwarmEngine(Kernel):
    capabilities = frozenset(Capability)
    client: ProviderClient
    fallback: ProviderClient | None
    price: Price | None

    def __init__(
        self,
        tasks: RunTasks,
        client: ProviderClient,
        journal: JournalSink,
        settings: EngineSettings = EngineSettings(),
        *,
        price: Price | None = None,
        states: dict[int, TaskState] | None = None,
        attempts_made: dict[int, int] | None = None,
        simulated: bool = False,
        fallback: ProviderClient | None = None,
        fallback_price: Price | None = None,
        validator: Validator | None = None,
        trimmer: Trimmer | None = None,
        admission: AdmissionController | None = None,
        toolbox: Toolbox | None = None,
        response_cache: ResponseCache | None = None,
        route: RouteSpec | None = None,
    ) -> None:
        """`admission`: shared by the engines of a distributed swarm (see `Kernel`). `toolbox`: the
        run's tools; with one, every task is a multi-step agent (`agents.ToolSteps`).
        `response_cache`: the cache a `--cache` run replays from and writes to (`cache_lane`).
        `route`: the run's other endpoints and how calls are spread over them (`routing`): the
        primary (and the fallback) are its first doors, each door paced on its own."""
        if settings.guards.budget_usd is not None and price is None:
            raise ValueError("a budget needs the model's price (none is known for it)")
        super().__init__(
            tasks,
            journal,
            settings,
            states=states,
            attempts_made=attempts_made,
            admission=admission,
            simulated=simulated,
            endpoint=client.name,
        )
        self.client = client
        self.fallback = fallback
        self.price = price
        self.toolbox = toolbox
        self.response_cache = response_cache
        doors = [(client, price), *([(fallback, fallback_price)] if fallback is not None else [])]
        routed = None
        if route is not None:
            doors += list(route.others)
            routed = build_route(
                doors,
                route.strategy,
                concurrency=settings.pacing.concurrency,
                adaptive=settings.pacing.adaptive,
                max_price=route.max_price,
            )
            self.admission = RouteAdmission(routed)  # the kernel's slots are the doors'
            self.adaptive = None  # each door has its own
        prices = {door.name: door_price for door, door_price in doors}
        tiers = {door.name: door.service_tier for door, _ in doors}
        self.endpoints = Endpoints(
            self,
            client,
            fallback,
            admission=self.admission,
            rate_limits=self.rate_limits,
            adaptive=self.adaptive,
            adapt=self.adapt,
            route=routed,
        )
        self.billing = Billing(self.ledger, prices, self.stop_dispatch, self.calls_out, tiers)
        self.tail = TailDeadlines(
            settings.calls.timeout_s,
            hedge_factor=settings.calls.hedge_factor if settings.calls.hedge else None,
            straggler_factor=settings.calls.straggler_factor,
        )
        self.live = LiveLane(self, self.endpoints, self.billing, self.tail)
        self.live.outcomes = Outcomes(self.live, validator, trimmer)
        self.live.tools = ToolSteps(self, toolbox)
        self.dispatcher = self.live
        self.direct = DirectLane(self, self.endpoints, self.billing, self.live.capped)
        self.lanes = lanes_for(self)

    # ----------------------------------------------------------------- the public surface of the parts

    @property
    def validator(self) -> Validator | None:
        return self.live.outcomes.validator

    @property
    def breaker(self) -> CircuitBreaker | None:
        return self.endpoints.breaker

    @property
    def lane(self) -> Lane | None:
        """The batch lane (`--lane batch|auto`, or a live run following open batches); None without."""
        return next((lane for lane in self.lanes if lane.name == "batch"), None)

    @property
    def last_retry_after_asked_s(self) -> float | None:
        """The last Retry-After that was capped: what the provider asked for (shown while waiting)."""
        return self.live.last_retry_after_asked_s

    @property
    def hedges_sent(self) -> int:
        return self.live.hedges_sent

    def announce_endpoints(self) -> None:
        self.endpoints.announce()

    def ceiling_now(self) -> int | None:
        """A routed run's: the sum of its endpoints' ceilings (each adaptive on its own)."""
        if not self.endpoints.routed:
            return super().ceiling_now()
        doors = self.endpoints.doors
        return sum(d.adaptive.ceiling if d.adaptive is not None else d.admission.limit for d in doors)

    async def aclose(self) -> None:
        """Nothing outside this process to let go of."""

    async def call_direct(
        self,
        phase: str,
        index: int,
        body: dict,
        *,
        client: ProviderClient | None = None,
        admission: AdmissionController | None = None,
    ) -> CallResult:
        """One request outside the task grid (`direct.DirectLane.call`)."""
        return await self.direct.call(phase, index, body, client=client, admission=admission)

    def fail_over(self, reason: str) -> bool:
        """Send new attempts to the fallback now; False when there is none (`routing.Endpoints`)."""
        return self.endpoints.fail_over(reason)

    def add_price(self, endpoint: str, price: Price | None, tier: str | None = None) -> None:
        """Bill calls to another endpoint (a judge's) at its price, asking for `tier`."""
        self.billing.add_price(endpoint, price, tier)
