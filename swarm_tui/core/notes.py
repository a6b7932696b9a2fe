"""What a run notes besides its state changes: events that move no task.

They are logged like every event (`core.codec`), in the journal's one event log; summary.json
and the journal read them back (the judge's failures, the planner's sub-tasks...). A view may
show them or pass them by: no reducer needs them. Before schema 3 the journal kept them as
untyped rows of an `events` table (`journal.note_kinds` turns those into these).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SessionStarted:
    """A process began its work on the run (the log row's `session` numbers it)."""

    pid: int


@dataclass(frozen=True, slots=True)
class TaskTrimmed:
    """A task's context was too long: its request was shortened once (`trim`), to be sent again."""

    index: int
    custom_id: str


@dataclass(frozen=True, slots=True)
class BatchRefused:
    """The provider took no batch (`step`: upload or create): its tasks go live or wait to try again."""

    step: str
    error: str
    status: int | None = None


@dataclass(frozen=True, slots=True)
class BatchLookupFailed:
    """An uploaded batch file could not be matched to its batch (a resumed run looks it up)."""

    input_file_id: str
    error: str


@dataclass(frozen=True, slots=True)
class BatchPollFailed:
    """A poll of a batch failed; it is polled again."""

    batch_id: str
    error: str


@dataclass(frozen=True, slots=True)
class JudgeFailed:
    """The judge could not score a task's answer (summary.json counts them)."""

    index: int
    error: str


@dataclass(frozen=True, slots=True)
class MemoryFlushed:
    """The swarm forgot its earlier rounds (the user's key, or the judge's action on drift)."""

    rounds: int


@dataclass(frozen=True, slots=True)
class PlanMade:
    """The planner's sub-tasks, which become the run's tasks."""

    subtasks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AggregateWritten:
    """The aggregator's answer for a round was written to `file` in the run directory."""

    round: int
    file: str


@dataclass(frozen=True, slots=True)
class SwarmFinished:
    """A swarm's steps are over (`phase`: where it was; `reason`: why it stopped, None when done)."""

    reason: str | None
    phase: str


@dataclass(frozen=True, slots=True)
class RayStarted:
    """A run on Ray began with `actors` actors alive."""

    actors: int


@dataclass(frozen=True, slots=True)
class ActorLost:
    """A Ray actor (or its shard) was lost: its unfinished tasks went back to the queue."""

    shard: int
    actor: int
    error: str
    requeued: int


NOTE_TYPES = (
    SessionStarted,
    TaskTrimmed,
    BatchRefused,
    BatchLookupFailed,
    BatchPollFailed,
    JudgeFailed,
    MemoryFlushed,
    PlanMade,
    AggregateWritten,
    SwarmFinished,
    RayStarted,
    ActorLost,
)
"""Every note type: the journal logs them, the engine does not deliver them to its listeners (yet),
so a view replaying the log passes them by to see what a live view sees (`runlog.LogFollower`)."""


@dataclass(frozen=True, slots=True)
class CacheUnavailable:
    """The response cache could not be used (a corrupt or unreadable file, a full disk): said once;
    the run went on uncached, or without writing the cache (`writes_only`)."""

    message: str
    writes_only: bool = False
