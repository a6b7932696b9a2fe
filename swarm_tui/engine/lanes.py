"""How a task's attempt is carried: a live call, or a line of a provider batch (the Batch API).

The lane is in an attempt's endpoint name: `<provider>` for a live call, `<provider>/batch` for
a batch line (billed at the batch rate, `Price.batch_price`). Everything else about a task (its
states, attempts, results) is the same in both lanes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .events import Attempt

LIVE = "live"
BATCH = "batch"
AUTO = "auto"
"""A first share of the tasks live (a broken prompt or key shows in seconds), the rest as a batch."""
LANES = (LIVE, BATCH, AUTO)

BATCH_SUFFIX = "/batch"


def batch_endpoint(provider: str) -> str:
    return f"{provider}{BATCH_SUFFIX}"


def is_batch_endpoint(endpoint: str) -> bool:
    return endpoint.endswith(BATCH_SUFFIX)


@dataclass(frozen=True)
class BatchRow:
    """A batch of the batch lane whose lines are not journaled yet."""

    row: int
    endpoint: str
    input_file_id: str
    batch_id: str | None
    """None: the process stopped after the upload, before the batch's id was journaled."""
    status: str
    tasks: list[tuple[int, int]]
    """(task index, attempt number) of each line."""
    submitted_at: float


@dataclass
class BatchLines:
    """What a finished batch's output and error files said, line by line, as attempts."""

    succeeded: list[tuple[Attempt, dict[str, Any]]] = field(default_factory=list)
    failed: list[Attempt] = field(default_factory=list)
    retried: list[Attempt] = field(default_factory=list)
    unfinished: list[Attempt] = field(default_factory=list)
    """Lines not run (the batch was cancelled): their tasks wait for the next session."""
