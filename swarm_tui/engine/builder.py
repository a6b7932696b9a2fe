"""The one place an engine is assembled (`build_engine`): its kernel parts, its pacing and its lanes,
each made once, whole, and handed to the parts that use it; nothing is replaced afterwards.

The run's session, a Ray shard's worker and the Ray driver's own calls all build their engine
here; what they differ in is what they pass: the endpoints (`Doors`), where earlier sessions left
the run (`Resumed`), how answers are judged (`AnswerRules`), the tools, the response cache, and an
admission shared by a distributed swarm's engines. `Doors`, `Resumed` and `AnswerRules` are the
records the Ray driver is given too (`distributed.driver.RayEngine`).

The lanes and the engine refer to each other (a lane reports through the engine; the engine
steers its lanes), so the engine makes them with itself as their host through `_LaneMaker`; the
hooks between lanes (the cache lane's answer keeping and step replay in the live lane, its cache
side in the direct lane, the autopilot in the batch lane) are passed to their constructors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.events import TaskState
from swarm_tui.core.lanes import AUTO
from swarm_tui.core.ports import RunJournal
from swarm_tui.core.task import JSONObject, RunTasks, by_index
from swarm_tui.engine.answers import AnswerChecks
from swarm_tui.engine.billing import Billing
from swarm_tui.engine.engine import Kernel, Lanes, Pacing, SwarmEngine
from swarm_tui.engine.kernel.numbers import AttemptNumbers
from swarm_tui.engine.kernel.outbox import Outbox
from swarm_tui.engine.kernel.queue import TaskQueue
from swarm_tui.engine.lanes.agents import ToolSteps
from swarm_tui.engine.lanes.autopilot import Autopilot
from swarm_tui.engine.lanes.direct import DirectLane
from swarm_tui.engine.lanes.live import LiveLane
from swarm_tui.engine.lanes.registry import batch_lane_of, cache_lane_of, in_claim_order
from swarm_tui.engine.ledger import SpendLedger
from swarm_tui.engine.pacing.admission import AdmissionController
from swarm_tui.engine.pacing.deadlines import TailDeadlines
from swarm_tui.engine.pacing.limits import AdaptiveConcurrency, RateLimits
from swarm_tui.engine.pacing.retry import RetryPolicy
from swarm_tui.engine.pacing.suspension import Suspension
from swarm_tui.engine.routing.doors import Route, RouteAdmission
from swarm_tui.engine.routing.endpoints import Endpoints, RouteSpec, build_route
from swarm_tui.engine.settings import EngineSettings, Trimmer
from swarm_tui.engine.stats import RunStats

if TYPE_CHECKING:
    from swarm_tui.cache import ResponseCache
    from swarm_tui.pricing import Price
    from swarm_tui.providers.client import ProviderClient
    from swarm_tui.tools.agent_tools import AgentTools


@dataclass(frozen=True)
class Doors:
    """Where a run's calls go and what they cost: the primary endpoint, its fallback, a route's
    other endpoints (`routing.RouteSpec`), each with its price (None: unknown)."""

    client: ProviderClient
    price: Price | None = None
    fallback: ProviderClient | None = None
    fallback_price: Price | None = None
    route: RouteSpec | None = None
    escalation: ProviderClient | None = None
    """Where a task goes when its answers could not be used (`--escalate`): no strategy sends there."""
    escalation_price: Price | None = None

    def priced(self) -> list[tuple[ProviderClient, Price | None]]:
        """Every endpoint with its price, in the route's order (the primary first)."""
        first = [(self.client, self.price)]
        if self.fallback is not None:
            first.append((self.fallback, self.fallback_price))
        return [*first, *(self.route.others if self.route is not None else ())]

    def billed(self) -> list[tuple[ProviderClient, Price | None]]:
        """Every endpoint a call may be billed at: the route's and the escalation endpoint."""
        escalation = [(self.escalation, self.escalation_price)] if self.escalation is not None else []
        return [*self.priced(), *escalation]


@dataclass(frozen=True)
class Resumed:
    """Where earlier sessions left a run: each task's state (None: every task queued) and its
    last attempt number (numbering goes on)."""

    states: dict[int, TaskState] | None = None
    attempts_made: dict[int, int] | None = None


@dataclass(frozen=True)
class AnswerRules:
    """How answers are judged: the run's answer checks (`answers.AnswerChecks`: the job's and the
    bodies' checks and what an unusable answer leads to; None: refusals and filtered answers are
    still failures, nothing else is checked) and the job's trimmer (a request past the context
    length, shortened once)."""

    checks: AnswerChecks | None = None
    trimmer: Trimmer | None = None


