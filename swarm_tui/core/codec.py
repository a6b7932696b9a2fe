"""Engine events as journal rows, and back: the run's event log.

Every event the engine emits is written to the journal's `log` table (a sequence number, the
wall-clock time, the event's class name and its fields as JSON), in the same transaction as
the state change it reports, before any listener hears of it. A view attached from another
process reads the log from a sequence number and replays the very same events through the
same code the live view uses (`TaskBoard`, `RunStats`, the TUI): nothing is reconstructed.

The encoding is plain JSON of the dataclass fields. What is never written: an error's
`rate_headers` (raw provider headers, useless to a view), and an event's payload for the
journal's tables (`events.payload()` fields: an answer's bytes, a transcript, a tool's result,
added tasks' bodies), which the journal writes to its tables instead; decoded, they are None.
Error messages are redacted where they are made (`providers.errors`), so no key reaches the log.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from swarm_tui.core import events as ev
from swarm_tui.core import notes
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.events import Attempt, EngineEvent, TaskState
from swarm_tui.core.usage import Usage

EVENT_TYPES: dict[str, type[EngineEvent]] = {
    cls.__name__: cls
    for cls in (
        ev.RunStarted,
        ev.TaskQueued,
        ev.AttemptStarted,
        ev.AttemptEnded,
        ev.TaskRetrying,
        ev.TaskSucceeded,
        ev.TaskFailed,
        ev.TaskCancelled,
        ev.AgentStepped,
        ev.ToolCallEnded,
        ev.RunPaused,
        ev.RunResumed,
        ev.ConcurrencyChanged,
        ev.RateGateClosed,
        ev.RateLimitsLearned,
        ev.EndpointSwitched,
        ev.PlanChanged,
        ev.TasksAdded,
        ev.PhaseChanged,
        ev.PhaseAttempt,
        ev.BatchSubmitted,
        ev.BatchProgress,
        ev.BatchEnded,
        ev.AnswerJudged,
        ev.QualityDrift,
        ev.RunStopping,
        ev.RunFinished,
        ev.DispatchWaiting,
        ev.CallProgress,
        ev.AgentSilent,
        ev.RunSuspended,
        ev.SuspensionEnded,
        notes.SessionStarted,
        notes.TaskTrimmed,
        notes.BatchRefused,
        notes.BatchLookupFailed,
        notes.BatchPollFailed,
        notes.JudgeFailed,
        notes.MemoryFlushed,
        notes.PlanMade,
        notes.AggregateWritten,
        notes.SwarmFinished,
        notes.RayStarted,
        notes.ActorLost,
        notes.CacheUnavailable,
    )
}
"""Every event type the log holds, by the name it is written under."""

_NOT_WRITTEN = frozenset({"rate_headers"})
_SHAPES: dict[type, tuple[tuple[str, Any], ...]] = {}
"""(field name, default) of each dataclass written, looked up once per type."""


def encode(event: EngineEvent) -> tuple[str, str]:
    """(kind, JSON data) of an event, as the log stores it."""
    return type(event).__name__, json.dumps(_plain(event), ensure_ascii=False, separators=(",", ":"))


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # most fields: nothing to do
        return value
    if kind is float:  # an attempt's times and cost: no dataclass to look for
        return None if math.isnan(value) else value  # NaN: an unknown delay (a retry replayed from an old journal)
    if kind is tuple:  # the checks an answer passed, an added task's indices
        return [_plain(v) for v in value]
    shape = _SHAPES.get(kind)
    if shape is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        shape = _SHAPES[type(value)] = tuple(
            (f.name, f.default) for f in dataclasses.fields(value) if f.name not in _NOT_WRITTEN and ev.is_logged(f)
        )
    if shape is not None:
        out = {}
        for name, default in shape:
            field_value = getattr(value, name)
            if field_value is not default and field_value != default:
                out[name] = _plain(field_value)
        return out
    if isinstance(value, str | int | bool) or value is None:
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None  # an unknown delay (a retry replayed from an old journal)
    return value


def decode(kind: str, data: str | None) -> EngineEvent:
    """The event a log row holds; ValueError for a kind this version does not know."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r} in the journal's log")
    fields: dict[str, Any] = json.loads(data) if data else {}
    return cls(**{name: _FIELD_DECODERS.get(name, _same)(value) for name, value in fields.items()})


def _same(value: Any) -> Any:
    return value


def _attempt(data: Mapping[str, Any] | None) -> Attempt | None:
    if data is None:
        return None
    return Attempt(
        **{
            **data,
            "error": _error(data.get("error")),
            "usage": Usage(**data["usage"]) if "usage" in data else Usage(),
        }
    )


def _error(data: Mapping[str, Any] | None) -> CallError | None:
    if data is None:
        return None
    try:
        kind = ErrorClass(data["kind"])
    except ValueError:
        kind = ErrorClass.UNEXPECTED
    return CallError(**{**data, "kind": kind})


_FIELD_DECODERS: dict[str, Callable[[Any], Any]] = {
    "attempt": _attempt,
    "previous": TaskState,
    "indices": tuple,
    "numbers": tuple,
    "tools": tuple,
    "checks": tuple,
    "subtasks": tuple,
    "delay_s": lambda value: math.nan if value is None else value,
    "spawn": lambda value: None if value is None else ev.Spawn(**value),
}
