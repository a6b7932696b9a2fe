"""The registry of lanes besides the live one: each entry makes the lane for an engine, or None
when the run does not use it. When a run starts, the lanes claim their tasks out of the live
queue in this order; whatever is left goes live.

Adding a lane is a module that implements `core.ports.Lane` (through `core.ports.LaneHost`, the
kernel's public side) and one entry here: the kernel is not edited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from swarm_tui.core.lanes import AUTO, LIVE
from swarm_tui.core.ports import Lane, LaneHost
from swarm_tui.engine.lanes import cache as cache_lane
from swarm_tui.engine.lanes.autopilot import Autopilot
from swarm_tui.engine.lanes.batch import BatchLane
from swarm_tui.engine.lanes.batch_lines import BatchLimits

if TYPE_CHECKING:
    from swarm_tui.engine.engine import SwarmEngine
    from swarm_tui.engine.settings import Validator
    from swarm_tui.pricing import Price
    from swarm_tui.providers.client import ProviderClient

LaneFactory = Callable[["SwarmEngine"], "Lane | None"]

REGISTERED: tuple[LaneFactory, ...] = (
    cache_lane.make_lane,  # first: a cached answer is neither sent live nor put in a batch
    lambda engine: with_autopilot(engine, batch_lane_of(engine, engine.client, engine.price, engine.validator)),
)


def lanes_for(engine: SwarmEngine) -> list[Lane]:
    return [lane for make in REGISTERED if (lane := make(engine)) is not None]


def batch_lane_of(
    host: LaneHost, client: ProviderClient, price: Price | None, validator: Validator | None
) -> BatchLane | None:
    """The batch lane of a run that asks for it (`--lane batch|auto`), or of a live run resuming one
    whose batches are still open (it follows them: never sends their tasks again); else None.
    `host`: the local kernel, or the Ray driver (which owns a distributed run's batches)."""
    settings = host.settings
    open_batches = getattr(host.journal, "open_batches", None)  # a shard's forwarding journal has none
    follows_batches = open_batches is not None and bool(open_batches())
    if settings.lanes.lane == LIVE and not follows_batches:
        return None
    limits = BatchLimits(settings.lanes.batch_max_requests, settings.lanes.batch_max_bytes)
    return BatchLane(host, client, settings.lanes.lane, price, limits, validator)


def with_autopilot(engine: SwarmEngine, lane: BatchLane | None) -> BatchLane | None:
    """A deadline run's batch lane planned by the autopilot (it reads the local kernel's figures)."""
    settings = engine.settings
    if lane is not None and settings.lanes.deadline_at is not None and settings.lanes.lane == AUTO:
        lane.planner = Autopilot(engine, settings.lanes.deadline_at)
    return lane
