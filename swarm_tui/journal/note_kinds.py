"""The run's notes by their old untyped names, as the typed events they are now (`core.notes`).

Up to schema 2 a note was a row of the `events` table: a kind ("failover", "trimmed",
"batch_refused"...) and a JSON object. Now each is a typed event in the one log. This table
turns an old row into its event, for the migration of an old journal (`journal.migrate`), for
reading one that cannot be written (read-only), and for the callers that still name a note by
its kind (`Journal.log_event`, until they emit the typed event).

Two kinds have no event of their own: a failover is the `EndpointSwitched` the engine logs with
it, a quality drift the `QualityDrift` the judge logs with it; a schema-2 journal already has
those in its log. A schema-1 journal has no log (it is rebuilt from its rows, `rebuilt=True`):
its failovers and drifts become those events, and its run events (run, paused, stopping...)
are read by the rebuilding follower, not here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from swarm_tui.core.events import EndpointSwitched, EngineEvent, QualityDrift
from swarm_tui.core.notes import (
    ActorLost,
    AggregateWritten,
    BatchLookupFailed,
    BatchPollFailed,
    BatchRefused,
    JudgeFailed,
    MemoryFlushed,
    PlanMade,
    RayStarted,
    SessionStarted,
    SwarmFinished,
    TaskTrimmed,
)

Data = Mapping[str, Any]

NOTES: dict[str, Callable[[Data], EngineEvent]] = {
    "session": lambda d: SessionStarted(d.get("pid") or 0),
    "trimmed": lambda d: TaskTrimmed(d["index"], d.get("custom_id") or ""),
    "batch_refused": lambda d: BatchRefused(d.get("step") or "", d.get("error") or "", d.get("status")),
    "batch_lookup_failed": lambda d: BatchLookupFailed(d.get("input_file_id") or "", d.get("error") or ""),
    "batch_poll_failed": lambda d: BatchPollFailed(d.get("batch_id") or "", d.get("error") or ""),
    "judge_failed": lambda d: JudgeFailed(d["index"], d.get("error") or ""),
    "memory_flushed": lambda d: MemoryFlushed(d.get("rounds") or 0),
    "plan": lambda d: PlanMade(tuple(d.get("subtasks") or ())),
    "aggregate": lambda d: AggregateWritten(d.get("round") or 0, d.get("file") or ""),
    "finished": lambda d: SwarmFinished(d.get("reason"), d.get("phase") or ""),
    "ray": lambda d: RayStarted(d.get("actors") or 0),
    "actor_lost": lambda d: ActorLost(d.get("shard", 0), d.get("actor", 0), d.get("error") or "", d.get("requeued", 0)),
}
"""Old kind -> its typed event (the old row's data as the event's fields)."""

LOGGED_WITH = frozenset({"failover", "quality_drift"})
"""Kinds whose event (`EndpointSwitched`, `QualityDrift`) is logged beside the note: no event of their own."""

REBUILT_RUN_KINDS = frozenset(
    {"run", "paused", "resumed", "phase", "concurrency", "rate_limits", "stopping", "finished"}
)
"""A schema-1 journal's run events: its rebuilt log has them (`migrate.JournalFollower`)."""


def note_event(kind: str, data: Data) -> EngineEvent | None:
    """The typed event a note of `kind` is now (None: its event is logged with it);
    ValueError for a kind no version wrote."""
    if kind in LOGGED_WITH:
        return None
    convert = NOTES.get(kind)
    if convert is None:
        raise ValueError(f"no event for a note of kind {kind!r}")
    return convert(data)


def old_note(kind: str, data: Data, *, rebuilt: bool) -> EngineEvent | None:
    """The typed event an old journal's `events` row becomes (None: nothing, or a kind this
    version does not know). `rebuilt`: the journal is of schema 1 (no log of its own)."""
    if rebuilt:
        if kind in REBUILT_RUN_KINDS:
            return None
        if kind == "failover":
            return EndpointSwitched(data.get("to") or "", data.get("reason") or "", data.get("from_primary"))
        if kind == "quality_drift":
            return QualityDrift(
                data.get("rolling") or 0.0,
                data.get("baseline") or 0.0,
                data.get("action") or "",
                data.get("detail") or "",
                data.get("round") or 1,
            )
    if kind in LOGGED_WITH or kind not in NOTES:
        return None
    try:
        return NOTES[kind](data)
    except (KeyError, TypeError):  # a row that does not have what its kind needs: nothing to keep
        return None
