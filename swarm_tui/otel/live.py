"""`--otel`: the run's spans exported while it goes, by a listener of its engine.

The listener turns each event into the spans it ends (`otel.model`, cheap: no I/O) and hands
the records to the SDK's `BatchSpanProcessor`, whose thread makes them into the SDK's spans and
sends them (standard OTLP/HTTP exporter, `OTEL_EXPORTER_OTLP_*`, `OTEL_BSP_*`): the event loop
never waits for the collector. A collector that is down costs the run nothing: spans that
cannot be sent are dropped and counted, the count is said once at the end (`TraceReport`, in
summary.json's `traces`), and a failure of the listener itself is logged once and the export
stops, never the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ..journal import Journal
from .export import resource_attributes
from .facts import LiveFacts
from .ids import SpanIds, run_identity
from .model import SpanModel
from .report import TraceReport
from .sdk import CLOSE_GRACE_S, QueuedSpan, SpanConverter, make_exporter, require_sdk
from .spans import SpanRecord

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("swarm_tui.otel")

CLOSE_TIMEOUT_MS = 10_000
"""How long the end of a run waits for the last spans to reach a collector that answers."""


class LiveTracer:
    """Subscribe it to an engine (`engine.subscribe(tracer)`); `close()` once the run is over."""

    def __init__(
        self, journal: Journal, tasks: Mapping[int, Any], *, content: bool = False, endpoint: str | None = None
    ) -> None:
        require_sdk("--otel")
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        meta = journal.meta()
        self.ids = SpanIds(run_identity(meta))
        self.model = SpanModel(self.ids, LiveFacts(tasks, meta, content=content), session=journal.session)
        self.exporter = make_exporter(endpoint, SpanConverter(self.ids.trace_id, resource_attributes(meta)))
        # CountingExporter is a SpanExporter by its methods (the SDK is not imported before an export runs)
        self.processor = BatchSpanProcessor(cast("SpanExporter", self.exporter))
        if not self.exporter.reachable():  # a collector down from the start: no batch is made until it is up
            self.exporter.failing = True
        self.spans = 0
        self.broken = False
        self.report: TraceReport | None = None

    def __call__(self, event: Any) -> None:
        if self.broken:
            return
        try:
            for record in self.model.feed(time.time(), event):
                self._send(record)
        except Exception:  # the trace is not the run: it stops, the swarm goes on
            self.broken = True
            log.exception("the OpenTelemetry export stopped on %r", type(event).__name__)

    def _send(self, record: SpanRecord) -> None:
        self.spans += 1
        self.processor.on_end(QueuedSpan(record))  # type: ignore[arg-type]  # made into the SDK's span when sent

    def close(self) -> TraceReport:
        """End the session's open spans, send what is queued (a collector that has been failing
        is given up on at once), and say what was delivered. Blocking: call it off the loop."""
        if self.report is not None:
            return self.report
        if not self.broken:
            try:
                for record in self.model.close(time.time()):
                    self._send(record)
            except Exception:
                log.exception("the OpenTelemetry export could not end its spans")
        self.exporter.give_up(CLOSE_GRACE_S)  # from now on, once an export fails the rest are dropped at once
        if not self.exporter.failing:
            self.processor.force_flush(CLOSE_TIMEOUT_MS)
        self.processor.shutdown()
        trace_id = f"{self.ids.trace_id:032x}"
        self.report = TraceReport(trace_id, self.exporter.endpoint, self.spans, self.exporter.exported)
        return self.report
