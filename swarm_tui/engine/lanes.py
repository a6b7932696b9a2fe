"""The registry of lanes besides the live one: each entry makes the lane for an engine, or None
when the run does not use it. When a run starts, the lanes claim their tasks out of the live
queue in this order; whatever is left goes live.

Adding a lane is a module that implements `core.ports.Lane` (through `core.ports.LaneHost`, the
kernel's public side) and one entry here: the kernel is not edited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.ports import Lane
from . import batch_lane, cache_lane

if TYPE_CHECKING:
    from .engine import SwarmEngine

LaneFactory = Callable[["SwarmEngine"], "Lane | None"]

REGISTERED: tuple[LaneFactory, ...] = (
    cache_lane.make_lane,  # first: a cached answer is neither sent live nor put in a batch
    lambda engine: batch_lane.make_lane(engine, engine.client, engine.price, engine.validator),
)


def lanes_for(engine: SwarmEngine) -> list[Lane]:
    return [lane for make in REGISTERED if (lane := make(engine)) is not None]
