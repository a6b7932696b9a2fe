"""Spans as plain records: what the span model makes and the exporter turns into OpenTelemetry's.

The model (`otel.model`) needs nothing of OpenTelemetry, so it is one piece of code for the live
export and the journal's, and it stays cheap on the run's event loop: the SDK's objects are made
in the exporter (`otel.sdk`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CLIENT = "client"
INTERNAL = "internal"

Attributes = dict[str, Any]
"""Attribute values: str, bool, int, float, or a tuple of one of them (OpenTelemetry's kinds)."""


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    at: float
    """Epoch seconds."""
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class SpanRecord:
    """One span, finished: its times are the journal's (epoch seconds)."""

    name: str
    span_id: int
    parent_id: int | None
    start: float
    end: float
    kind: str = INTERNAL
    attributes: Attributes = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    """The span failed (status ERROR), and why; None: no status set."""
    deferred: Callable[[], Attributes] | None = None
    """More attributes, made only when the span is sent (`all_attributes`): an attempt's."""

    def all_attributes(self) -> Attributes:
        if self.deferred is None:
            return self.attributes
        return {**self.deferred(), **self.attributes}
