"""How a task's attempt is carried: a live call, or a line of a provider batch (the Batch API).

The lane is in an attempt's endpoint name: `<provider>` for a live call, `<provider>/batch` for
a batch line (billed at the batch rate, `Price.batch_price`). Everything else about a task (its
states, attempts, results) is the same in both lanes.
"""

from __future__ import annotations

LIVE = "live"
BATCH = "batch"
AUTO = "auto"
"""A first share of the tasks live (a broken prompt or key shows in seconds), the rest as a batch."""
LANES = (LIVE, BATCH, AUTO)
CACHE = "cache"
"""Not a lane a run chooses: an answer replayed from the response cache (`--cache`), whose
attempt's endpoint is `cache` (cost 0, its saving recorded)."""

BATCH_SUFFIX = "/batch"


def batch_endpoint(provider: str) -> str:
    return f"{provider}{BATCH_SUFFIX}"


def is_batch_endpoint(endpoint: str) -> bool:
    return endpoint.endswith(BATCH_SUFFIX)


def lane_of(endpoint: str | None) -> str:
    """`batch` for a batch-lane attempt's endpoint (`<provider>/batch`), `cache` for a replay, else `live`."""
    if endpoint == CACHE:
        return CACHE
    return BATCH if endpoint and is_batch_endpoint(endpoint) else LIVE
