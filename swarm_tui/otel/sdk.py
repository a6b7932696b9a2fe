"""OpenTelemetry's SDK, behind one door: the `otel` extra's check, the standard OTLP/HTTP exporter,
and the span records (`otel.spans`) turned into the SDK's spans.

The exporter is the SDK's own (`OTLPSpanExporter`), so the standard `OTEL_EXPORTER_OTLP_*`
variables apply as they do everywhere (endpoint, headers such as a Langfuse key, timeout,
compression, certificates); `--endpoint` is an OTLP base URL like `OTEL_EXPORTER_OTLP_ENDPOINT`,
the traces path added unless it is there. `CountingExporter` counts what the collector took and
what it did not; the SDK's own warnings about an unreachable collector are silenced (the run
reports the count once instead: a collector that is down is not an error of the swarm).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

from swarm_tui.core.errors import InputError
from swarm_tui.otel.spans import CLIENT, SpanRecord
from swarm_tui.util import secrets

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

EXTRA = "otel"
INSTALL_HINT = f"pip install 'swarm-tui[{EXTRA}]'"
TRACES_PATH = "/v1/traces"
SCOPE_NAME = "swarm_tui"
PROBE_TIMEOUT_S = 1.0
"""How long a check that a failing collector is back waits for its connection (off the loop)."""
CLOSE_GRACE_S = 1.0
"""How long the end of a run lets an export under way finish before it counts the collector as down."""
SDK_LOGGERS = ("opentelemetry.exporter", "opentelemetry.sdk", "opentelemetry.exporter.otlp.common")
"""Loggers of the SDK that warn on every failed export: quiet while swarm-tui exports (it counts them)."""


def require_sdk(flag: str) -> None:
    """InputError (exit 2) naming the extra when OpenTelemetry's SDK or its OTLP/HTTP exporter is
    not installed; `flag` is what asked for it (`--otel`, `export-traces`)."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise InputError.single(
            flag, "otel", f"needs OpenTelemetry's SDK and OTLP/HTTP exporter ({exc.name} is missing): {INSTALL_HINT}"
        ) from None


def traces_url(endpoint: str | None) -> str | None:
    """The OTLP/HTTP traces URL of `--endpoint` (a base URL, or the traces URL itself); None:
    the standard variables decide (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT)."""
    if not endpoint:
        return None
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def quiet_sdk_logs() -> None:
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


class CountingExporter:
    """The OTLP/HTTP exporter, counting the spans it delivered and those it could not.

    `give_up()`: the run is over; a collector that is failing (or has not answered an export
    within `CLOSE_GRACE_S`: the SDK is retrying it with backoff) is given up on, the spans still
    queued counted as dropped without another try. A collector that is down must not hold the run's end
    for the exporter's retries and timeouts; one that answers gets the rest of the queue."""

    def __init__(self, inner: SpanExporter, converter: SpanConverter | None = None) -> None:
        self.inner = inner
        self.converter = converter
        """Given: the spans come as `QueuedSpan`s, made into the SDK's here (off the loop)."""
        self.exported = 0
        self.failed = 0
        self.failing = False
        """The last export failed."""
        self._giving_up = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self._inner_shut = False
        self._grace_s = CLOSE_GRACE_S

    @property
    def endpoint(self) -> str:
        return str(getattr(self.inner, "_endpoint", ""))  # the SDK's resolved URL (no public accessor)

    def export(self, spans: Sequence[Any]) -> Any:
        """`spans`: the SDK's, or `QueuedSpan`s when the exporter has a converter."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        if self.failing and (self._giving_up.is_set() or not self.reachable()):
            self.failed += len(spans)  # not made, not encoded: a collector that is down costs nothing more
            return SpanExportResult.FAILURE
        watchdog = None
        if self._giving_up.is_set():  # the run is over: one try, not the SDK's retries with backoff
            watchdog = threading.Timer(self._grace_s, self._shut_inner)
            watchdog.daemon = True
            watchdog.start()
        self._idle.clear()
        try:
            converter = self.converter
            result = self.inner.export([converter.convert(s.record) for s in spans] if converter else spans)
        except Exception:  # an exporter that raises is a failed export, not the run's problem
            result = SpanExportResult.FAILURE
        finally:
            self._idle.set()
            if watchdog is not None:
                watchdog.cancel()
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
            self.failing = False
        else:
            self.failed += len(spans)
            self.failing = True
        return result

    def reachable(self) -> bool:
        """Whether the collector takes a connection (asked before a batch is made, once an export has
        failed: the batches of a run whose collector is down are never made or encoded). True when
        it cannot be told: through a proxy, or an endpoint that does not parse."""
        address = direct_address(self.endpoint)
        if address is None:
            return True
        try:
            socket.create_connection(address, timeout=PROBE_TIMEOUT_S).close()
        except OSError:
            return False
        return True

    def give_up(self, grace_s: float = CLOSE_GRACE_S) -> None:
        self._grace_s = grace_s
        self._giving_up.set()
        if not self._idle.wait(grace_s):
            self.failing = True  # still at it: retrying a collector that does not answer
        if self.failing:
            self._shut_inner()  # interrupts a retry's backoff

    def shutdown(self) -> None:
        self._shut_inner()

    def _shut_inner(self) -> None:
        with self._lock:
            if self._inner_shut:
                return
            self._inner_shut = True
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def direct_address(url: str) -> tuple[str, int] | None:
    """(host, port) a URL's requests connect to directly; None through a proxy (or no URL)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = parts.hostname
    if not host or (parts.scheme in getproxies() and not proxy_bypass(host)):
        return None
    return host, port