def build_engine(
    tasks: RunTasks,
    journal: RunJournal,
    settings: EngineSettings,
    doors: Doors,
    *,
    resumed: Resumed | None = None,
    answers: AnswerRules | None = None,
    toolbox: AgentTools | None = None,
    response_cache: ResponseCache | None = None,
    admission: AdmissionController | None = None,
    simulated: bool = False,
) -> SwarmEngine:
    """The engine of a run. `toolbox`: the run's tools (every task then a multi-step agent; an
    orchestrator's agents spawn agents through them: `tools.swarm_tools`);
    `response_cache`: the cache a `--cache` run replays from and writes to; `admission`: shared
    by the engines of a distributed swarm (its RPM/TPM budget and Retry-After gate are the
    swarm's), instead of one of the engine's own."""
    if settings.guards.budget_usd is not None and doors.price is None:
        raise ValueError("a budget needs the model's price (none is known for it)")
    resumed = resumed or Resumed()
    by_number = by_index(tasks)
    board = TaskBoard.of(by_number, resumed.states)
    stats = RunStats()
    route = _route(doors, settings)
    return SwarmEngine(
        by_number,
        journal,
        settings,
        kernel=Kernel(
            board,
            stats,
            Outbox(journal, board, [stats.observe]),
            AttemptNumbers(resumed.attempts_made),
            TaskQueue(_unfinished(board)),
        ),
        pacing=_pacing(settings, admission, route),
        lanes=_LaneMaker(doors, route, answers or AnswerRules(), toolbox, response_cache),
        endpoint=doors.client.name,
        simulated=simulated,
    )


def _unfinished(board: TaskBoard) -> list[int]:
    """The tasks to run, in index order: the board's own keys (a million ints made once, not twice);
    every one of a run that has finished none (its kept counts say so: no state is read)."""
    states = board.states
    if not board.count(TaskState.SUCCEEDED) and not board.count(TaskState.FAILED):
        return sorted(states)
    return [index for index in sorted(states) if not states[index].is_final]


def _route(doors: Doors, settings: EngineSettings) -> Route | None:
    """A routed run's doors, each paced on its own (the primary and the fallback are its first)."""
    if doors.route is None:
        return None
    return build_route(
        doors.priced(),
        doors.route.strategy,
        concurrency=settings.pacing.concurrency,
        adaptive=settings.pacing.adaptive,
        max_price=doors.route.max_price,
    )


def _pacing(settings: EngineSettings, shared: AdmissionController | None, route: Route | None) -> Pacing:
    """The run's admission: the route's (its slots are the doors', each adaptive on its own), the
    swarm's shared one, or the engine's own; with the adaptive limit over it."""
    pacing = settings.pacing
    rate_limits = shared.rate_limits if shared is not None and route is None else RateLimits(pacing.rpm, pacing.tpm)
    adaptive = AdaptiveConcurrency(pacing.concurrency) if pacing.adaptive and route is None else None
    admission: AdmissionController
    if route is not None:
        admission = RouteAdmission(route)
    elif shared is not None:
        admission = shared
    else:
        admission = AdmissionController(pacing.concurrency, rate_limits=rate_limits)
    if adaptive is not None:
        admission.set_limit(adaptive.limit)
    return Pacing(
        admission,
        rate_limits,
        adaptive,
        SpendLedger(settings.guards.budget_usd),
        RetryPolicy(max_attempts=settings.guards.max_attempts),
    )


@dataclass(frozen=True)
class _LaneMaker:
    """Makes an engine's lanes, with the engine as their host (`SwarmEngine` calls it once)."""

    doors: Doors
    route: Route | None
    answers: AnswerRules
    toolbox: AgentTools | None
    response_cache: ResponseCache | None

    def __call__(self, engine: SwarmEngine) -> Lanes:
        doors, settings = self.doors, engine.settings
        endpoints = Endpoints(
            engine.outbox,
            doors.client,
            doors.fallback,
            admission=engine.admission,
            rate_limits=engine.rate_limits,
            adaptive=engine.adaptive,
            adapt=engine.adapt,
            route=self.route,
            escalation=doors.escalation,
        )
        billed: Sequence[tuple[ProviderClient, Price | None]] = doors.billed()
        billing = Billing(
            engine.ledger,
            {door.name: price for door, price in billed},
            engine.stop_dispatch,
            engine.calls_out,
            {door.name: door.service_tier for door, _ in billed},
        )
        calls = settings.calls
        tail = TailDeadlines(
            calls.timeout_s,
            hedge_factor=calls.hedge_factor if calls.hedge else None,
            straggler_factor=calls.straggler_factor,
        )
        tools = ToolSteps(engine, self.toolbox)
        checks = self.answers.checks or AnswerChecks(None, settings.answers)

        def body_of(index: int) -> JSONObject:
            """What the live lane sends the primary for a task (its tools offered): what a cache key is of."""
            return tools.offered(index, engine.tasks[index].body)

        cache = cache_lane_of(
            engine,
            self.response_cache,
            doors.client,
            body_of,
            checks,
            tools.on_tool_request if tools.enabled else None,
        )
        live = LiveLane(
            engine,
            endpoints,
            billing,
            tail,
            tools,
            checks=checks,
            trimmer=self.answers.trimmer,
            answer_kept=cache.remember if cache is not None else None,
            step_replay=cache.replay_step if cache is not None and tools.enabled else None,
        )
        direct = DirectLane(engine, endpoints, billing, live.capped, cache)
        deadline = settings.lanes.deadline_at
        planner = (
            Autopilot(engine, deadline, doors.price) if deadline is not None and settings.lanes.lane == AUTO else None
        )
        batch = batch_lane_of(engine, doors.client, doors.price, checks, planner)
        pacing = settings.pacing
        suspension = Suspension(engine, direct.probe, on_quota=pacing.on_quota, max_suspend_s=pacing.max_suspend_s)
        return Lanes(live, direct, in_claim_order(cache, batch), endpoints, tail, suspension)
