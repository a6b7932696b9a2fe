"""What an export delivered: the figure summary.json and the console show (`traces`), said once."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TraceReport:
    trace_id: str
    """The run's trace id, 32 hex digits (the same at every export of the run)."""
    endpoint: str
    spans: int
    exported: int

    @property
    def dropped(self) -> int:
        """Spans the collector did not take (unreachable, refused, or the queue was full)."""
        return self.spans - self.exported

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceReport:
        """summary.json's `traces` read back."""
        return cls(str(data["trace_id"]), str(data["endpoint"]), int(data["spans"]), int(data["exported"]))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "dropped": self.dropped}

    def describe(self) -> str:
        if not self.dropped:
            return f"traces: {self.exported} spans of trace {self.trace_id} sent to {self.endpoint}"
        return (
            f"traces: {self.dropped} of {self.spans} spans of trace {self.trace_id} not delivered to {self.endpoint} "
            "(collector unreachable or refusing); the run is unaffected, and `swarm-tui export-traces` sends them again"
        )