def make_exporter(endpoint: str | None, converter: SpanConverter | None = None) -> CountingExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    quiet_sdk_logs()
    return CountingExporter(OTLPSpanExporter(endpoint=traces_url(endpoint)), converter)


class SpanConverter:
    """Span records -> the SDK's `ReadableSpan`s of one trace."""

    def __init__(self, trace_id: int, resource_attributes: dict[str, Any]) -> None:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanKind, Status, StatusCode

        from swarm_tui import __version__

        self.trace_id = trace_id
        self.resource: Resource = Resource.create(
            {"service.name": "swarm-tui", **secrets.mask_value(resource_attributes)}
        )
        self.scope: InstrumentationScope = InstrumentationScope(SCOPE_NAME, __version__)
        flags = trace.TraceFlags(trace.TraceFlags.SAMPLED)
        self._context = lambda span_id: trace.SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags)
        self._event, self._span = Event, ReadableSpan
        self._kinds = {CLIENT: SpanKind.CLIENT}
        self._internal = SpanKind.INTERNAL
        self._unset = Status(StatusCode.UNSET)
        self._error = lambda description: Status(StatusCode.ERROR, description)

    def convert(self, record: SpanRecord) -> ReadableSpan:
        """The SDK's span of `record`: the one door every span leaves by, live or exported from a
        journal, so the process's secrets are masked here (`swarm_tui.util.secrets`), in every
        attribute, event and status: with `--otel-content`, a prompt holds what the user wrote."""
        mask = secrets.mask_value
        return self._span(
            mask(record.name),
            context=self._context(record.span_id),
            parent=self._context(record.parent_id) if record.parent_id is not None else None,
            resource=self.resource,
            attributes=mask(record.all_attributes()),
            events=[self._event(e.name, mask(e.attributes), _ns(e.at)) for e in record.events],
            kind=self._kinds.get(record.kind, self._internal),
            status=self._error(mask(record.error)) if record.error is not None else self._unset,
            start_time=_ns(record.start),
            end_time=_ns(record.end),
            instrumentation_scope=self.scope,
        )


class QueuedSpan:
    """A span record in the batch processor's queue, made into the SDK's span only when its batch
    is sent (`CountingExporter(converter=...)`, on the processor's thread): the run's loop pays
    for the record alone, and a span dropped (its collector down, the queue full) is never made."""

    __slots__ = ("record",)
    context = SimpleNamespace(trace_flags=SimpleNamespace(sampled=True))
    """What the processor asks of a span before it queues it (whether it is sampled: always)."""

    def __init__(self, record: SpanRecord) -> None:
        self.record = record


def _ns(epoch_s: float) -> int:
    return int(round(epoch_s * 1e9))
