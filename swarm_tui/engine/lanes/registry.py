"""The lanes besides the live one, and the order they claim their tasks in when a run starts: the
cache lane first (a cached answer is neither sent live nor put in a batch), then the batch lane;
whatever is left goes live.

Adding a lane is a module that implements `engine.ports.Lane` (acting on the engine only through
`engine.ports.LaneHost`), a function here that makes it for a run (or None when the run does not
use it), and its place in `in_claim_order`: the engine is not edited. The Ray driver makes its
batch lane here too (it owns a distributed run's batches).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from swarm_tui.core.lanes import LIVE
from swarm_tui.engine.lanes.batch import BatchLane
from swarm_tui.engine.lanes.batch_lines import BatchLimits
from swarm_tui.engine.lanes.cache import CacheLane

if TYPE_CHECKING:
    from swarm_tui.cache import ResponseCache
    from swarm_tui.core.events import Attempt
    from swarm_tui.core.task import JSONObject
    from swarm_tui.engine.answers import AnswerChecks
    from swarm_tui.engine.ports import Lane, LaneHost, Planner
    from swarm_tui.pricing import Price
    from swarm_tui.providers.client import CallResult, ProviderClient


def in_claim_order(cache: CacheLane | None, batch: BatchLane | None) -> list[Lane]:
    """The run's other lanes, in the order they claim their tasks."""
    return [lane for lane in (cache, batch) if lane is not None]


def cache_lane_of(
    host: LaneHost,
    cache: ResponseCache | None,
    client: ProviderClient,
    body_of: Callable[[int], JSONObject],
    checks: AnswerChecks | None,
    on_step: Callable[[int, Attempt, CallResult], None] | None,
) -> CacheLane | None:
    """The cache lane of a run with `--cache` (a cache that reads or writes), else None. `body_of`:
    what the live lane would send the primary for a task; `on_step`: how an agent's step goes on
    (its tools), when the run's tasks are multi-step agents."""
    if cache is None or not (cache.reading or cache.writing):
        return None
    return CacheLane(host, cache, client, body_of, checks, on_step)


def batch_lane_of(
    host: LaneHost,
    client: ProviderClient,
    price: Price | None,
    checks: AnswerChecks | None,
    planner: Planner | None = None,
) -> BatchLane | None:
    """The batch lane of a run that asks for it (`--lane batch|auto`), or of a live run resuming one
    whose batches are still open (it follows them: never sends their tasks again); else None.
    `host`: the local engine, or the Ray driver (which owns a distributed run's batches);
    `planner`: a deadline run's autopilot."""
    settings = host.settings
    if settings.lanes.lane == LIVE and not host.journal.open_batches():
        return None
    limits = BatchLimits(settings.lanes.batch_max_requests, settings.lanes.batch_max_bytes)
    return BatchLane(host, client, settings.lanes.lane, price, limits, checks, planner)
