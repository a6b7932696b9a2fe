"""`--otel`: the run's spans exported while it goes, by a listener of its engine.

The listener keeps each event with its time; the tracer's thread turns them into the spans they
end (`otel.model`) and hands the records to the SDK's `BatchSpanProcessor`, whose thread makes
them into the SDK's spans and sends them (standard OTLP/HTTP exporter, `OTEL_EXPORTER_OTLP_*`,
`OTEL_BSP_*`): the event loop never waits for the collector, nor builds a span. A collector
that is down costs the run nothing: spans that cannot be sent are dropped and counted, the
count is said once at the end (`TraceReport`, in summary.json's `traces`), and a failure of
the tracer itself is logged once and the export stops, never the run.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from swarm_tui.journal import Journal
from swarm_tui.otel.export import resource_attributes
from swarm_tui.otel.facts import LiveFacts
from swarm_tui.otel.ids import SpanIds, run_identity
from swarm_tui.otel.model import SpanModel
from swarm_tui.otel.report import TraceReport
from swarm_tui.otel.sdk import CLOSE_GRACE_S, QueuedSpan, SpanConverter, make_exporter, require_sdk
from swarm_tui.otel.spans import SpanRecord
from swarm_tui.records import RunMeta

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("swarm_tui.otel")

CLOSE_TIMEOUT_MS = 10_000
"""How long the end of a run waits for the last spans to reach a collector that answers."""
CONSUME_EVERY_S = 0.5
"""How often the tracer's thread turns the events that came into spans (sooner past `WAKE_EVENTS`)."""
WAKE_EVENTS = 2048
BACKLOG_EVENTS = 200_000
"""Events kept unread while the collector is down (their spans would only be dropped; they are
counted at the end): past this, they are read anyway, so memory stays bounded."""
QUEUE_SPANS = 16_384
"""The batch processor's queue (OTEL_BSP_MAX_QUEUE_SIZE, when set, decides): a burst of a fast
run's spans must not overflow the SDK's default 2,048 while a collector that answers takes them."""


class LiveTracer:
    """Subscribe it to an engine (`engine.subscribe(tracer)`); `close()` once the run is over.

    On the loop, an event costs one append (`__call__`); the tracer's thread turns the events
    into spans (`otel.model`) and hands them to the batch processor. While the collector is
    down it leaves them unread (they would be dropped) and asks every `CONSUME_EVERY_S` whether
    it is back; at the end they are read to count what was not delivered."""

    def __init__(
        self, journal: Journal, tasks: Mapping[int, Any], *, content: bool = False, endpoint: str | None = None
    ) -> None:
        require_sdk("--otel")
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        meta = RunMeta.read(journal)
        self.ids = SpanIds(run_identity(meta))
        self.facts = LiveFacts(tasks, meta, content=content, run_dir=journal.path.parent)
        self.model = SpanModel(self.ids, self.facts, session=journal.session)
        self.exporter = make_exporter(endpoint, SpanConverter(self.ids.trace_id, resource_attributes(meta)))
        queue = None if "OTEL_BSP_MAX_QUEUE_SIZE" in os.environ else QUEUE_SPANS
        # CountingExporter is a SpanExporter by its methods (the SDK is not imported before an export runs)
        self.processor = BatchSpanProcessor(cast("SpanExporter", self.exporter), max_queue_size=queue)
        if not self.exporter.reachable():  # a collector down from the start: no batch is made until it is up
            self.exporter.failing = True
        self.spans = 0
        self.broken = False
        self.report: TraceReport | None = None
        self._events: deque[tuple[float, Any]] = deque()
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._consume, name="swarm-tui-otel", daemon=True)
        self._thread.start()

    @classmethod
    def subscribed(cls, engine: Any, journal: Journal, *, content: bool, endpoint: str | None) -> LiveTracer:
        """A tracer of the run `journal` keeps, listening to its `engine` (`SwarmSession.trace`)."""
        tracer = cls(journal, engine.tasks, content=content, endpoint=endpoint)
        engine.subscribe(tracer)
        return tracer

    def __call__(self, event: Any) -> None:
        """The engine's listener, on its loop: the event and its time, kept for the tracer's thread."""
        events = self._events
        events.append((time.time(), event))
        if len(events) == WAKE_EVENTS:
            self._wake.set()

    def _consume(self) -> None:
        while not self._closing:
            self._wake.wait(CONSUME_EVERY_S)
            self._wake.clear()
            if self._closing:
                break
            if self.exporter.failing and len(self._events) < BACKLOG_EVENTS:
                if not self.exporter.reachable():
                    continue  # its spans would be dropped: read at the end, to count them
                self.exporter.failing = False
            self._read()
        self._read()
        self.facts.close()

    def _read(self) -> None:
        events = self._events
        while events:
            at, event = events.popleft()
            if self.broken:
                continue
            try:
                for record in self.model.feed(at, event):
                    self._send(record)
            except Exception:  # the trace is not the run: it stops, the swarm goes on
                self.broken = True
                log.exception("the OpenTelemetry export stopped on %r", type(event).__name__)

    def _send(self, record: SpanRecord) -> None:
        self.spans += 1
        self.processor.on_end(QueuedSpan(record))  # type: ignore[arg-type]  # made into the SDK's span when sent

    def close(self) -> TraceReport:
        """Read the events left, end the session's open spans, send what is queued (a collector
        that has been failing is given up on at once), and say what was delivered. Blocking:
        call it off the loop."""
        if self.report is not None:
            return self.report
        self._closing = True
        self._wake.set()
        self._thread.join()
        if not self.broken:
            try:
                for record in self.model.close(time.time()):
                    self._send(record)
            except Exception:
                log.exception("the OpenTelemetry export could not end its spans")
        if self.exporter.failing and self.exporter.reachable():
            self.exporter.failing = False  # it came back since the thread last looked: the end tries it
        self.exporter.give_up(CLOSE_GRACE_S)  # from now on, once an export fails the rest are dropped at once
        if not self.exporter.failing:
            self.processor.force_flush(CLOSE_TIMEOUT_MS)
        self.processor.shutdown()
        trace_id = f"{self.ids.trace_id:032x}"
        self.report = TraceReport(trace_id, self.exporter.endpoint, self.spans, self.exporter.exported)
        return self.report
