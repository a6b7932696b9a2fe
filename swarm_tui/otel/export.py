"""`swarm-tui export-traces RUN`: a run's journal, any schema, sent as its trace after the fact.

The spans are the live export's (the same model, `otel.model`, fed from the journal's log by
`otel.journal_source`), with the same ids (`otel.ids`): sending a run again, or after a live
export, gives a collector the same trace. Sent in batches by the standard OTLP/HTTP exporter;
a batch the collector does not take at once (within `sdk.CLOSE_GRACE_S`, no retries with
backoff) ends the export, the rest counted as not delivered: a collector that is down costs a
second, and the command says so (exit 1; run it again when the collector is up).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarm_tui.journal import Journal
from swarm_tui.otel.ids import SpanIds, run_identity
from swarm_tui.otel.journal_source import JournalFacts, timeline
from swarm_tui.otel.model import SpanModel
from swarm_tui.otel.report import TraceReport
from swarm_tui.otel.sdk import SpanConverter, make_exporter, require_sdk
from swarm_tui.otel.spans import SpanRecord
from swarm_tui.records import RunMeta

BATCH_SPANS = 512
"""Spans per OTLP request (the batch processor's default batch)."""


def journal_spans(run_dir: Path, *, content: bool = False) -> tuple[SpanIds, RunMeta, list[SpanRecord]]:
    """(ids, the run's record, every span) of the run in `run_dir`, read-only."""
    journal = Journal.open(run_dir, readonly=True)
    try:
        meta = RunMeta.read(journal)
        ids = SpanIds(run_identity(meta))
        model = SpanModel(ids, JournalFacts(journal, meta, content=content))
        records = [record for at, event in timeline(journal) for record in model.feed(at, event)]
        records.extend(model.close())
    finally:
        journal.close()
    return ids, meta, records


def resource_attributes(meta: RunMeta) -> dict[str, Any]:
    return {"swarm_tui.job": meta.job.name}


def export_run(run_dir: Path, endpoint: str | None = None, *, content: bool = False) -> TraceReport:
    require_sdk("export-traces")
    ids, meta, records = journal_spans(run_dir, content=content)
    exporter = make_exporter(endpoint)
    exporter.give_up()  # a batch the collector does not take within the grace: the rest are not tried
    converter = SpanConverter(ids.trace_id, resource_attributes(meta))
    try:
        for start in range(0, len(records), BATCH_SPANS):
            exporter.export([converter.convert(r) for r in records[start : start + BATCH_SPANS]])
            if exporter.failing:
                break
    finally:
        exporter.shutdown()
    return TraceReport(f"{ids.trace_id:032x}", exporter.endpoint, len(records), exporter.exported)
