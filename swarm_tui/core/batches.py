"""What the journal keeps of the batch lane's batches (see `batch_lane`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swarm_tui.core.events import Attempt


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
    parsed: dict[int, str] = field(default_factory=dict)
    """A succeeded line's JSON value as the answer checks read it, by task."""
    bodies: dict[int, dict[str, Any]] = field(default_factory=dict)
    """A retried line's next request, when it changed (its answer asked for again), by task."""
